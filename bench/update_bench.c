/* One update through the library (no progress output): the unit the benchmark times.
 *   update_bench DATA_DIR MANIFEST_URL [BUNDLE_DIR|-] [OPTION=VALUE]...
 * Prints nothing on success; exit 0 installed or no update, 3 error. */
#include <assetpatch.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *bundle = argc > 3 && strcmp(argv[3], "-") != 0 ? argv[3] : NULL;
    assetpatch_client *c;
    if (assetpatch_client_open(argv[1], bundle, &c) != ASSETPATCH_OK) { fprintf(stderr, "%s\n", assetpatch_last_error()); return 3; }
    if (assetpatch_client_set(c, "manifest_url", argv[2]) != ASSETPATCH_OK) return 3;
    for (int i = 4; i < argc; i++) {
        char option[64];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof option) return 2;
        memcpy(option, argv[i], (size_t)(eq - argv[i]));
        option[eq - argv[i]] = 0;
        if (assetpatch_client_set(c, option, eq + 1) != ASSETPATCH_OK) { fprintf(stderr, "%s\n", assetpatch_last_error()); return 3; }
    }
    int rc = assetpatch_update(c, NULL, NULL);
    if (rc < 0) fprintf(stderr, "%s: %s\n", assetpatch_status_name(rc), assetpatch_last_error());
    assetpatch_client_close(c);
    return rc < 0 ? 3 : 0;
}
