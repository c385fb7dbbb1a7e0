/* assetpatch example: update from a release repository with a text progress bar, then resolve
 * resource names and print their paths.
 *
 *   assetpatch-example DATA_DIR BUNDLE_DIR MANIFEST_URL [NAME...]
 *
 * Build against an installed library:
 *   cc example.c $(pkg-config --cflags --libs assetpatch) -o assetpatch-example
 */
#include <assetpatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *phase_name(int phase) {
    switch (phase) {
    case ASSETPATCH_PHASE_CHECK: return "check";
    case ASSETPATCH_PHASE_DOWNLOAD: return "download";
    case ASSETPATCH_PHASE_INSTALL: return "install";
    case ASSETPATCH_PHASE_ACTIVATE: return "activate";
    case ASSETPATCH_PHASE_DONE: return "done";
    default: return "?";
    }
}

struct bar { int last_phase; int tty; };

static int on_progress(const assetpatch_progress *p, void *userdata) {
    struct bar *bar = userdata;
    int new_phase = p->phase != bar->last_phase;
    int complete = p->bytes_total > 0 && p->bytes_done == p->bytes_total;
    /* On a terminal: one bar redrawn in place. In a log: a line per phase, and its final numbers. */
    if (!bar->tty && !new_phase && !complete) return 0;
    if (bar->tty && new_phase && bar->last_phase != 0) fputc('\n', stderr);
    if (!bar->tty && new_phase && complete && p->bytes_done > 0) fprintf(stderr, "%s\n", phase_name(p->phase));
    bar->last_phase = p->phase;
    fprintf(stderr, "%s%-8s", bar->tty ? "\r" : "", phase_name(p->phase));
    if (p->bytes_total > 0) {
        int width = 30, filled = (int)(p->bytes_done * width / p->bytes_total);
        fprintf(stderr, " [%.*s%*s] %3d%% %" PRIu64 "/%" PRIu64 " bytes", filled,
                "##############################", width - filled, "",
                (int)(p->bytes_done * 100 / p->bytes_total), p->bytes_done, p->bytes_total);
    }
    if (p->files_total > 0) fprintf(stderr, " %" PRIu64 "/%" PRIu64 " files", p->files_done, p->files_total);
    if (!bar->tty || p->phase == ASSETPATCH_PHASE_DONE) fputc('\n', stderr);
    fflush(stderr);
    return 0;  /* non-zero would cancel */
}

static void on_log(int level, const char *message, void *userdata) {
    (void)userdata;
    /* Warnings (retries, resumes). Errors (level 3) carry the text main() prints from the status. */
    if (level == 2) fprintf(stderr, "\n[assetpatch] %s\n", message);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s DATA_DIR BUNDLE_DIR MANIFEST_URL [NAME...]\n", argv[0]);
        return 1;
    }
    printf("libassetpatch %s\n", assetpatch_version());

    assetpatch_client *client = NULL;
    if (assetpatch_client_open(argv[1], argv[2], &client) != ASSETPATCH_OK) {
        fprintf(stderr, "open: %s\n", assetpatch_last_error());
        return 3;
    }
    if (assetpatch_set_log(client, on_log, NULL) != ASSETPATCH_OK ||
        assetpatch_client_set(client, "manifest_url", argv[3]) != ASSETPATCH_OK ||
        assetpatch_client_set(client, "variants", "@3x,@2x,") != ASSETPATCH_OK) {
        fprintf(stderr, "configure: %s\n", assetpatch_last_error());
        assetpatch_client_close(client);
        return 3;
    }

    struct bar bar = { 0, isatty(2) };
    int rc = assetpatch_update(client, on_progress, &bar);
    int64_t version = 0;
    if (assetpatch_current(client, &version) != ASSETPATCH_OK) version = -1;
    if (rc < 0)
        fprintf(stderr, "\nupdate failed: %s: %s (still serving version %" PRId64 ")\n",
                assetpatch_status_name(rc), assetpatch_last_error(), version);
    else
        printf("%s; active version %" PRId64 "\n", rc == ASSETPATCH_OK ? "updated" : "no update", version);

    int missing = 0;
    for (int i = 4; i < argc; i++) {
        char path[4096];
        int r = assetpatch_resolve(client, argv[i], path, sizeof path, NULL);
        if (r == ASSETPATCH_OK) {
            printf("%s -> %s\n", argv[i], path);
        } else {
            printf("%s -> %s (%s)\n", argv[i], assetpatch_status_name(r), assetpatch_last_error());
            missing++;
        }
    }
    /* The app ran well on this release: confirm it, so max_failed_launches never rolls it back. */
    if (version > 0 && missing == 0 && assetpatch_mark_good(client) != ASSETPATCH_OK)
        fprintf(stderr, "mark_good: %s\n", assetpatch_last_error());
    assetpatch_client_close(client);
    return rc < 0 ? 3 : (missing ? 4 : 0);
}
