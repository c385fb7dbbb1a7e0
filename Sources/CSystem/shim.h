#ifndef ASSETPATCH_CSYSTEM_SHIM_H
#define ASSETPATCH_CSYSTEM_SHIM_H
/* Linux calls that Glibc's Swift module hides behind _GNU_SOURCE. */
#include <sys/syscall.h>  /* SYS_memfd_create; macros only (fcntl.h and unistd.h would re-export libc types) */
extern long syscall(long number, ...);
extern int fcntl(int fd, int cmd, ...);
/* An anonymous file whose contents can be sealed (plugins are loaded from one). The flags are
   spelled out: MFD_CLOEXEC | MFD_ALLOW_SEALING; F_ADD_SEALS with SHRINK, GROW, WRITE, SEAL. */
static inline int csystem_memfd_sealable(const char *name) { return (int)syscall(SYS_memfd_create, name, 0x0001U | 0x0002U); }
static inline int csystem_seal_all(int fd) { return fcntl(fd, 1024 + 9, 0x0001 | 0x0002 | 0x0004 | 0x0008); }
/* Starts writing a file's dirty pages back without waiting (sync_file_range with
   SYNC_FILE_RANGE_WRITE over the whole file), so that a later fdatasync finds little to do. */
static inline int csystem_start_writeback(int fd) {
#ifdef SYS_sync_file_range
    return (int)syscall(SYS_sync_file_range, fd, 0L, 0L, 2U);
#else
    (void)fd;
    return 0;
#endif
}
/* Waits until a file's dirty pages are on disk, starting their writeback first (sync_file_range
   with WAIT_BEFORE | WRITE | WAIT_AFTER): it makes nothing durable (fdatasync does), but once
   every file of a set has been through it, one journal commit covers them all. */
static inline int csystem_wait_writeback(int fd) {
#ifdef SYS_sync_file_range
    return (int)syscall(SYS_sync_file_range, fd, 0L, 0L, 1U | 2U | 4U);
#else
    (void)fd;
    return 0;
#endif
}
/* The processors this process may run on (its affinity mask, as nproc counts them); 0 when the
   kernel does not say. */
static inline int csystem_allowed_cpus(void) {
    unsigned long mask[16] = {0};  /* up to 1024 processors */
    long bytes = syscall(SYS_sched_getaffinity, 0L, sizeof mask, mask);
    int count = 0;
    for (long i = 0; i < bytes / (long)sizeof mask[0]; i++) count += __builtin_popcountl(mask[i]);
    return count;
}
/* getdents64(2): a directory's entries with their inode numbers and types, read straight into
   `buffer` (no DIR stream, whose descriptor a file-system tracer could not follow). */
static inline long csystem_getdents64(int fd, void *buffer, unsigned long size) { return syscall(SYS_getdents64, fd, buffer, size); }
/* fstatfs(2)'s f_type (the first field of struct statfs on 64-bit Linux), -1 on failure. */
static inline long csystem_fs_type(int fd) {
    long buffer[32];
    return syscall(SYS_fstatfs, fd, buffer) == 0 ? (long)(unsigned int)buffer[0] : -1;
}
/* A compiler barrier: no memory access is moved across it; the processor may still reorder
   (readers of ReadMostly cells rely on the writer's membarrier for that). */
static inline void csystem_compiler_barrier(void) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
/* membarrier(2) with no flags: the command (MEMBARRIER_CMD_*); 0, or -1 with errno (ENOSYS,
   EINVAL: too old a kernel; EPERM: a seccomp filter). */
static inline int csystem_membarrier(int command) {
#ifdef SYS_membarrier
    return (int)syscall(SYS_membarrier, command, 0U, 0);
#else
    (void)command;
    return -1;
#endif
}
#endif
