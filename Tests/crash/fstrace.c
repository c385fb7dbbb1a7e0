/* fstrace: an LD_PRELOAD interposer that records the file-system calls a process makes under
 * one directory, in the order they took effect, for the crash-state explorer (crashstates.py).
 *
 *   ASSETPATCH_FSTRACE=LOG ASSETPATCH_FSTRACE_ROOT=DIR LD_PRELOAD=fstrace.so PROGRAM...
 *
 * One line per call: OP<TAB>fields..., paths fst_absolute, the bytes of every write in hex. Calls
 * are made and logged under one fst_lock, so the log's order is the order the kernel saw them.
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
 * Build: cc -shared -fPIC -O1 -o fstrace.so fstrace.c fstrace_refused.c -ldl -lpthread */
#include "fstrace.h"

HIDDEN pthread_mutex_t fst_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static char *fd_paths[MAX_FDS];
static int log_fd = -1;
static char root[PATH_MAX];
static size_t root_len;
static int ready;
static long stop_at = -1, lines_logged;
static int no_sync;

HIDDEN void fst_setup(void) {
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

/* An fst_absolute, normalised path for `path` relative to `dirfd` (AT_FDCWD or a traced fd). */
HIDDEN void fst_absolute(int dirfd, const char *path, char *out) {
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

HIDDEN int fst_traced(const char *abs) {
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

HIDDEN void fst_unsupported(const char *call, const char *path) { emit("unsupported\t%s\t%s\n", call, path); }

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

HIDDEN const char *fst_fd_path(int fd) { return fd >= 0 && fd < MAX_FDS ? fd_paths[fd] : NULL; }

static unsigned long long fd_ino(int fd) { struct stat st; return fstat(fd, &st) == 0 ? (unsigned long long)st.st_ino : 0; }

static void remember(int fd, const char *abs) {
    if (fd < 0 || fd >= MAX_FDS) return;
    free(fd_paths[fd]);
    fd_paths[fd] = strdup(abs);
}

static int do_openat(int dirfd, const char *path, int flags, mode_t mode) {
    REAL(openat, int, int, const char *, int, ...);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    char abs[PATH_MAX];
    fst_absolute(dirfd, path, abs);
    int existed = 0;
    if (fst_traced(abs) && (flags & O_CREAT)) { struct stat st; existed = lstat(abs, &st) == 0; }
    int fd = real_openat(dirfd, path, flags, mode);
    if (fd >= 0 && fst_traced(abs) && (flags & O_TMPFILE) == O_TMPFILE) fst_unsupported("open(O_TMPFILE)", abs);
    if (fd >= 0) {
        remember(fd, abs);
        if (fst_traced(abs)) {
            if ((flags & O_CREAT) && !existed) emit("create\t%s\t%llu\n", abs, fd_ino(fd));
            if (flags & O_TRUNC) emit("truncate\t%s\t%llu\t0\n", abs, fd_ino(fd));
        }
    }
    pthread_mutex_unlock(&fst_lock);
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
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    int r = real_close(fd);
    if (fd >= 0 && fd < MAX_FDS) { free(fd_paths[fd]); fd_paths[fd] = NULL; }
    pthread_mutex_unlock(&fst_lock);
    return r;
}

ssize_t write(int fd, const void *buf, size_t len) {
    REAL(write, ssize_t, int, const void *, size_t);
    fst_setup();
    if (fd == log_fd) return real_write(fd, buf, len);
    pthread_mutex_lock(&fst_lock);
    const char *p = fst_fd_path(fd);
    off_t at = p && fst_traced(p) ? lseek(fd, 0, SEEK_CUR) : -1;
    ssize_t r = real_write(fd, buf, len);
    /* O_APPEND: the bytes landed at the end, wherever the offset was; it is past them now. */
    if (r > 0 && p && fst_traced(p) && (fcntl(fd, F_GETFL) & O_APPEND)) at = lseek(fd, 0, SEEK_CUR) - r;
    if (r > 0 && p && fst_traced(p)) emit_data("write", p, fd_ino(fd), (long long)at, buf, (size_t)r);
    pthread_mutex_unlock(&fst_lock);
    return r;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t offset) {
    REAL(pwrite, ssize_t, int, const void *, size_t, off_t);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    ssize_t r = real_pwrite(fd, buf, len, offset);
    const char *p = fst_fd_path(fd);
    if (r > 0 && p && fst_traced(p)) emit_data("write", p, fd_ino(fd), (long long)offset, buf, (size_t)r);
    pthread_mutex_unlock(&fst_lock);
    return r;
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t offset) __attribute__((alias("pwrite")));

int ftruncate(int fd, off_t length) {
    REAL(ftruncate, int, int, off_t);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    int r = real_ftruncate(fd, length);
    const char *p = fst_fd_path(fd);
    if (r == 0 && p && fst_traced(p)) emit("truncate\t%s\t%llu\t%lld\n", p, fd_ino(fd), (long long)length);
    pthread_mutex_unlock(&fst_lock);
    return r;
}
int ftruncate64(int fd, off_t length) __attribute__((alias("ftruncate")));

int truncate(const char *path, off_t length) {
    REAL(truncate, int, const char *, off_t);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    char abs[PATH_MAX];
    fst_absolute(AT_FDCWD, path, abs);
    int r = real_truncate(path, length);
    struct stat st;
    if (r == 0 && fst_traced(abs) && lstat(abs, &st) == 0) emit("truncate\t%s\t%llu\t%lld\n", abs, (unsigned long long)st.st_ino, (long long)length);
    pthread_mutex_unlock(&fst_lock);
    return r;
}

static int sync_fd(int fd, int data_only) {
    REAL(fsync, int, int);
    REAL(fdatasync, int, int);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    const char *p = fst_fd_path(fd);
    int r = no_sync && p && fst_traced(p) ? 0 : data_only ? real_fdatasync(fd) : real_fsync(fd);
    struct stat st;
    const int dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    if (r == 0 && p && fst_traced(p)) emit("%s\t%s\t%llu\t%s\n", data_only ? "fdatasync" : "fsync", p, fd_ino(fd), dir ? "d" : "f");
    pthread_mutex_unlock(&fst_lock);
    return r;
}
int fsync(int fd) { return sync_fd(fd, 0); }
int fdatasync(int fd) { return sync_fd(fd, 1); }

int syncfs(int fd) {
    REAL(syncfs, int, int);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    int r = real_syncfs(fd);
    if (r == 0 && log_fd >= 0) emit("sync\t%s\n", root);
    pthread_mutex_unlock(&fst_lock);
    return r;
}

void sync(void) {
    REAL(sync, void, void);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    real_sync();
    if (log_fd >= 0) emit("sync\t%s\n", root);
    pthread_mutex_unlock(&fst_lock);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    REAL(renameat2, int, int, const char *, int, const char *, unsigned int);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    char a[PATH_MAX], b[PATH_MAX];
    fst_absolute(olddirfd, oldpath, a);
    fst_absolute(newdirfd, newpath, b);
    int r = real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
    if (r == 0 && (fst_traced(a) || fst_traced(b))) {
        if (flags & ~(unsigned)RENAME_NOREPLACE) fst_unsupported("renameat2(RENAME_EXCHANGE or RENAME_WHITEOUT)", a);
        else emit("rename\t%s\t%s\t%u\n", a, b, flags);
    }
    pthread_mutex_unlock(&fst_lock);
    return r;
}
int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, 0);
}
int rename(const char *oldpath, const char *newpath) { return renameat2(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0); }

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags) {
    REAL(linkat, int, int, const char *, int, const char *, int);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    char a[PATH_MAX], b[PATH_MAX];
    fst_absolute(olddirfd, oldpath, a);
    fst_absolute(newdirfd, newpath, b);
    int r = real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
    if (r == 0 && (fst_traced(a) || fst_traced(b))) {
        if (flags & AT_EMPTY_PATH) fst_unsupported("linkat(AT_EMPTY_PATH)", b);
        else emit("link\t%s\t%s\n", a, b);
    }
    pthread_mutex_unlock(&fst_lock);
    return r;
}
int link(const char *oldpath, const char *newpath) { return linkat(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0); }

