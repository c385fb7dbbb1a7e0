/* Resolve and open benchmarks.
 *   resolve_bench DATA_DIR BUNDLE_DIR NAMES_FILE LOOKUPS
 * NAMES_FILE lists the release's names, one per line. Prints, in ns: assetpatch_resolve per call
 * (median over batches of 1000), the naive stat lookup per call (release path, then bundle
 * path), and assetpatch_client_open's time. */
#define _GNU_SOURCE
#include <assetpatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
    if (argc != 5 && argc != 6) return 2;
    long lookups = atol(argv[4]);
    FILE *f = fopen(argv[3], "r");
    if (!f) return 2;
    size_t cap = 1024, n = 0;
    char **names = malloc(cap * sizeof *names);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (n == cap) names = realloc(names, (cap *= 2) * sizeof *names);
        names[n++] = strdup(line);
    }
    fclose(f);

    double t0 = now_ns();
    assetpatch_client *c;
    if (assetpatch_client_open(argv[1], argv[2], &c) != ASSETPATCH_OK) { fprintf(stderr, "%s\n", assetpatch_last_error()); return 3; }
    double open_ns = now_ns() - t0;
    int64_t version = 0;
    if (assetpatch_current(c, &version) != ASSETPATCH_OK || version == 0) { fprintf(stderr, "no active release\n"); return 3; }
    double variants_ns = 0;
    if (argc == 6) {  /* the variants option, e.g. "@3x,@2x," (set before the loops: it rebuilds the table) */
        double v0 = now_ns();
        if (assetpatch_client_set(c, "variants", argv[5]) != ASSETPATCH_OK) { fprintf(stderr, "%s\n", assetpatch_last_error()); return 3; }
        variants_ns = now_ns() - v0;
    }

    /* Random names, chosen up front so the loops time lookups only. */
    uint64_t x = 88172645463325252ull;
    size_t *order = malloc(lookups * sizeof *order);
    for (long i = 0; i < lookups; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; order[i] = x % n; }

    char path[4096];
    long batches = lookups / 1000;
    double *per = malloc(batches * sizeof *per);
    long misses = 0;
    for (long b = 0; b < batches; b++) {
        double s = now_ns();
        for (long i = b * 1000; i < (b + 1) * 1000; i++)
            if (assetpatch_resolve(c, names[order[i]], path, sizeof path, NULL) != ASSETPATCH_OK) misses++;
        per[b] = (now_ns() - s) / 1000;
    }
    qsort(per, batches, sizeof *per, cmp);
    double resolve_median = per[batches / 2], resolve_min = per[0], resolve_max = per[batches - 1];

    /* The naive lookup a program would write: build the release path, stat; else the bundle's. */
    char release_root[4096];
    if (assetpatch_resolve(c, names[0], path, sizeof path, NULL) != ASSETPATCH_OK) return 3;
    size_t root_len = strlen(path) - strlen(names[0]);
    memcpy(release_root, path, root_len);
    release_root[root_len] = 0;
    long naive_lookups = lookups / 10;
    long naive_batches = naive_lookups / 1000;
    double *nper = malloc(naive_batches * sizeof *nper);
    struct stat st;
    for (long b = 0; b < naive_batches; b++) {
        double s = now_ns();
        for (long i = b * 1000; i < (b + 1) * 1000; i++) {
            snprintf(path, sizeof path, "%s%s", release_root, names[order[i]]);
            if (stat(path, &st) != 0) {
                snprintf(path, sizeof path, "%s/%s", argv[2], names[order[i]]);
                if (stat(path, &st) != 0) misses++;
            }
        }
        nper[b] = (now_ns() - s) / 1000;
    }
    qsort(nper, naive_batches, sizeof *nper, cmp);

    /* The physical limit of the job: a plain open-addressing table (FNV-1a, linear probing) of
       the same names, each lookup hashing, probing, comparing and copying the path. The table
       owns copies of its keys, as any table built from a release's names would: a key that
       aliased the query string would save the compare its cache miss. */
    size_t slots = 16;
    while (slots < n * 2) slots <<= 1;
    char **keys = calloc(slots, sizeof *keys), **vals = calloc(slots, sizeof *vals);
    for (size_t i = 0; i < n; i++) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
        size_t k = h & (slots - 1);
        while (keys[k]) k = (k + 1) & (slots - 1);
        keys[k] = strdup(names[i]);
        char full[4096];
        snprintf(full, sizeof full, "%s%s", release_root, names[i]);
        vals[k] = strdup(full);
    }
    double *tper = malloc(batches * sizeof *tper);
    for (long b = 0; b < batches; b++) {
        double s = now_ns();
        for (long i = b * 1000; i < (b + 1) * 1000; i++) {
            const char *name = names[order[i]];
            size_t len = strlen(name);
            uint64_t h = 0xcbf29ce484222325ull;
            for (size_t j = 0; j < len; j++) h = (h ^ (unsigned char)name[j]) * 0x100000001b3ull;
            size_t k = h & (slots - 1);
            while (keys[k] && strcmp(keys[k], name) != 0) k = (k + 1) & (slots - 1);
            if (!keys[k]) { misses++; continue; }
            size_t pl = strlen(vals[k]);
            memcpy(path, vals[k], pl + 1);
        }
        tper[b] = (now_ns() - s) / 1000;
    }
    qsort(tper, batches, sizeof *tper, cmp);
    printf("{\"names\": %zu, \"lookups\": %ld, \"misses\": %ld, \"open_ns\": %.0f, "
           "\"resolve_ns\": {\"min\": %.1f, \"median\": %.1f, \"max\": %.1f}, "
           "\"naive_ns\": {\"min\": %.1f, \"median\": %.1f, \"max\": %.1f}, "
           "\"table_ns\": {\"min\": %.1f, \"median\": %.1f, \"max\": %.1f}, \"variants_set_ns\": %.0f}\n",
           n, lookups, misses, open_ns, resolve_min, resolve_median, resolve_max,
           nper[0], nper[naive_batches / 2], nper[naive_batches - 1], tper[0], tper[batches / 2], tper[batches - 1], variants_ns);
    assetpatch_client_close(c);
    return misses ? 4 : 0;
}
