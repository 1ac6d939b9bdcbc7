/* gzip files (RFC 1952) decompressed in memory: the DEFLATE decoder (RFC 1951) written out
 * in full, so that reading a compressed manual page needs no library. Private to the
 * library (the manual-page dataset, train/manpages.c, reads through it).
 *
 * The input is outside input: every length, distance and code is checked against what has
 * been read and what the format allows, the output never grows past `limit` bytes, and each
 * member's CRC-32 and length must match its trailer. */
#ifndef GC_NN_GUNZIP_H
#define GC_NN_GUNZIP_H

#include <stddef.h>
#include <stdint.h>

#include "gradcache/error.h"

/* The bytes of all the members of the gzip file in[0, size), concatenated, into *out (malloc'd,
 * NUL-terminated, *out_size bytes before the NUL). GC_ERR_FORMAT with one line naming `name`
 * and what is wrong (not gzip, a bad block, a wrong CRC, more than `limit` bytes). */
gc_status gc_gunzip(const uint8_t *in, size_t size, size_t limit, const char *name, char **out, size_t *out_size);

/* The CRC-32 of ISO 3309 / ITU-T V.42 that gzip's trailer holds, continued from `crc` (0 to start). */
uint32_t gc_crc32(uint32_t crc, const uint8_t *data, size_t size);

#endif
