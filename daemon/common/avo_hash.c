/* SHA-256 content addresses as lowercase hex (avo_hash.h). */
#include "avo_hash.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>

int avo_hash_sha256_hex(const void *data, size_t len, char out[AVO_SHA256_HEX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL))
        return -EIO;
    for (unsigned i = 0; i < mdlen; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}
