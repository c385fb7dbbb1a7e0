/* A level fetched when the player reaches it (docs/groups.md): the program updates (the base
 * arrives, the levels' groups do not), then, level by level, resolves the level's map, and when
 * the map is not local fetches the level's group with a progress bar before loading it.
 *
 *     level DATA_DIR MANIFEST_URL LEVEL...        e.g. level data http://cdn/game/head.json 1 2
 *
 * Level N's map is levels/levelN.json in group levelN. Exits 0 when every level loaded. */
#include <assetpatch.h>
#include <stdio.h>
#include <string.h>

static int show(const assetpatch_progress *p, void *userdata) {
    (void)userdata;
    if (p->phase == ASSETPATCH_PHASE_DOWNLOAD && p->bytes_total > 0)
        printf("  loading: %3d%% (%llu of %llu bytes)\n", (int)(100 * p->bytes_done / p->bytes_total),
               (unsigned long long)p->bytes_done, (unsigned long long)p->bytes_total);
    return 0; /* non-zero cancels */
}

/* The path of a level's map, fetching its group first when it is not on disk. */
static int level_path(assetpatch_client *c, const char *map, const char *group, char *path, size_t cap) {
    int rc = assetpatch_resolve(c, map, path, cap, NULL);
    if (rc != ASSETPATCH_ERR_NOT_LOCAL) return rc;
    assetpatch_group_info info = ASSETPATCH_GROUP_INFO_INIT;
    if (assetpatch_group_status(c, group, &info) == ASSETPATCH_OK)
        printf("  %s is not on disk (group %s: %llu files, %llu bytes to fetch)\n", map, info.name,
               (unsigned long long)info.files, (unsigned long long)info.fetch_bytes);
    const char *groups[] = {group, NULL};
    rc = assetpatch_group_fetch(c, groups, show, NULL);
    if (rc != ASSETPATCH_OK) return rc; /* offline: try again later; what arrived is kept */
    return assetpatch_resolve(c, map, path, cap, NULL);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DATA_DIR MANIFEST_URL LEVEL...\n", argv[0]);
        return 1;
    }
    assetpatch_client *c = NULL;
    if (assetpatch_client_open(argv[1], NULL, &c) != ASSETPATCH_OK ||
        assetpatch_client_set(c, "manifest_url", argv[2]) != ASSETPATCH_OK) {
        fprintf(stderr, "open: %s\n", assetpatch_last_error());
        return 3;
    }
    int rc = assetpatch_update(c, NULL, NULL);
    if (rc < 0) fprintf(stderr, "update: %s: %s\n", assetpatch_status_name(rc), assetpatch_last_error());
    int failed = 0;
    for (int i = 3; i < argc; i++) {
        char map[64], group[64], path[4096];
        snprintf(map, sizeof map, "levels/level%s.json", argv[i]);
        snprintf(group, sizeof group, "level%s", argv[i]);
        printf("the player reaches level %s\n", argv[i]);
        rc = level_path(c, map, group, path, sizeof path);
        if (rc != ASSETPATCH_OK) {
            printf("  %s: %s\n", assetpatch_status_name(rc), assetpatch_last_error());
            failed = 1;
            continue;
        }
        FILE *f = fopen(path, "r");
        char line[256] = "";
        if (f && fgets(line, sizeof line, f)) line[strcspn(line, "\n")] = 0;
        if (f) fclose(f);
        printf("  loaded %s: %s\n", path, line);
    }
    assetpatch_client_close(c);
    return failed ? 4 : 0;
}
