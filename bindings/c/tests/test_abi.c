/* End-to-end tests of the C ABI against real release repositories (made by fixtures.py and
 * the CLI), served over file:// or by nginx on 127.0.0.1.
 *
 *   test_abi FIXTURES_DIR BASE_URL WORK_DIR
 *
 * BASE_URL is file://FIXTURES_DIR/repos or http://127.0.0.1:PORT/repos. Prints one line per
 * test and closes with "N passed, N failed". */
#define _GNU_SOURCE
#include <assetpatch.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *fixtures, *base_url, *work;
static int is_http;
static int passed, failed, test_failed;
static char failure[2048];

#define CHECK(cond, ...) do { if (!(cond)) { fail_at(__LINE__, __VA_ARGS__); return; } } while (0)
#define CHECK_RC(expr, want) do { int rc_ = (expr); if (rc_ != (want)) { \
    fail_at(__LINE__, "%s returned %s, want %s (%s)", #expr, assetpatch_status_name(rc_), \
            assetpatch_status_name(want), assetpatch_last_error()); return; } } while (0)

/* The active release's version must be `want`. */
#define CHECK_VERSION(c, want) do { int64_t v_ = -1; CHECK_RC(assetpatch_current((c), &v_), ASSETPATCH_OK); \
    CHECK(v_ == (want), "active version is %" PRId64 ", want %d", v_, (int)(want)); } while (0)

static void fail_at(int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(failure, sizeof failure, "line %d: ", line);
    vsnprintf(failure + n, sizeof failure - n, fmt, ap);
    va_end(ap);
    test_failed = 1;
}

static void run(const char *name, void (*fn)(void)) {
    test_failed = 0;
    failure[0] = 0;
    fn();
    if (test_failed) { failed++; printf("not ok - %s: %s\n", name, failure); }
    else { passed++; printf("ok - %s\n", name); }
    fflush(stdout);
}

static char *fmt(const char *f, ...) {
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, 4096, f, ap);
    va_end(ap);
    return b;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n + 1);
    if (fread(buf, 1, n, f) != (size_t)n) { free(buf); fclose(f); return NULL; }
    buf[n] = 0;
    fclose(f);
    if (len) *len = n;
    return buf;
}

