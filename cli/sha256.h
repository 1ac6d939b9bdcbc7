/* SHA-256 (FIPS 180-4) of a file, for checking downloads against known checksums. */
#ifndef GC_CLI_SHA256_H
#define GC_CLI_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "gradcache/error.h"

typedef struct gc_sha256 {
    uint32_t state[8];
    uint64_t length;          /* bytes hashed so far */
    unsigned char block[64];  /* the partial block */
} gc_sha256;

void gc_sha256_init(gc_sha256 *hash);
void gc_sha256_update(gc_sha256 *hash, const void *data, size_t size);
/* The digest as 64 lowercase hex digits and a NUL. */
void gc_sha256_hex(gc_sha256 *hash, char hex[65]);
/* The digest of the file at `path`; GC_ERR_IO naming it when it cannot be read. */
gc_status gc_sha256_file(const char *path, char hex[65]);

#endif
