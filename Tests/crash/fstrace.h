/* What the tracer's two halves share (fstrace.c: the calls the explorer models;
 * fstrace_refused.c: those it refuses). Hidden: nothing here is exported from the preloaded
 * object, so no name can interpose on the traced program's own. */
#ifndef FSTRACE_H
#define FSTRACE_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>


#define MAX_FDS 65536
#define HIDDEN __attribute__((visibility("hidden")))

#define REAL(name, ret, ...) \
    static ret (*real_##name)(__VA_ARGS__); \
    if (!real_##name) real_##name = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

extern HIDDEN pthread_mutex_t fst_lock;
HIDDEN void fst_setup(void);
/* An absolute, normalised path for `path` relative to `dirfd` (AT_FDCWD or a traced fd). */
HIDDEN void fst_absolute(int dirfd, const char *path, char *out);
HIDDEN int fst_traced(const char *abs);
HIDDEN const char *fst_fd_path(int fd);
/* Logs a call the explorer does not model: the explorer then refuses the trace. */
HIDDEN void fst_unsupported(const char *call, const char *path);

#endif