int unlinkat(int dirfd, const char *path, int flags) {
    REAL(unlinkat, int, int, const char *, int);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    char a[PATH_MAX];
    fst_absolute(dirfd, path, a);
    int r = real_unlinkat(dirfd, path, flags);
    if (r == 0 && fst_traced(a)) emit("%s\t%s\n", (flags & AT_REMOVEDIR) ? "rmdir" : "unlink", a);
    pthread_mutex_unlock(&fst_lock);
    return r;
}
int unlink(const char *path) { return unlinkat(AT_FDCWD, path, 0); }
int rmdir(const char *path) { return unlinkat(AT_FDCWD, path, AT_REMOVEDIR); }

int mkdirat(int dirfd, const char *path, mode_t mode) {
    REAL(mkdirat, int, int, const char *, mode_t);
    fst_setup();
    pthread_mutex_lock(&fst_lock);
    char a[PATH_MAX];
    fst_absolute(dirfd, path, a);
    int r = real_mkdirat(dirfd, path, mode);
    if (r == 0 && fst_traced(a)) emit("mkdir\t%s\t%o\n", a, mode);
    pthread_mutex_unlock(&fst_lock);
    return r;
}
int mkdir(const char *path, mode_t mode) { return mkdirat(AT_FDCWD, path, mode); }

int ioctl(int fd, unsigned long request, ...) {
    REAL(ioctl, int, int, unsigned long, ...);
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    fst_setup();
    const char *p = fst_fd_path(fd);
    if (request == 0x40049409UL && p && fst_traced(p)) { errno = EOPNOTSUPP; return -1; }  /* FICLONE */
    return real_ioctl(fd, request, arg);
}