/* 1 when the files at a and b hold the same bytes. */
static int same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = read_file(a, &la), *y = read_file(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static const char *url(const char *repo) { return fmt("%s/%s/manifest.json", base_url, repo); }
static const char *bundle(void) { return fmt("%s/bundle", fixtures); }
static const char *asset(const char *set, const char *name) { return fmt("%s/%s/%s", fixtures, set, name); }

static assetpatch_client *open_fresh(const char *name) {
    const char *dir = fmt("%s/%s", work, name);
    if (system(fmt("rm -rf '%s'", dir)) != 0) return NULL;
    assetpatch_client *c = NULL;
    if (assetpatch_client_open(dir, bundle(), &c) != ASSETPATCH_OK) return NULL;
    return c;
}

static int resolve(assetpatch_client *c, const char *name, char *out) {
    return assetpatch_resolve(c, name, out, 4096, NULL);
}

/* ---- progress recording ---- */

struct record {
    int phases[64];
    int count;
    int done_count;
    int bad_order;
    int bytes_went_back;
    uint64_t last_bytes;
    int last_phase;
    assetpatch_progress last_of[8];
    int cancel_at_phase;
};

static int record_progress(const assetpatch_progress *p, void *userdata) {
    struct record *r = userdata;
    if (p->phase < r->last_phase) r->bad_order = 1;
    if (p->phase != r->last_phase) {
        if (r->count < 64) r->phases[r->count++] = p->phase;
        r->last_bytes = 0;
    } else if (p->bytes_done < r->last_bytes && p->bytes_done != 0) {
        r->bytes_went_back = 1;
    }
    r->last_bytes = p->bytes_done;
    r->last_phase = p->phase;
    if (p->phase >= 1 && p->phase <= 5) r->last_of[p->phase] = *p;
    if (p->phase == ASSETPATCH_PHASE_DONE) r->done_count++;
    return r->cancel_at_phase && p->phase == r->cancel_at_phase;
}

/* ---- tests ---- */

static assetpatch_client *main_client;
static char v1_readme_path[4096];

static void null_arguments(void) {
    assetpatch_client *c = NULL;
    CHECK_RC(assetpatch_client_open(NULL, NULL, &c), ASSETPATCH_ERR_ARGUMENT);
    CHECK(strlen(assetpatch_last_error()) > 0, "no message for a NULL data_dir");
    CHECK_RC(assetpatch_client_open(fmt("%s/nulls", work), NULL, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(NULL, "apply", "immediate"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_check(NULL, NULL, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_update(NULL, NULL, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_update_start(NULL, NULL, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_update_wait(NULL, 0, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_resolve(NULL, "a", NULL, 0, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_current(NULL, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_set_log(NULL, NULL, NULL), ASSETPATCH_ERR_ARGUMENT);
    assetpatch_client_close(NULL);
    assetpatch_cancel(NULL);
    assetpatch_pause(NULL);
    assetpatch_resume(NULL);
    CHECK_RC(assetpatch_client_open(fmt("%s/nulls", work), NULL, &c), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, NULL, "x"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "apply", NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_resolve(c, NULL, NULL, 0, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_current(c, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_set_log(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update_wait(c, 0, NULL), ASSETPATCH_ERR_STATE);
    assetpatch_cancel(c);
    assetpatch_client_close(c);
}

static void status_names_and_version(void) {
    CHECK(strcmp(assetpatch_status_name(ASSETPATCH_ERR_IO), "ASSETPATCH_ERR_IO") == 0, "ERR_IO name");
    CHECK(strcmp(assetpatch_status_name(ASSETPATCH_NO_UPDATE), "ASSETPATCH_NO_UPDATE") == 0, "NO_UPDATE name");
    CHECK(strcmp(assetpatch_status_name(-1234), "ASSETPATCH_UNKNOWN") == 0, "unknown name");
    CHECK(strcmp(assetpatch_version(), ASSETPATCH_VERSION_STRING) == 0, "version %s", assetpatch_version());
    char numbers[32];
    snprintf(numbers, sizeof numbers, "%d.%d.%d", ASSETPATCH_VERSION_MAJOR, ASSETPATCH_VERSION_MINOR, ASSETPATCH_VERSION_PATCH);
    CHECK(strcmp(numbers, ASSETPATCH_VERSION_STRING) == 0, "header numbers %s, string %s", numbers, ASSETPATCH_VERSION_STRING);
    CHECK(ASSETPATCH_VERSION_NUMBER == ASSETPATCH_VERSION_MAJOR * 10000 + ASSETPATCH_VERSION_MINOR * 100 + ASSETPATCH_VERSION_PATCH, "version number");
}

static void bundle_only_before_any_update(void) {
    main_client = open_fresh("main");
    CHECK(main_client, "open: %s", assetpatch_last_error());
    CHECK_VERSION(main_client, 0);
    char path[4096];
    CHECK_RC(resolve(main_client, "readme.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("bundle", "readme.txt")), "readme.txt resolved to %s", path);
    CHECK_RC(resolve(main_client, "missing.txt", path), ASSETPATCH_ERR_NOT_FOUND);
}

static void options_are_validated(void) {
    assetpatch_client *c = main_client;
    CHECK_RC(assetpatch_client_set(c, "no_such_option", "1"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", "ftp://example.com/m.json"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", ""), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "apply", "sometimes"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "keep_versions", "-1"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "stall_timeout_ms", "soon"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "public_keys", "not-base64!"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "app_version", "1.x"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "header", "no colon here"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "MANIFEST_URL", url("v1")), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "header", "X-Test: 1"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "keep_versions", "1"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "max_legacy_archive_bytes", "0"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "max_legacy_archive_bytes", "5368709120"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "max_recv_speed", "2097152"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "max_recv_speed", "0"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "max_recv_speed", "fast"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "update_priority", "foreground"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "update_priority", "background"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "fetch_priority", "high"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "metered", "on"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "metered", "off"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "metered_max_bytes", "10485760"), ASSETPATCH_OK);
    CHECK(strcmp(assetpatch_status_name(ASSETPATCH_ERR_METERED), "ASSETPATCH_ERR_METERED") == 0, "ERR_METERED name");
}

static void update_without_url_is_state_error(void) {
    CHECK_RC(assetpatch_update(main_client, NULL, NULL), ASSETPATCH_ERR_STATE);
    CHECK_RC(assetpatch_check(main_client, NULL, NULL), ASSETPATCH_ERR_STATE);
}

static void updates_to_v1_with_ordered_progress(void) {
    assetpatch_client *c = main_client;
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v1")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "variants", "@2x,"), ASSETPATCH_OK);
    int64_t version = 0;
    uint64_t bytes = 0;
    CHECK_RC(assetpatch_check(c, &version, &bytes), ASSETPATCH_OK);
    CHECK(version == 1 && bytes > 0, "check said version %" PRId64 ", %" PRIu64 " bytes", version, bytes);
    struct record r = {0};
    CHECK_RC(assetpatch_update(c, record_progress, &r), ASSETPATCH_OK);
    CHECK(!r.bad_order && !r.bytes_went_back, "phases out of order or bytes went back");
    CHECK(r.count == 5 && r.phases[0] == 1 && r.phases[4] == 5, "phases seen: %d", r.count);
    CHECK(r.done_count == 1, "DONE %d times", r.done_count);
    assetpatch_progress d = r.last_of[ASSETPATCH_PHASE_DOWNLOAD];
    CHECK(d.bytes_total == bytes && d.bytes_done == d.bytes_total, "download ended at %" PRIu64 "/%" PRIu64, d.bytes_done, d.bytes_total);
    assetpatch_progress in = r.last_of[ASSETPATCH_PHASE_INSTALL];
    CHECK(in.files_total == 4 && in.files_done == 4 && in.bytes_done == in.bytes_total, "install ended at %" PRIu64 "/%" PRIu64 " files",
          in.files_done, in.files_total);
    CHECK_VERSION(c, 1);
    char path[4096];
    CHECK_RC(resolve(c, "readme.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v1", "readme.txt")), "readme.txt resolved to %s", path);
    CHECK(strncmp(path, work, strlen(work)) == 0, "path %s is not inside the data dir", path);
    strcpy(v1_readme_path, path);
    CHECK_RC(resolve(c, "sub/sample.png", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v1", "sub/sample@2x.png")), "sub/sample.png resolved to %s", path);
    CHECK_RC(resolve(c, "sub/only-bundle.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("bundle", "sub/only-bundle.txt")), "only-bundle resolved to %s", path);
}

static void same_release_again_is_no_update(void) {
    struct record r = {0};
    CHECK_RC(assetpatch_update(main_client, record_progress, &r), ASSETPATCH_NO_UPDATE);
    CHECK(r.count == 2 && r.phases[0] == 1 && r.phases[1] == 5 && r.done_count == 1, "phases: %d, done %d", r.count, r.done_count);
    CHECK_RC(assetpatch_check(main_client, NULL, NULL), ASSETPATCH_NO_UPDATE);
}

static void updates_to_v2_keeping_v1_paths(void) {
    assetpatch_client *c = main_client;
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v2")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "variants", "@3x,@2x,"), ASSETPATCH_OK);
    int64_t version = 0;
    CHECK_RC(assetpatch_check(c, &version, NULL), ASSETPATCH_OK);
    CHECK(version == 2, "check said %" PRId64, version);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    char path[4096];
    CHECK_RC(resolve(c, "readme.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v2", "readme.txt")), "readme.txt resolved to %s", path);
    CHECK_RC(resolve(c, "sub/sample.png", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v2", "sub/sample@3x.png")), "variant @3x not preferred: %s", path);
    CHECK_RC(resolve(c, "levels/level1.json", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("bundle", "levels/level1.json")), "a file dropped in v2 must come from the bundle: %s", path);
    CHECK_RC(resolve(c, "levels/level2.json", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v2", "levels/level2.json")), "level2 resolved to %s", path);
    /* Which variant matched: @3x is index 0 of "@3x,@2x,", the plain name index 2. */
    int variant = -1;
    size_t len = 0;
    CHECK_RC(assetpatch_resolve_variant(c, "sub/sample.png", path, sizeof path, &len, &variant), ASSETPATCH_OK);
    CHECK(variant == 0 && len == strlen(path), "sub/sample.png: variant %d", variant);
    CHECK_RC(assetpatch_resolve_variant(c, "readme.txt", path, sizeof path, NULL, &variant), ASSETPATCH_OK);
    CHECK(variant == 2, "readme.txt: variant %d", variant);
    CHECK_RC(assetpatch_resolve_variant(c, "sub/sample.png", NULL, 0, &len, NULL), ASSETPATCH_ERR_RANGE);
    CHECK_RC(assetpatch_resolve_variant(c, "nothing.png", path, sizeof path, NULL, &variant), ASSETPATCH_ERR_NOT_FOUND);
    CHECK(same_file(v1_readme_path, asset("assets-v1", "readme.txt")), "a path handed out for v1 broke (keep_versions=1)");
}

/* A transport of the host's own, in C: serves http://transport.invalid/<path> from the fixtures'
 * repos directory, answering Range requests with 206, as a static host would. */
static int transport_gets, transport_ranges;
static int serve_from_disk(void *userdata, const char *method, const char *url, const char *const *headers,
                           assetpatch_transport_response *response) {
    (void)userdata;
    const char *prefix = "http://transport.invalid/";
    if (strncmp(url, prefix, strlen(prefix)) != 0) return 1;
    char *path = fmt("%s/repos/%s", fixtures, url + strlen(prefix));
    FILE *f = fopen(path, "rb");
    if (!f) {
        const char *none[] = {"Content-Length: 0", NULL};
        return assetpatch_transport_head(response, 404, none, NULL) ? 0 : 0;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long start = 0, end = size - 1;
    int status = 200;
    for (const char *const *h = headers; *h; h++)
        if (strncmp(*h, "Range: bytes=", 13) == 0 && sscanf(*h + 13, "%ld-%ld", &start, &end) >= 1) {
            if (end >= size) end = size - 1;
            status = 206;
            transport_ranges++;
        }
    transport_gets++;
    char length[64], range[128];
    snprintf(length, sizeof length, "Content-Length: %ld", end - start + 1);
    snprintf(range, sizeof range, "Content-Range: bytes %ld-%ld/%ld", start, end, size);
    const char *lines[] = {length, status == 206 ? range : NULL, NULL};
    int rc = 0;
    if (assetpatch_transport_head(response, status, lines, NULL) == 0 && strcmp(method, "HEAD") != 0) {
        fseek(f, start, SEEK_SET);
        char buffer[16384];
        long left = end - start + 1;
        while (left > 0) {
            size_t n = fread(buffer, 1, left < (long)sizeof buffer ? (size_t)left : sizeof buffer, f);
            if (n == 0) { rc = 1; break; }
            if (assetpatch_transport_body(response, buffer, n) != 0) break;
            left -= (long)n;
        }
    }
    fclose(f);
    return rc;
}

static void a_host_transport_serves_updates_by_range(void) {
    assetpatch_client *c = NULL;
    CHECK_RC(assetpatch_client_open(fmt("%s/transport", work), fmt("%s/bundle", fixtures), &c), ASSETPATCH_OK);
    assetpatch_transport small = {4, serve_from_disk, NULL};
    CHECK_RC(assetpatch_set_transport(c, &small), ASSETPATCH_ERR_ARGUMENT);
    assetpatch_transport none = {sizeof(assetpatch_transport), NULL, NULL};
    CHECK_RC(assetpatch_set_transport(c, &none), ASSETPATCH_ERR_ARGUMENT);
    assetpatch_transport t = {sizeof(assetpatch_transport), serve_from_disk, NULL};
    CHECK_RC(assetpatch_set_transport(c, &t), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", "http://transport.invalid/v1/manifest.json"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", "http://transport.invalid/v2/manifest.json"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    char path[4096];
    CHECK_RC(resolve(c, "readme.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v2", "readme.txt")), "readme.txt resolved to %s", path);
    CHECK(transport_gets >= 3 && transport_ranges >= 1, "%d requests, %d ranges through the transport", transport_gets, transport_ranges);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", "http://transport.invalid/missing/manifest.json"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_ERR_HTTP);
    CHECK_RC(assetpatch_set_transport(c, NULL), ASSETPATCH_OK);
    assetpatch_client_close(c);
}

static void invalid_names_are_refused(void) {
    const char *bad[] = { "../x", "/etc/passwd", "a//b", "a/./b", "", "a/", "a\\b", "..", ".", "sub/../readme.txt" };
    char path[4096];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = resolve(main_client, bad[i], path);
        CHECK(rc == ASSETPATCH_ERR_ARGUMENT, "\"%s\" gave %s", bad[i], assetpatch_status_name(rc));
    }
}

static void path_buffer_too_small(void) {
    size_t len = 0;
    char path[4096], tiny[4];
    CHECK_RC(assetpatch_resolve(main_client, "readme.txt", NULL, 0, &len), ASSETPATCH_ERR_RANGE);
    CHECK_RC(assetpatch_resolve(main_client, "readme.txt", path, sizeof path, NULL), ASSETPATCH_OK);
    CHECK(len == strlen(path), "size query said %zu, path is %zu", len, strlen(path));
    size_t len2 = 0;
    CHECK_RC(assetpatch_resolve(main_client, "readme.txt", tiny, sizeof tiny, &len2), ASSETPATCH_ERR_RANGE);
    CHECK(len2 == len, "len with a small buffer %zu", len2);
    CHECK_RC(assetpatch_resolve(main_client, "readme.txt", path, len + 1, &len2), ASSETPATCH_OK);
    CHECK_RC(assetpatch_resolve(main_client, "readme.txt", path, len, &len2), ASSETPATCH_ERR_RANGE);
}

static void expect_refused(const char *repo, int want) {
    assetpatch_client *c = main_client;
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url(repo)), ASSETPATCH_OK);
    int rc = assetpatch_update(c, NULL, NULL);
    CHECK(rc == want, "%s: got %s (%s), want %s", repo, assetpatch_status_name(rc), assetpatch_last_error(),
          assetpatch_status_name(want));
    CHECK(strlen(assetpatch_last_error()) > 0, "%s: no message", repo);
    CHECK_VERSION(c, 2);
    char path[4096];
    CHECK_RC(resolve(c, "readme.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v2", "readme.txt")), "%s: active release no longer served", repo);
    struct stat st;
    CHECK(stat("/tmp/assetpatch-evil.txt", &st) != 0, "%s: a file was written outside data_dir", repo);
    CHECK(stat(fmt("%s/assetpatch-evil.txt", work), &st) != 0, "%s: a file was written outside data_dir", repo);
}

#define HOSTILE(name, repo, status) static void name(void) { expect_refused(repo, status); }
HOSTILE(archive_with_wrong_sha256, "bad-sha", ASSETPATCH_ERR_INTEGRITY)
HOSTILE(truncated_archive, "truncated", ASSETPATCH_ERR_INTEGRITY)
HOSTILE(corrupt_deflate_stream, "corrupt-deflate", ASSETPATCH_ERR_ARCHIVE)
HOSTILE(entry_missing_from_archive, "missing-entry", ASSETPATCH_ERR_ARCHIVE)
HOSTILE(entry_not_in_manifest, "extra-entry", ASSETPATCH_ERR_ARCHIVE)
HOSTILE(entry_bytes_do_not_match_hash, "wrong-content", ASSETPATCH_ERR_INTEGRITY)
HOSTILE(entry_size_does_not_match, "size-mismatch", ASSETPATCH_ERR_INTEGRITY)
HOSTILE(entry_with_dotdot_path, "traversal", ASSETPATCH_ERR_ARCHIVE)
HOSTILE(entry_with_absolute_path, "absolute", ASSETPATCH_ERR_ARCHIVE)
HOSTILE(entry_with_backslash_path, "backslash", ASSETPATCH_ERR_ARCHIVE)
HOSTILE(entry_with_inner_dotdot, "dotdot-inner", ASSETPATCH_ERR_ARCHIVE)
HOSTILE(symlink_entry, "symlink", ASSETPATCH_ERR_ARCHIVE)
HOSTILE(manifest_not_json, "not-json", ASSETPATCH_ERR_MANIFEST)
HOSTILE(manifest_missing_fields, "missing-fields", ASSETPATCH_ERR_MANIFEST)
HOSTILE(manifest_wrong_types, "wrong-types", ASSETPATCH_ERR_MANIFEST)
HOSTILE(manifest_unknown_format, "unknown-format", ASSETPATCH_ERR_MANIFEST)
HOSTILE(manifest_unsafe_path, "unsafe-path", ASSETPATCH_ERR_MANIFEST)
HOSTILE(archive_url_with_ftp_scheme, "ftp-archive", ASSETPATCH_ERR_MANIFEST)

static void manifest_over_byte_limit(void) {
    CHECK_RC(assetpatch_client_set(main_client, "max_manifest_bytes", "1000"), ASSETPATCH_OK);
    expect_refused("big-manifest", ASSETPATCH_ERR_MANIFEST);
    CHECK_RC(assetpatch_client_set(main_client, "max_manifest_bytes", "16777216"), ASSETPATCH_OK);
}

static void missing_manifest(void) {
    expect_refused("no-such-repo", is_http ? ASSETPATCH_ERR_HTTP : ASSETPATCH_ERR_IO);
}

static void server_error_500(void) {
    if (!is_http) return;
    assetpatch_client *c = main_client;
    char *u = fmt("%s", base_url);
    char *slash = strrchr(u, '/');
    if (slash) strcpy(slash, "/error500/manifest.json");
    CHECK_RC(assetpatch_client_set(c, "manifest_url", u), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_ERR_HTTP);
    CHECK(strstr(assetpatch_last_error(), "500") != NULL, "message: %s", assetpatch_last_error());
}

static void unreachable_host(void) {
    if (!is_http) return;
    assetpatch_client *c = main_client;
    CHECK_RC(assetpatch_client_set(c, "manifest_url", "http://127.0.0.1:1/manifest.json"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_ERR_NETWORK);
    CHECK_VERSION(c, 2);
}

/* An older manifest (a stale cache edge, a replay) installs nothing: no update, and
 * assetpatch_last_check says why; a struct of the first layout is filled, never overrun. */
static void older_release_is_no_update_with_its_reason(void) {
    CHECK_RC(assetpatch_client_set(main_client, "manifest_url", url("v1")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_check(main_client, NULL, NULL), ASSETPATCH_NO_UPDATE);
    CHECK_RC(assetpatch_update(main_client, NULL, NULL), ASSETPATCH_NO_UPDATE);
    CHECK_VERSION(main_client, 2);
    assetpatch_check_outcome o = ASSETPATCH_CHECK_OUTCOME_INIT;
    CHECK_RC(assetpatch_last_check(main_client, &o), ASSETPATCH_OK);
    CHECK(o.status == ASSETPATCH_NO_UPDATE && o.reason == ASSETPATCH_REASON_OLDER, "status %d reason %d", o.status, o.reason);
    CHECK(o.manifest_version == 1 && o.accepted_version >= 2, "versions %lld %lld", (long long)o.manifest_version,
          (long long)o.accepted_version);
    CHECK(o.size == sizeof o, "size kept: %u", o.size);
    /* A caller whose struct is smaller than the first layout is refused; one with room for more
     * gets this library's fields and its own bytes after them untouched. */
    assetpatch_check_outcome small = ASSETPATCH_CHECK_OUTCOME_INIT;
    small.size = 8;
    CHECK_RC(assetpatch_last_check(main_client, &small), ASSETPATCH_ERR_ARGUMENT);
    struct { assetpatch_check_outcome known; unsigned char future[16]; } big;
    memset(&big, 0xAB, sizeof big);
    big.known.size = sizeof big;
    CHECK_RC(assetpatch_last_check(main_client, &big.known), ASSETPATCH_OK);
    CHECK(big.known.reason == ASSETPATCH_REASON_OLDER && big.future[0] == 0xAB && big.future[15] == 0xAB, "future bytes");
    CHECK_RC(assetpatch_client_set(main_client, "manifest_url", url("v2")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(main_client, NULL, NULL), ASSETPATCH_NO_UPDATE);
    CHECK_RC(assetpatch_last_check(main_client, &o), ASSETPATCH_OK);
    CHECK(o.reason == ASSETPATCH_REASON_CURRENT && o.manifest_version == 2, "reason %d", o.reason);
}

/* A primary that has nothing (a missing head) before a mirror that has the release: the update
 * comes from the mirror, and the host is told so: the outcome names the source whose head it
 * took, each source says what it did; sized structs as everywhere. */
static void a_mirror_serves_when_the_primary_has_nothing(void) {
    assetpatch_client *c = open_fresh("mirrors");
    CHECK(c, "open: %s", assetpatch_last_error());
    size_t n = 99;
    CHECK_RC(assetpatch_source_count(c, &n), ASSETPATCH_OK);
    CHECK(n == 0, "sources before any check: %zu", n);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("no-such-repo")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "mirrors", url("v2")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "hedge_ms", "-1"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "mirrors", "ftp://x/head.json"), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_VERSION(c, 2);
    assetpatch_check_outcome o = ASSETPATCH_CHECK_OUTCOME_INIT;
    CHECK_RC(assetpatch_last_check(c, &o), ASSETPATCH_OK);
    CHECK(o.status == ASSETPATCH_OK && o.source == 1, "status %d source %d", o.status, o.source);
    CHECK_RC(assetpatch_source_count(c, &n), ASSETPATCH_OK);
    CHECK(n == 2, "sources: %zu", n);
    assetpatch_source_info s = ASSETPATCH_SOURCE_INFO_INIT;
    CHECK_RC(assetpatch_source_at(c, 0, &s), ASSETPATCH_OK);
    CHECK(s.demoted == 1 && s.served_head == 0 && s.bytes == 0 && strstr(s.url, "no-such-repo") && s.last[0], "primary: %d %d %s / %s",
          s.demoted, s.served_head, s.url, s.last);
    CHECK_RC(assetpatch_source_at(c, 1, &s), ASSETPATCH_OK);
    /* The mirror's manifest.json names its head, which was read in its place. */
    CHECK(s.demoted == 0 && s.served_head == 1 && strcmp(s.url, fmt("%s/v2/head.json", base_url)) == 0, "mirror: %d %d %s / %s",
          s.demoted, s.served_head, s.url, s.last);
    CHECK_RC(assetpatch_source_at(c, 2, &s), ASSETPATCH_ERR_NOT_FOUND);
    s.size = 16;
    CHECK_RC(assetpatch_source_at(c, 1, &s), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_source_at(c, 1, NULL), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_source_count(NULL, &n), ASSETPATCH_ERR_ARGUMENT);
    assetpatch_client_close(c);
}

static void state_survives_reopen(void) {
    assetpatch_client_close(main_client);
    main_client = NULL;
    assetpatch_client *c = NULL;
    CHECK_RC(assetpatch_client_open(fmt("%s/main", work), bundle(), &c), ASSETPATCH_OK);
    main_client = c;
    CHECK_VERSION(c, 2);
    char path[4096];
    CHECK_RC(resolve(c, "levels/level2.json", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v2", "levels/level2.json")), "level2 after reopen: %s", path);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v1")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_NO_UPDATE);
    assetpatch_check_outcome o = ASSETPATCH_CHECK_OUTCOME_INIT;
    CHECK_RC(assetpatch_last_check(c, &o), ASSETPATCH_OK);
    CHECK(o.reason == ASSETPATCH_REASON_OLDER, "after reopen: reason %d", o.reason);
}

/* Crash-loop rollback across opens (as an app's launches), then rollback, mark_good, reset. */
static void lifecycle_crash_loop_rollback_mark_good_reset(void) {
    assetpatch_client *c = open_fresh("lifecycle");
    CHECK(c, "open: %s", assetpatch_last_error());
    CHECK_RC(assetpatch_mark_good(c), ASSETPATCH_ERR_STATE);
    CHECK_RC(assetpatch_rollback(c), ASSETPATCH_ERR_STATE);
    CHECK_RC(assetpatch_client_set(c, "max_failed_launches", "1"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v1")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_RC(assetpatch_mark_good(c), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v2")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    assetpatch_lifecycle l = ASSETPATCH_LIFECYCLE_INIT;
    CHECK_RC(assetpatch_lifecycle_get(c, &l), ASSETPATCH_OK);
    CHECK(l.active_version == 2 && !l.active_marked_good && l.launches == 0 && l.max_failed_launches == 1,
          "after the update: version %" PRId64 ", good %d, launches %u", l.active_version, l.active_marked_good, l.launches);
    assetpatch_client_close(c);
    /* Launch 1 keeps version 2; launch 2 exceeds max_failed_launches and goes back to 1. */
    CHECK_RC(assetpatch_client_open(fmt("%s/lifecycle", work), bundle(), &c), ASSETPATCH_OK);
    CHECK_VERSION(c, 2);
    assetpatch_client_close(c);
    CHECK_RC(assetpatch_client_open(fmt("%s/lifecycle", work), bundle(), &c), ASSETPATCH_OK);
    CHECK_VERSION(c, 1);
    CHECK_RC(assetpatch_lifecycle_get(c, &l), ASSETPATCH_OK);
    CHECK(l.rolled_back_from == 2 && l.rolled_back_to == 1 && l.bad_versions == 1 && l.active_marked_good,
          "after the crash loop: from %" PRId64 " to %" PRId64 ", bad %u", l.rolled_back_from, l.rolled_back_to, l.bad_versions);
    CHECK(strstr(l.rollback_reason, "crash loop") != NULL, "reason: %s", l.rollback_reason);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v2")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_NO_UPDATE); /* version 2 is bad now */
    CHECK_RC(assetpatch_rollback(c), ASSETPATCH_OK);
    CHECK_VERSION(c, 0);
    char path[4096];
    CHECK_RC(resolve(c, "readme.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, fmt("%s/bundle/readme.txt", fixtures)), "after rolling back to the bundle: %s", path);
    uint64_t releases = 0, downloads = 1;
    CHECK_RC(assetpatch_disk_usage(c, &releases, &downloads), ASSETPATCH_OK);
    CHECK(releases > 0 && downloads == 0, "disk usage before reset: %" PRIu64 " / %" PRIu64, releases, downloads);
    CHECK_RC(assetpatch_reset(c), ASSETPATCH_OK);
    CHECK_RC(assetpatch_disk_usage(c, &releases, NULL), ASSETPATCH_OK);
    CHECK(releases == 0, "disk usage after reset: %" PRIu64, releases);
    CHECK_RC(assetpatch_lifecycle_get(c, &l), ASSETPATCH_OK);
    CHECK(l.bad_versions == 0 && l.active_version == 0, "after reset: bad %u", l.bad_versions);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_VERSION(c, 2);
    CHECK_RC(assetpatch_lifecycle_get(NULL, &l), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_lifecycle_get(c, NULL), ASSETPATCH_ERR_ARGUMENT);
    assetpatch_client_close(c);
}

/* What the app can show: the candidate after a check, the active release after the update. */
static void release_info_and_notes(void) {
    assetpatch_client *c = open_fresh("releaseinfo");
    CHECK(c, "open: %s", assetpatch_last_error());
    assetpatch_release_info info = ASSETPATCH_RELEASE_INFO_INIT;
    CHECK_RC(assetpatch_release_get(c, ASSETPATCH_RELEASE_ACTIVE, &info), ASSETPATCH_ERR_NOT_FOUND);
    CHECK_RC(assetpatch_release_get(c, ASSETPATCH_RELEASE_CANDIDATE, &info), ASSETPATCH_ERR_NOT_FOUND);
    CHECK_RC(assetpatch_release_get(c, 99, &info), ASSETPATCH_ERR_ARGUMENT);
    /* A struct whose size was never set (a host built before the field existed, zeroed) is
     * refused, never written. */
    assetpatch_release_info zeroed;
    memset(&zeroed, 0, sizeof zeroed);
    CHECK_RC(assetpatch_release_get(c, ASSETPATCH_RELEASE_ACTIVE, &zeroed), ASSETPATCH_ERR_ARGUMENT);
    assetpatch_lifecycle zeroed_lifecycle;
    memset(&zeroed_lifecycle, 0, sizeof zeroed_lifecycle);
    CHECK_RC(assetpatch_lifecycle_get(c, &zeroed_lifecycle), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v2")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_check(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_RC(assetpatch_release_get(c, ASSETPATCH_RELEASE_CANDIDATE, &info), ASSETPATCH_OK);
    CHECK(info.version == 2 && info.mandatory && info.has_notes && !info.marked_good && strcmp(info.label, "second") == 0,
          "candidate: version %" PRId64 ", mandatory %d, notes %d, label %s", info.version, info.mandatory, info.has_notes, info.label);
    size_t len = 0;
    char small[8];
    CHECK_RC(assetpatch_release_notes(c, ASSETPATCH_RELEASE_CANDIDATE, small, sizeof small, &len), ASSETPATCH_ERR_RANGE);
    char notes[256];
    CHECK_RC(assetpatch_release_notes(c, ASSETPATCH_RELEASE_CANDIDATE, notes, sizeof notes, &len), ASSETPATCH_OK);
    CHECK(len == strlen(notes) && strstr(notes, "Winter event") && strstr(notes, "\xe2\x9d\x84"), "notes: %s", notes);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_RC(assetpatch_release_get(c, ASSETPATCH_RELEASE_ACTIVE, &info), ASSETPATCH_OK);
    CHECK(info.version == 2 && info.created > 1700000000 && !info.signature_verified && !info.marked_good,
          "active: version %" PRId64 ", created %" PRId64, info.version, info.created);
    CHECK_RC(assetpatch_mark_good(c), ASSETPATCH_OK);
    CHECK_RC(assetpatch_release_get(c, ASSETPATCH_RELEASE_ACTIVE, &info), ASSETPATCH_OK);
    CHECK(info.marked_good, "marked good");
    CHECK_RC(assetpatch_release_notes(c, ASSETPATCH_RELEASE_ACTIVE, notes, sizeof notes, NULL), ASSETPATCH_OK);
    CHECK(strstr(notes, "Winter event"), "active notes: %s", notes);
    CHECK_RC(assetpatch_check(c, NULL, NULL), ASSETPATCH_NO_UPDATE);
    CHECK_RC(assetpatch_release_get(c, ASSETPATCH_RELEASE_CANDIDATE, &info), ASSETPATCH_ERR_NOT_FOUND);
    CHECK_RC(assetpatch_release_get(c, ASSETPATCH_RELEASE_PENDING, &info), ASSETPATCH_ERR_NOT_FOUND);
    assetpatch_client_close(c);
}

/* A plugin of an unsigned release: refused, then loaded with allow_unsigned_plugins, called. */
static void plugins_load_from_the_active_release(void) {
    assetpatch_client *c = open_fresh("plugins");
    CHECK(c, "open: %s", assetpatch_last_error());
    void *address = NULL;
    CHECK_RC(assetpatch_plugin_load(c, "fixture", NULL, &address), ASSETPATCH_ERR_NOT_FOUND); /* bundle only */
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("plug")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    size_t count = 99;
    assetpatch_plugin_info list[4] = {ASSETPATCH_PLUGIN_INFO_INIT};
    CHECK_RC(assetpatch_plugin_list(c, list, 4, &count), ASSETPATCH_OK);
    CHECK(count == 1 && strcmp(list[0].name, "fixture") == 0 && strcmp(list[0].version, "2.1") == 0 &&
          strcmp(list[0].entry, "plugin_entry") == 0 && strcmp(list[0].abi, "fixture-abi-1") == 0,
          "list: %zu, %s %s %s %s", count, list[0].name, list[0].version, list[0].entry, list[0].abi);
    /* A host built against a newer header, whose elements are larger: they are laid out by the
     * first element's size, and the bytes this library does not know stay as they were. */
    struct { assetpatch_plugin_info info; unsigned char future[24]; } wide[2];
    memset(wide, 0xAB, sizeof wide);
    wide[0].info.size = sizeof wide[0];
    CHECK_RC(assetpatch_plugin_list(c, &wide[0].info, 2, &count), ASSETPATCH_OK);
    CHECK(count == 1 && strcmp(wide[0].info.name, "fixture") == 0 && wide[0].info.size == sizeof wide[0] &&
          wide[0].future[0] == 0xAB && wide[0].future[23] == 0xAB && wide[1].info.name[0] == (char)0xAB,
          "wide list: %s, size %u", wide[0].info.name, wide[0].info.size);
    CHECK_RC(assetpatch_plugin_load(c, "fixture", NULL, &address), ASSETPATCH_ERR_SIGNATURE);
    CHECK_RC(assetpatch_client_set(c, "allow_unsigned_plugins", "1"), ASSETPATCH_OK);
    CHECK_RC(assetpatch_plugin_load(c, "fixture", NULL, &address), ASSETPATCH_OK);
    int (*entry)(void) = (int (*)(void))address;
    CHECK(entry() == 42, "entry returned %d", entry());
    void *name_fn = NULL;
    CHECK_RC(assetpatch_plugin_load(c, "fixture", "plugin_name", &name_fn), ASSETPATCH_OK);
    CHECK(strcmp(((const char *(*)(void))name_fn)(), "fixture plugin") == 0, "plugin_name");
    CHECK_RC(assetpatch_plugin_load(c, "fixture", "missing_symbol", &address), ASSETPATCH_ERR_NOT_FOUND);
    CHECK(strstr(assetpatch_last_error(), "missing_symbol") != NULL, "message: %s", assetpatch_last_error());
    CHECK_RC(assetpatch_plugin_load(c, "nobody", NULL, &address), ASSETPATCH_ERR_NOT_FOUND);
    CHECK_RC(assetpatch_plugin_load(c, NULL, NULL, &address), ASSETPATCH_ERR_ARGUMENT);
    CHECK_RC(assetpatch_plugin_load(c, "fixture", NULL, NULL), ASSETPATCH_ERR_ARGUMENT);
    assetpatch_client_close(c);
}

static void background_update_and_wait(void) {
    assetpatch_client *c = open_fresh("background");
    CHECK(c, "open: %s", assetpatch_last_error());
    int result = 12345;
    CHECK_RC(assetpatch_update_wait(c, 0, &result), ASSETPATCH_ERR_STATE);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v2")), ASSETPATCH_OK);
    struct record r = {0};
    CHECK_RC(assetpatch_update_start(c, record_progress, &r), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update_wait(c, -1, &result), ASSETPATCH_OK);
    CHECK(result == ASSETPATCH_OK, "background update: %s", assetpatch_status_name(result));
    CHECK(r.done_count == 1, "DONE %d times", r.done_count);
    CHECK_RC(assetpatch_update_wait(c, 0, &result), ASSETPATCH_ERR_STATE);
    CHECK_VERSION(c, 2);
    assetpatch_client_close(c);
}

static void cancel_from_progress_callback(void) {
    assetpatch_client *c = open_fresh("cancelled");
    CHECK(c, "open: %s", assetpatch_last_error());
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v2")), ASSETPATCH_OK);
    struct record r = {0};
    r.cancel_at_phase = ASSETPATCH_PHASE_INSTALL;
    CHECK_RC(assetpatch_update(c, record_progress, &r), ASSETPATCH_ERR_CANCELLED);
    CHECK(r.done_count == 0, "DONE after a cancel");
    CHECK_VERSION(c, 0);
    char path[4096];
    CHECK_RC(resolve(c, "readme.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("bundle", "readme.txt")), "bundle not served after cancel");
    struct record r2 = {0};
    CHECK_RC(assetpatch_update(c, record_progress, &r2), ASSETPATCH_OK);
    CHECK_VERSION(c, 2);
    assetpatch_client_close(c);
}

static void legacy_seed_manifest(void) {
    assetpatch_client *c = open_fresh("legacy");
    CHECK(c, "open: %s", assetpatch_last_error());
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("legacy")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_VERSION(c, 1);
    char path[4096];
    CHECK_RC(resolve(c, "text/lorem.txt", path), ASSETPATCH_OK);
    CHECK(same_file(path, asset("assets-v1", "text/lorem.txt")), "lorem resolved to %s", path);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_NO_UPDATE);
    /* Moving on to a format-1 release works without public_keys. */
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v2")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    CHECK_VERSION(c, 2);
    assetpatch_client_close(c);
}

/* The first updater holds the data directory's lock inside its progress callback until the
 * second has tried: no sleep decides the order, whatever the scheduler does. (The 120 s bound
 * only keeps a broken build from hanging the suite.) */
static _Atomic int holding, other_attempt_done;

static int hold_until_other_attempted(const assetpatch_progress *p, void *userdata) {
    (void)userdata;
    if (p->phase == ASSETPATCH_PHASE_DOWNLOAD || p->phase == ASSETPATCH_PHASE_INSTALL) {
        holding = 1;
        for (int i = 0; i < 12000 && !other_attempt_done; i++) usleep(10000);
    }
    return 0;
}

static void second_updater_on_same_dir_is_busy(void) {
    assetpatch_client *a = open_fresh("shared");
    CHECK(a, "open a: %s", assetpatch_last_error());
    assetpatch_client *b = NULL;
    CHECK_RC(assetpatch_client_open(fmt("%s/shared", work), bundle(), &b), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(a, "manifest_url", url("v2")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(b, "manifest_url", url("v2")), ASSETPATCH_OK);
    holding = other_attempt_done = 0;
    CHECK_RC(assetpatch_update_start(a, hold_until_other_attempted, NULL), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update_start(a, NULL, NULL), ASSETPATCH_ERR_BUSY);
    for (int i = 0; i < 12000 && !holding; i++) usleep(10000);
    CHECK(holding, "the first updater never reached its download");
    int rc = assetpatch_update(b, NULL, NULL);
    other_attempt_done = 1;
    int result = 0;
    CHECK_RC(assetpatch_update_wait(a, -1, &result), ASSETPATCH_OK);
    CHECK(rc == ASSETPATCH_ERR_BUSY, "second updater got %s", assetpatch_status_name(rc));
    CHECK(result == ASSETPATCH_OK, "first updater got %s", assetpatch_status_name(result));
    assetpatch_client_close(a);
    assetpatch_client_close(b);
}

static int log_lines;
static void count_log(int level, const char *message, void *userdata) {
    (void)level; (void)userdata;
    if (message && *message) log_lines++;
}

static void log_callback_receives_lines(void) {
    assetpatch_client *c = open_fresh("logging");
    CHECK(c, "open: %s", assetpatch_last_error());
    CHECK_RC(assetpatch_set_log(c, count_log, NULL), ASSETPATCH_OK);
    CHECK_RC(assetpatch_client_set(c, "manifest_url", url("v1")), ASSETPATCH_OK);
    CHECK_RC(assetpatch_update(c, NULL, NULL), ASSETPATCH_OK);
    CHECK(log_lines > 0, "no log lines");
    assetpatch_client_close(c);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s FIXTURES_DIR BASE_URL WORK_DIR\n", argv[0]);
        return 2;
    }
    fixtures = argv[1];
    base_url = argv[2];
    work = argv[3];
    is_http = strncmp(base_url, "http", 4) == 0;
    printf("# test_abi over %s\n", base_url);
    run("null_arguments", null_arguments);
    run("status_names_and_version", status_names_and_version);
    run("bundle_only_before_any_update", bundle_only_before_any_update);
    if (!main_client) { printf("0 passed, 1 failed\n"); return 1; }
    run("options_are_validated", options_are_validated);
    run("update_without_url_is_state_error", update_without_url_is_state_error);
    run("updates_to_v1_with_ordered_progress", updates_to_v1_with_ordered_progress);
    run("same_release_again_is_no_update", same_release_again_is_no_update);
    run("updates_to_v2_keeping_v1_paths", updates_to_v2_keeping_v1_paths);
    run("a_host_transport_serves_updates_by_range", a_host_transport_serves_updates_by_range);
    run("invalid_names_are_refused", invalid_names_are_refused);
    run("path_buffer_too_small", path_buffer_too_small);
    run("archive_with_wrong_sha256", archive_with_wrong_sha256);
    run("truncated_archive", truncated_archive);
    run("corrupt_deflate_stream", corrupt_deflate_stream);
    run("entry_missing_from_archive", entry_missing_from_archive);
    run("entry_not_in_manifest", entry_not_in_manifest);
    run("entry_bytes_do_not_match_hash", entry_bytes_do_not_match_hash);
    run("entry_size_does_not_match", entry_size_does_not_match);
    run("entry_with_dotdot_path", entry_with_dotdot_path);
    run("entry_with_absolute_path", entry_with_absolute_path);
    run("entry_with_backslash_path", entry_with_backslash_path);
    run("entry_with_inner_dotdot", entry_with_inner_dotdot);
    run("symlink_entry", symlink_entry);
    run("manifest_not_json", manifest_not_json);
    run("manifest_missing_fields", manifest_missing_fields);
    run("manifest_wrong_types", manifest_wrong_types);
    run("manifest_unknown_format", manifest_unknown_format);
    run("manifest_unsafe_path", manifest_unsafe_path);
    run("archive_url_with_ftp_scheme", archive_url_with_ftp_scheme);
    run("manifest_over_byte_limit", manifest_over_byte_limit);
    run("missing_manifest", missing_manifest);
    run("server_error_500", server_error_500);
    run("unreachable_host", unreachable_host);
    run("older_release_is_no_update_with_its_reason", older_release_is_no_update_with_its_reason);
    run("a_mirror_serves_when_the_primary_has_nothing", a_mirror_serves_when_the_primary_has_nothing);
    run("state_survives_reopen", state_survives_reopen);
    run("lifecycle_crash_loop_rollback_mark_good_reset", lifecycle_crash_loop_rollback_mark_good_reset);
    run("release_info_and_notes", release_info_and_notes);
    run("plugins_load_from_the_active_release", plugins_load_from_the_active_release);
    run("background_update_and_wait", background_update_and_wait);
    run("cancel_from_progress_callback", cancel_from_progress_callback);
    run("legacy_seed_manifest", legacy_seed_manifest);
    run("second_updater_on_same_dir_is_busy", second_updater_on_same_dir_is_busy);
    run("log_callback_receives_lines", log_callback_receives_lines);
    assetpatch_client_close(main_client);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
