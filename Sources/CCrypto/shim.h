#ifndef ASSETPATCH_CCRYPTO_SHIM_H
#define ASSETPATCH_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#endif
