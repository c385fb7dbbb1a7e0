#ifndef ASSETPATCH_CSYSTEM_SHIM_H
#define ASSETPATCH_CSYSTEM_SHIM_H
/* Linux calls that Glibc's Swift module hides behind _GNU_SOURCE. */
extern int syncfs(int fd);
static inline int csystem_syncfs(int fd) { return syncfs(fd); }
#endif
