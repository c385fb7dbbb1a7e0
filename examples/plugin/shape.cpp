// A plugin in C++: a class behind an extern "C" factory (`publish --plugin
// shape=plugins/shape.so:shape_create`). SHAPE_VERSION 1 is a square, 2 a circle.
#include "shape_api.h"

#include <new>

#ifndef SHAPE_VERSION
#define SHAPE_VERSION 1
#endif

namespace {
struct Square final : Shape {
    const char *name() const override { return "square (shape plugin 1)"; }
    double area() const override { return 2.0 * 2.0; }
};
struct Circle final : Shape {
    const char *name() const override { return "circle (shape plugin 2)"; }
    double area() const override { return 3.14159265358979 * 1.5 * 1.5; }
};
}  // namespace

extern "C" {
// No exception may cross into the host: allocation failure gives NULL.
void *shape_create(void) {
#if SHAPE_VERSION >= 2
    return static_cast<Shape *>(new (std::nothrow) Circle());
#else
    return static_cast<Shape *>(new (std::nothrow) Square());
#endif
}
void shape_destroy(void *s) { delete static_cast<Shape *>(s); }
const char *shape_name(void *s) { return static_cast<Shape *>(s)->name(); }
double shape_area(void *s) { return static_cast<Shape *>(s)->area(); }
}
