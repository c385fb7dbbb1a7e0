/* A host that updates its plugins like resources: updates from MANIFEST_URL (trusting the key
 * in KEYFILE.pub's base64), lists the active release's plugins, and calls them.
 *   plugin_host DATA_DIR MANIFEST_URL PUBLIC_KEY
 * Exit 0 on success, 3 when the update or a load fails. */
#include <assetpatch.h>
#include <stdio.h>

#include "shape_api.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DATA_DIR MANIFEST_URL PUBLIC_KEY\n", argv[0]);
        return 2;
    }
    assetpatch_client *c;
    if (assetpatch_client_open(argv[1], NULL, &c) != ASSETPATCH_OK) {
        fprintf(stderr, "%s\n", assetpatch_last_error());
        return 3;
    }
    if (assetpatch_client_set(c, "manifest_url", argv[2]) != ASSETPATCH_OK ||
        assetpatch_client_set(c, "public_keys", argv[3]) != ASSETPATCH_OK) {  /* only signed plugins load */
        fprintf(stderr, "%s\n", assetpatch_last_error());
        assetpatch_client_close(c);
        return 3;
    }
    int rc = assetpatch_update(c, NULL, NULL);
    if (rc < 0) fprintf(stderr, "update: %s: %s\n", assetpatch_status_name(rc), assetpatch_last_error());
    int64_t version = 0;
    if (assetpatch_current(c, &version) == ASSETPATCH_OK) printf("active release: %lld\n", (long long)version);

    assetpatch_plugin_info plugins[8] = {ASSETPATCH_PLUGIN_INFO_INIT};  /* the first element's size sets the stride */
    size_t count = 0;
    if (assetpatch_plugin_list(c, plugins, 8, &count) == ASSETPATCH_OK)
        for (size_t i = 0; i < count && i < 8; i++)
            printf("plugin %s %s (entry %s, abi %s)\n", plugins[i].name, plugins[i].version, plugins[i].entry, plugins[i].abi);

    int status = 0;
    void *entry = NULL;
    if (assetpatch_plugin_load(c, "greeter", NULL, &entry) == ASSETPATCH_OK) {
        printf("greeter says: %s\n", ((const char *(*)(void))entry)());
    } else {
        fprintf(stderr, "greeter: %s: %s\n", assetpatch_status_name(-1), assetpatch_last_error());
        status = 3;
    }
    void *create = NULL, *destroy = NULL, *name = NULL, *area = NULL;
    if (assetpatch_plugin_load(c, "shape", NULL, &create) == ASSETPATCH_OK &&
        assetpatch_plugin_load(c, "shape", "shape_destroy", &destroy) == ASSETPATCH_OK &&
        assetpatch_plugin_load(c, "shape", "shape_name", &name) == ASSETPATCH_OK &&
        assetpatch_plugin_load(c, "shape", "shape_area", &area) == ASSETPATCH_OK) {
        void *shape = ((shape_create_fn)create)();
        if (shape) {
            printf("shape plugin made a %s of area %.2f\n", ((shape_name_fn)name)(shape), ((shape_area_fn)area)(shape));
            ((shape_destroy_fn)destroy)(shape);
        }
    } else {
        fprintf(stderr, "shape: %s\n", assetpatch_last_error());
        status = 3;
    }
    assetpatch_client_close(c);
    return rc < 0 ? 3 : status;
}
