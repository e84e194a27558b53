/* SHA-256 content addresses (OpenSSL EVP), as lowercase hex. */
#ifndef AVO_HASH_H
#define AVO_HASH_H

#include <stddef.h>

#define AVO_SHA256_HEX 65

int avo_hash_sha256_hex(const void *data, size_t len, char out[AVO_SHA256_HEX]);

#endif
