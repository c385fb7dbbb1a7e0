/* A check that finds nothing new: the conditional manifest request (a 304 from the server)
 * and the verification of the manifest kept from before.
 *   check_bench DATA_DIR MANIFEST_URL COUNT
 * DATA_DIR must hold the release the URL serves. Prints the median, min and max of COUNT
 * assetpatch_check calls in ms, as JSON. Exit 3 on an error or if a check finds an update. */
#include <assetpatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    int count = atoi(argv[3]);
    if (count < 1) return 2;
    assetpatch_client *c;
    if (assetpatch_client_open(argv[1], NULL, &c) != ASSETPATCH_OK) { fprintf(stderr, "%s\n", assetpatch_last_error()); return 3; }
    if (assetpatch_client_set(c, "manifest_url", argv[2]) != ASSETPATCH_OK) return 3;
    double *ms = malloc(count * sizeof *ms);
    for (int i = 0; i < count; i++) {
        double t0 = now_ms();
        int rc = assetpatch_check(c, NULL, NULL);
        ms[i] = now_ms() - t0;
        if (rc != ASSETPATCH_NO_UPDATE) { fprintf(stderr, "check: %d %s\n", rc, assetpatch_last_error()); return 3; }
    }
    qsort(ms, count, sizeof *ms, cmp);
    printf("{\"median_ms\": %.3f, \"min_ms\": %.3f, \"max_ms\": %.3f}\n", ms[count / 2], ms[0], ms[count - 1]);
    assetpatch_client_close(c);
    return 0;
}
