/* fstrace: an LD_PRELOAD interposer that records the file-system calls a process makes under
 * one directory, in the order they took effect, for the crash-state explorer (crashstates.py).
 *
 *   ASSETPATCH_FSTRACE=LOG ASSETPATCH_FSTRACE_ROOT=DIR LD_PRELOAD=fstrace.so PROGRAM...
 *
 * One line per call: OP<TAB>fields..., paths absolute, the bytes of every write in hex. Calls
 * are made and logged under one lock, so the log's order is the order the kernel saw them.
 * FICLONE (reflink) is refused under DIR so that copies appear as writes; sync_file_range
 * makes nothing durable and is left alone. Only calls on paths under DIR are logged.
 *
 * A call the explorer does not model (writev, copy_file_range, fallocate, sendfile, splice,
 * dup, a shared writable mmap, symlink, O_TMPFILE, RENAME_EXCHANGE, stdio's fopen, remove...)
 * on a path or descriptor under DIR is logged as "unsupported<TAB>CALL<TAB>PATH" and carried
 * out: the explorer then refuses the trace, naming the call, instead of exploring a trace that
 * silently lacks it. A write to an O_APPEND descriptor is logged at the offset it landed at.
 *
 * ASSETPATCH_FSTRACE_STOP=N stops the process (SIGSTOP) right after the N-th line is logged:
 * the real-file-system check (realfs.py) copies the disk image there, as a power cut would.
 * ASSETPATCH_FSTRACE_NOSYNC=1 makes fsync and fdatasync under DIR do nothing (the check's
 * self-test: a library that syncs nothing must be caught).
 *
 * Build: cc -shared -fPIC -O1 -o fstrace.so fstrace.c -ldl -lpthread */
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
static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static char *fd_paths[MAX_FDS];
static int log_fd = -1;
static char root[PATH_MAX];
static size_t root_len;
static int ready;
static long stop_at = -1, lines_logged;
static int no_sync;

