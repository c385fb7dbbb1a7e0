#ifndef ASSETPATCH_CZLIB_SHIM_H
#define ASSETPATCH_CZLIB_SHIM_H
#include <zlib.h>

/* inflateInit2 and deflateInit2 are macros (they pass the zlib version and struct size). */
static inline int assetpatch_inflate_init_raw(z_stream *s) { return inflateInit2(s, -MAX_WBITS); }
static inline int assetpatch_deflate_init_raw(z_stream *s, int level) {
    return deflateInit2(s, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
}
#endif
