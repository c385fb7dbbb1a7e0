/* Time to dlopen libassetpatch.so.1 (a fresh process each run; prints ns). */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    void *h = dlopen(argc > 1 ? argv[1] : "libassetpatch.so.1", RTLD_NOW | RTLD_LOCAL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 3; }
    const char *(*version)(void) = (const char *(*)(void))dlsym(h, "assetpatch_version");
    printf("%.0f %s\n", (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec), version ? version() : "?");
    return 0;
}
