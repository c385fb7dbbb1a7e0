/* The interface a host and its C++ plugins share. The plugin's entry is an extern "C" factory:
 * the Linux form of "instantiate the entry class by name". */
#ifndef SHAPE_API_H
#define SHAPE_API_H

#ifdef __cplusplus
struct Shape {
    virtual ~Shape() = default;
    virtual const char *name() const = 0;
    virtual double area() const = 0;
};
extern "C" {
#endif

/* The entry: creates the plugin's object; the host destroys it with shape_destroy. */
typedef void *(*shape_create_fn)(void);
typedef void (*shape_destroy_fn)(void *);
/* What a C host can call without knowing the class: name and area of an object. */
typedef const char *(*shape_name_fn)(void *);
typedef double (*shape_area_fn)(void *);

#ifdef __cplusplus
}
#endif
#endif
