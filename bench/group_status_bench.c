/* assetpatch_group_status: time per call, and proof that it makes no system call.
 *   group_status_bench DATA_DIR CALLS GROUP...
 * Opens the data directory, then (1) times CALLS calls cycling through the groups (median over
 * batches of 1000, in ns), and (2) runs CALLS more under seccomp's strict mode, where any system
 * call but read, write, exit and sigreturn kills the process: it can only print "syscalls": 0
 * when the calls made none. Prints one JSON object. */
#define _GNU_SOURCE
#include <assetpatch.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    long calls = atol(argv[2]);
    int groups = argc - 3;
    assetpatch_client *c = NULL;
    if (assetpatch_client_open(argv[1], NULL, &c) != ASSETPATCH_OK) {
        fprintf(stderr, "open: %s\n", assetpatch_last_error());
        return 3;
    }
    assetpatch_group_info info = ASSETPATCH_GROUP_INFO_INIT;
    for (int g = 0; g < groups; g++) {
        if (assetpatch_group_status(c, argv[3 + g], &info) != ASSETPATCH_OK) {
            fprintf(stderr, "status %s: %s\n", argv[3 + g], assetpatch_last_error());
            return 3;
        }
    }
    long batches = calls / 1000;
    double *per = malloc(sizeof *per * (size_t)(batches > 0 ? batches : 1));
    long local = 0;
    for (long b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (int i = 0; i < 1000; i++) {
            if (assetpatch_group_status(c, argv[3 + i % groups], &info) != ASSETPATCH_OK) return 3;
            local += info.state == ASSETPATCH_GROUP_LOCAL;
        }
        per[b] = (now_ns() - t0) / 1000;
    }
    qsort(per, (size_t)batches, sizeof *per, cmp);
    char out[256];
    int n = snprintf(out, sizeof out, "{\"median_ns\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f, \"calls\": %ld, ",
                     per[batches / 2], per[0], per[batches - 1], batches * 1000);
    if (write(1, out, (size_t)n) != n) return 3;
    fflush(stdout);
    /* From here on, any system call but read, write, exit and sigreturn is SIGKILL. */
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) {
        perror("seccomp");
        return 3;
    }
    for (long i = 0; i < calls; i++) {
        if (assetpatch_group_status(c, argv[3 + i % groups], &info) != ASSETPATCH_OK) syscall(SYS_exit, 3);
        local += info.state == ASSETPATCH_GROUP_LOCAL;
    }
    n = snprintf(out, sizeof out, "\"strict_calls\": %ld, \"syscalls\": 0, \"local_seen\": %ld}\n", calls, local);
    if (write(1, out, (size_t)n) != n) syscall(SYS_exit, 3);
    syscall(SYS_exit, 0);
    return 0;
}
