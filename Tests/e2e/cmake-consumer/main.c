#include <assetpatch.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    if (strcmp(assetpatch_version(), ASSETPATCH_VERSION_STRING) != 0) return 1;
    printf("linked libassetpatch %s\n", assetpatch_version());
    return strcmp(assetpatch_status_name(ASSETPATCH_ERR_BUSY), "ASSETPATCH_ERR_BUSY") == 0 ? 0 : 1;
}
