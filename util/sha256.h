/* sha256.h - SHA-256 (FIPS 180-4): run keys, dataset checksums.  One-shot and streaming. */
#ifndef EB_SHA256_H
#define EB_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint64_t nbytes;        /* message length so far */
    uint8_t block[64];      /* pending partial block */
    size_t nblock;
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t n);
void sha256_final(struct sha256 *c, uint8_t digest[32]);

/* Digest of one buffer as 64 lowercase hex digits plus NUL. */
void sha256_hex(const void *data, size_t n, char hex[65]);

#endif
