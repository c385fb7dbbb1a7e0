/* The run scripts/hot-symbols.sh profiles: what a host does with the library in one session.
 *   host DATA_DIR MANIFEST_URL BUNDLE_DIR PUBLIC_KEY|- NAME...
 * Opens a client (variants "@3x,@2x,"), checks, updates with a progress callback, resolves
 * each NAME plainly and by variant, reads the active release, the plugins and the disk usage,
 * and closes. Exit 0 when the update installed or found nothing to do. */
#include <assetpatch.h>
#include <stdio.h>
#include <string.h>

static int progress(const assetpatch_progress *p, void *userdata) {
    (void)p;
    (void)userdata;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5) return 2;
    assetpatch_client *c;
    if (assetpatch_client_open(argv[1], argv[3], &c) != ASSETPATCH_OK) return 1;
    if (assetpatch_client_set(c, "manifest_url", argv[2]) != ASSETPATCH_OK) return 1;
    if (strcmp(argv[4], "-") != 0 && assetpatch_client_set(c, "public_keys", argv[4]) != ASSETPATCH_OK) return 1;
    if (assetpatch_client_set(c, "variants", "@3x,@2x,") != ASSETPATCH_OK) return 1;
    int64_t version = 0;
    uint64_t bytes = 0;
    (void)assetpatch_check(c, &version, &bytes);
    int rc = assetpatch_update(c, progress, NULL);
    if (rc < 0) fprintf(stderr, "%s: %s\n", assetpatch_status_name(rc), assetpatch_last_error());
    char path[4096];
    size_t len;
    for (int i = 5; i < argc; i++) {
        (void)assetpatch_resolve(c, argv[i], path, sizeof path, &len);
        int variant;
        (void)assetpatch_resolve_variant(c, argv[i], path, sizeof path, &len, &variant);
    }
    /* Content on demand: the groups listed, the absent ones fetched, a file of one resolved. */
    size_t groups = 0;
    (void)assetpatch_group_count(c, &groups);
    for (size_t i = 0; i < groups; i++) {
        assetpatch_group_info g = ASSETPATCH_GROUP_INFO_INIT;
        if (assetpatch_group_at(c, i, &g) != ASSETPATCH_OK || g.state == ASSETPATCH_GROUP_LOCAL) continue;
        const char *names[] = {g.name, NULL};
        if (assetpatch_group_fetch(c, names, progress, NULL) < 0) fprintf(stderr, "%s\n", assetpatch_last_error());
        (void)assetpatch_group_status(c, g.name, &g);
    }
    (void)assetpatch_resolve(c, "levels/90/0/asset90.txt", path, sizeof path, &len);
    assetpatch_release_info info = ASSETPATCH_RELEASE_INFO_INIT;
    (void)assetpatch_release_get(c, ASSETPATCH_RELEASE_ACTIVE, &info);
    assetpatch_plugin_info plugins[8];
    size_t count;
    for (size_t i = 0; i < 8; i++) plugins[i] = (assetpatch_plugin_info)ASSETPATCH_PLUGIN_INFO_INIT;
    (void)assetpatch_plugin_list(c, plugins, 8, &count);
    uint64_t releases, downloads;
    (void)assetpatch_disk_usage(c, &releases, &downloads);
    assetpatch_client_close(c);
    return rc < 0 ? 1 : 0;
}