#define REAL(name, ret, ...) \
    static ret (*real_##name)(__VA_ARGS__); \
    if (!real_##name) real_##name = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

static void setup(void) {
    if (ready) return;
    ready = 1;
    const char *logp = getenv("ASSETPATCH_FSTRACE"), *r = getenv("ASSETPATCH_FSTRACE_ROOT");
    if (!logp || !r || !realpath(r, root)) return;
    root_len = strlen(root);
    const char *stop = getenv("ASSETPATCH_FSTRACE_STOP");
    if (stop) stop_at = atol(stop);
    no_sync = getenv("ASSETPATCH_FSTRACE_NOSYNC") != NULL;
    static int (*real_open)(const char *, int, ...);
    if (!real_open) real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    log_fd = real_open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* An absolute, normalised path for `path` relative to `dirfd` (AT_FDCWD or a traced fd). */
static void absolute(int dirfd, const char *path, char *out) {
    char base[PATH_MAX];
    if (path[0] == '/') {
        snprintf(out, PATH_MAX, "%s", path);
    } else {
        if (dirfd == AT_FDCWD || dirfd < 0 || dirfd >= MAX_FDS || !fd_paths[dirfd]) {
            if (!getcwd(base, sizeof base)) base[0] = 0;
        } else {
            snprintf(base, sizeof base, "%s", fd_paths[dirfd]);
        }
        if ((size_t)snprintf(out, PATH_MAX, "%s/%s", base, path) >= PATH_MAX) out[PATH_MAX - 1] = 0;
    }
    /* Collapse "//", "/./" and "/x/../". */
    char tmp[PATH_MAX], *parts[PATH_MAX / 2];
    int n = 0;
    snprintf(tmp, sizeof tmp, "%s", out);
    for (char *s = strtok(tmp, "/"); s; s = strtok(NULL, "/")) {
        if (strcmp(s, ".") == 0) continue;
        if (strcmp(s, "..") == 0) { if (n) n--; continue; }
        parts[n++] = s;
    }
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) len += (size_t)snprintf(out + len, PATH_MAX - len, "/%s", parts[i]);
    if (n == 0) snprintf(out, PATH_MAX, "/");
}

static int traced(const char *abs) {
    return log_fd >= 0 && strncmp(abs, root, root_len) == 0 && (abs[root_len] == 0 || abs[root_len] == '/');
}

/* One more line logged: the process stops here when it is the line asked for. */
static void logged(void) {
    if (++lines_logged == stop_at) raise(SIGSTOP);
}

static void emit(const char *fmt, ...) {
    char line[PATH_MAX * 3];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) (void)!write(log_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    logged();
}

static unsigned long long fd_ino(int fd);

static void unsupported(const char *call, const char *path) { emit("unsupported\t%s\t%s\n", call, path); }

static void emit_data(const char *op, const char *path, unsigned long long ino, long long offset, const void *buf, size_t len) {
    static const char hex[] = "0123456789abcdef";
    char head[PATH_MAX + 64];
    int n = snprintf(head, sizeof head, "%s\t%s\t%llu\t%lld\t", op, path, ino, offset);
    (void)!write(log_fd, head, (size_t)n);
    char chunk[8192];
    const unsigned char *p = buf;
    for (size_t i = 0; i < len;) {
        size_t k = 0;
        for (; i < len && k + 2 <= sizeof chunk; i++) { chunk[k++] = hex[p[i] >> 4]; chunk[k++] = hex[p[i] & 15]; }
        (void)!write(log_fd, chunk, k);
    }
    (void)!write(log_fd, "\n", 1);
    logged();
}

static const char *fd_path(int fd) { return fd >= 0 && fd < MAX_FDS ? fd_paths[fd] : NULL; }

static unsigned long long fd_ino(int fd) { struct stat st; return fstat(fd, &st) == 0 ? (unsigned long long)st.st_ino : 0; }

static void remember(int fd, const char *abs) {
    if (fd < 0 || fd >= MAX_FDS) return;
    free(fd_paths[fd]);
    fd_paths[fd] = strdup(abs);
}

static int do_openat(int dirfd, const char *path, int flags, mode_t mode) {
    REAL(openat, int, int, const char *, int, ...);
    setup();
    pthread_mutex_lock(&lock);
    char abs[PATH_MAX];
    absolute(dirfd, path, abs);
    int existed = 0;
    if (traced(abs) && (flags & O_CREAT)) { struct stat st; existed = lstat(abs, &st) == 0; }
    int fd = real_openat(dirfd, path, flags, mode);
    if (fd >= 0 && traced(abs) && (flags & O_TMPFILE) == O_TMPFILE) unsupported("open(O_TMPFILE)", abs);
    if (fd >= 0) {
        remember(fd, abs);
        if (traced(abs)) {
            if ((flags & O_CREAT) && !existed) emit("create\t%s\t%llu\n", abs, fd_ino(fd));
            if (flags & O_TRUNC) emit("truncate\t%s\t%llu\t0\n", abs, fd_ino(fd));
        }
    }
    pthread_mutex_unlock(&lock);
    return fd;
}

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    return do_openat(AT_FDCWD, path, flags, mode);
}
int open64(const char *path, int flags, ...) __attribute__((alias("open")));
int openat(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    return do_openat(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));
int creat(const char *path, mode_t mode) { return do_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

int close(int fd) {
    REAL(close, int, int);
    setup();
    pthread_mutex_lock(&lock);
    int r = real_close(fd);
    if (fd >= 0 && fd < MAX_FDS) { free(fd_paths[fd]); fd_paths[fd] = NULL; }
    pthread_mutex_unlock(&lock);
    return r;
}

ssize_t write(int fd, const void *buf, size_t len) {
    REAL(write, ssize_t, int, const void *, size_t);
    setup();
    if (fd == log_fd) return real_write(fd, buf, len);
    pthread_mutex_lock(&lock);
    const char *p = fd_path(fd);
    off_t at = p && traced(p) ? lseek(fd, 0, SEEK_CUR) : -1;
    ssize_t r = real_write(fd, buf, len);
    /* O_APPEND: the bytes landed at the end, wherever the offset was; it is past them now. */
    if (r > 0 && p && traced(p) && (fcntl(fd, F_GETFL) & O_APPEND)) at = lseek(fd, 0, SEEK_CUR) - r;
    if (r > 0 && p && traced(p)) emit_data("write", p, fd_ino(fd), (long long)at, buf, (size_t)r);
    pthread_mutex_unlock(&lock);
    return r;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t offset) {
    REAL(pwrite, ssize_t, int, const void *, size_t, off_t);
    setup();
    pthread_mutex_lock(&lock);
    ssize_t r = real_pwrite(fd, buf, len, offset);
    const char *p = fd_path(fd);
    if (r > 0 && p && traced(p)) emit_data("write", p, fd_ino(fd), (long long)offset, buf, (size_t)r);
    pthread_mutex_unlock(&lock);
    return r;
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t offset) __attribute__((alias("pwrite")));

int ftruncate(int fd, off_t length) {
    REAL(ftruncate, int, int, off_t);
    setup();
    pthread_mutex_lock(&lock);
    int r = real_ftruncate(fd, length);
    const char *p = fd_path(fd);
    if (r == 0 && p && traced(p)) emit("truncate\t%s\t%llu\t%lld\n", p, fd_ino(fd), (long long)length);
    pthread_mutex_unlock(&lock);
    return r;
}
int ftruncate64(int fd, off_t length) __attribute__((alias("ftruncate")));

int truncate(const char *path, off_t length) {
    REAL(truncate, int, const char *, off_t);
    setup();
    pthread_mutex_lock(&lock);
    char abs[PATH_MAX];
    absolute(AT_FDCWD, path, abs);
    int r = real_truncate(path, length);
    struct stat st;
    if (r == 0 && traced(abs) && lstat(abs, &st) == 0) emit("truncate\t%s\t%llu\t%lld\n", abs, (unsigned long long)st.st_ino, (long long)length);
    pthread_mutex_unlock(&lock);
    return r;
}

static int sync_fd(int fd, int data_only) {
    REAL(fsync, int, int);
    REAL(fdatasync, int, int);
    setup();
    pthread_mutex_lock(&lock);
    const char *p = fd_path(fd);
    int r = no_sync && p && traced(p) ? 0 : data_only ? real_fdatasync(fd) : real_fsync(fd);
    struct stat st;
    const int dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    if (r == 0 && p && traced(p)) emit("%s\t%s\t%llu\t%s\n", data_only ? "fdatasync" : "fsync", p, fd_ino(fd), dir ? "d" : "f");
    pthread_mutex_unlock(&lock);
    return r;
}
int fsync(int fd) { return sync_fd(fd, 0); }
int fdatasync(int fd) { return sync_fd(fd, 1); }

int syncfs(int fd) {
    REAL(syncfs, int, int);
    setup();
    pthread_mutex_lock(&lock);
    int r = real_syncfs(fd);
    if (r == 0 && log_fd >= 0) emit("sync\t%s\n", root);
    pthread_mutex_unlock(&lock);
    return r;
}

void sync(void) {
    REAL(sync, void, void);
    setup();
    pthread_mutex_lock(&lock);
    real_sync();
    if (log_fd >= 0) emit("sync\t%s\n", root);
    pthread_mutex_unlock(&lock);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    REAL(renameat2, int, int, const char *, int, const char *, unsigned int);
    setup();
    pthread_mutex_lock(&lock);
    char a[PATH_MAX], b[PATH_MAX];
    absolute(olddirfd, oldpath, a);
    absolute(newdirfd, newpath, b);
    int r = real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
    if (r == 0 && (traced(a) || traced(b))) {
        if (flags & ~(unsigned)RENAME_NOREPLACE) unsupported("renameat2(RENAME_EXCHANGE or RENAME_WHITEOUT)", a);
        else emit("rename\t%s\t%s\t%u\n", a, b, flags);
    }
    pthread_mutex_unlock(&lock);
    return r;
}
int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, 0);
}
int rename(const char *oldpath, const char *newpath) { return renameat2(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0); }

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags) {
    REAL(linkat, int, int, const char *, int, const char *, int);
    setup();
    pthread_mutex_lock(&lock);
    char a[PATH_MAX], b[PATH_MAX];
    absolute(olddirfd, oldpath, a);
    absolute(newdirfd, newpath, b);
    int r = real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
    if (r == 0 && (traced(a) || traced(b))) {
        if (flags & AT_EMPTY_PATH) unsupported("linkat(AT_EMPTY_PATH)", b);
        else emit("link\t%s\t%s\n", a, b);
    }
    pthread_mutex_unlock(&lock);
    return r;
}
int link(const char *oldpath, const char *newpath) { return linkat(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0); }

