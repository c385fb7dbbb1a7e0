#ifndef ASSETPATCH_CZLIB_SHIM_H
#define ASSETPATCH_CZLIB_SHIM_H
#include <zlib.h>

/* inflateInit2 and deflateInit2 are macros (they pass the zlib version and struct size). */
static inline int czlib_inflate_init_raw(z_stream *s) { return inflateInit2(s, -MAX_WBITS); }
/* 15 + 32: a zlib or gzip stream, whichever header it has (HTTP content codings). */
static inline int czlib_inflate_init_auto(z_stream *s) { return inflateInit2(s, 15 + 32); }
static inline int czlib_deflate_init_raw(z_stream *s, int level) {
    return deflateInit2(s, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
}
#endif
