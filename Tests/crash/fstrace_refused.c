/* fstrace's calls the crash explorer does not model (see fstrace.c): each is logged as
 * "unsupported<TAB>CALL<TAB>PATH" when it touches the traced directory, then carried out. */
#include "fstrace.h"

/* ---- calls the explorer does not model: logged as fst_unsupported, then carried out. */

static void unsupported_fd(const char *call, int fd) {
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    const char *p = fst_fd_path(fd);
    if (p && fst_traced(p)) fst_unsupported(call, p);
    pthread_mutex_unlock(&fst_lock);
}

static void unsupported_path(const char *call, int dirfd, const char *path) {
    fst_setup();
    if (!path) return;
    pthread_mutex_lock(&fst_lock);
    char abs[PATH_MAX];
    fst_absolute(dirfd, path, abs);
    if (fst_traced(abs)) fst_unsupported(call, abs);
    pthread_mutex_unlock(&fst_lock);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    REAL(writev, ssize_t, int, const struct iovec *, int);
    unsupported_fd("writev", fd);
    return real_writev(fd, iov, n);
}
ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off) {
    REAL(pwritev, ssize_t, int, const struct iovec *, int, off_t);
    unsupported_fd("pwritev", fd);
    return real_pwritev(fd, iov, n, off);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off) __attribute__((alias("pwritev")));
ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags) {
    REAL(pwritev2, ssize_t, int, const struct iovec *, int, off_t, int);
    unsupported_fd("pwritev2", fd);
    return real_pwritev2(fd, iov, n, off, flags);
}
ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off_t off, int flags) __attribute__((alias("pwritev2")));
ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off, size_t len, unsigned int flags) {
    REAL(copy_file_range, ssize_t, int, off_t *, int, off_t *, size_t, unsigned int);
    unsupported_fd("copy_file_range", out);
    return real_copy_file_range(in, in_off, out, out_off, len, flags);
}
int fallocate(int fd, int mode, off_t off, off_t len) {
    REAL(fallocate, int, int, int, off_t, off_t);
    unsupported_fd("fallocate", fd);
    return real_fallocate(fd, mode, off, len);
}
int fallocate64(int fd, int mode, off_t off, off_t len) __attribute__((alias("fallocate")));
int posix_fallocate(int fd, off_t off, off_t len) {
    REAL(posix_fallocate, int, int, off_t, off_t);
    unsupported_fd("posix_fallocate", fd);
    return real_posix_fallocate(fd, off, len);
}
int posix_fallocate64(int fd, off_t off, off_t len) __attribute__((alias("posix_fallocate")));
ssize_t sendfile(int out, int in, off_t *off, size_t count) {
    REAL(sendfile, ssize_t, int, int, off_t *, size_t);
    unsupported_fd("sendfile", out);
    return real_sendfile(out, in, off, count);
}
ssize_t sendfile64(int out, int in, off_t *off, size_t count) __attribute__((alias("sendfile")));
ssize_t splice(int in, loff_t *in_off, int out, loff_t *out_off, size_t len, unsigned int flags) {
    REAL(splice, ssize_t, int, loff_t *, int, loff_t *, size_t, unsigned int);
    unsupported_fd("splice", out);
    return real_splice(in, in_off, out, out_off, len, flags);
}
int dup(int fd) {
    REAL(dup, int, int);
    unsupported_fd("dup", fd);
    return real_dup(fd);
}
int dup2(int fd, int to) {
    REAL(dup2, int, int, int);
    unsupported_fd("dup2", fd);
    return real_dup2(fd, to);
}
int dup3(int fd, int to, int flags) {
    REAL(dup3, int, int, int, int);
    unsupported_fd("dup3", fd);
    return real_dup3(fd, to, flags);
}
int fcntl(int fd, int cmd, ...) {
    REAL(fcntl, int, int, int, ...);
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) unsupported_fd("fcntl(F_DUPFD)", fd);
    return real_fcntl(fd, cmd, arg);
}
int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    REAL(mmap, void *, void *, size_t, int, int, int, off_t);
    if ((prot & PROT_WRITE) && (flags & MAP_SHARED) && fd >= 0) unsupported_fd("mmap(PROT_WRITE, MAP_SHARED)", fd);
    return real_mmap(addr, len, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));
int symlinkat(const char *target, int dirfd, const char *path) {
    REAL(symlinkat, int, const char *, int, const char *);
    unsupported_path("symlink", dirfd, path);
    return real_symlinkat(target, dirfd, path);
}
int symlink(const char *target, const char *path) { return symlinkat(target, AT_FDCWD, path); }
int remove(const char *path) {
    REAL(remove, int, const char *);
    unsupported_path("remove", AT_FDCWD, path);
    return real_remove(path);
}
FILE *fopen(const char *path, const char *mode) {
    REAL(fopen, FILE *, const char *, const char *);
    unsupported_path("fopen", AT_FDCWD, path);
    return real_fopen(path, mode);
}
FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));