int unlinkat(int dirfd, const char *path, int flags) {
    REAL(unlinkat, int, int, const char *, int);
    setup();
    pthread_mutex_lock(&lock);
    char a[PATH_MAX];
    absolute(dirfd, path, a);
    int r = real_unlinkat(dirfd, path, flags);
    if (r == 0 && traced(a)) emit("%s\t%s\n", (flags & AT_REMOVEDIR) ? "rmdir" : "unlink", a);
    pthread_mutex_unlock(&lock);
    return r;
}
int unlink(const char *path) { return unlinkat(AT_FDCWD, path, 0); }
int rmdir(const char *path) { return unlinkat(AT_FDCWD, path, AT_REMOVEDIR); }

int mkdirat(int dirfd, const char *path, mode_t mode) {
    REAL(mkdirat, int, int, const char *, mode_t);
    setup();
    pthread_mutex_lock(&lock);
    char a[PATH_MAX];
    absolute(dirfd, path, a);
    int r = real_mkdirat(dirfd, path, mode);
    if (r == 0 && traced(a)) emit("mkdir\t%s\t%o\n", a, mode);
    pthread_mutex_unlock(&lock);
    return r;
}
int mkdir(const char *path, mode_t mode) { return mkdirat(AT_FDCWD, path, mode); }

int ioctl(int fd, unsigned long request, ...) {
    REAL(ioctl, int, int, unsigned long, ...);
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    setup();
    const char *p = fd_path(fd);
    if (request == 0x40049409UL && p && traced(p)) { errno = EOPNOTSUPP; return -1; }  /* FICLONE */
    return real_ioctl(fd, request, arg);
}

/* ---- calls the explorer does not model: logged as unsupported, then carried out. */

static void unsupported_fd(const char *call, int fd) {
    setup();
    pthread_mutex_lock(&lock);
    const char *p = fd_path(fd);
    if (p && traced(p)) unsupported(call, p);
    pthread_mutex_unlock(&lock);
}

static void unsupported_path(const char *call, int dirfd, const char *path) {
    setup();
    if (!path) return;
    pthread_mutex_lock(&lock);
    char abs[PATH_MAX];
    absolute(dirfd, path, abs);
    if (traced(abs)) unsupported(call, abs);
    pthread_mutex_unlock(&lock);
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
