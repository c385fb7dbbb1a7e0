/* One full update through the library (no progress output): the unit the benchmark times.
 *   update_bench DATA_DIR MANIFEST_URL */
#include <assetpatch.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    assetpatch_client *c;
    if (assetpatch_client_open(argv[1], NULL, &c) != ASSETPATCH_OK) { fprintf(stderr, "%s\n", assetpatch_last_error()); return 3; }
    if (assetpatch_client_set(c, "manifest_url", argv[2]) != ASSETPATCH_OK) return 3;
    int rc = assetpatch_update(c, NULL, NULL);
    if (rc < 0) fprintf(stderr, "%s: %s\n", assetpatch_status_name(rc), assetpatch_last_error());
    assetpatch_client_close(c);
    return rc < 0 ? 3 : 0;
}
