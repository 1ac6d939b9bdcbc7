/* What the safetensors reader and writer share: the opened-file structure, the format's
 * names for our dtypes, and the header check both openers (file and memory) go through. */
#ifndef GC_NN_SAFETENSORS_INTERNAL_H
#define GC_NN_SAFETENSORS_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "gradcache/checkpoint.h"
#include "base/json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; the reader and writer copy it as is"
#endif

/* One tensor's description from the header, checked against the data buffer. */
typedef struct gc_safetensors_entry {
    const char *name;       /* points into the parsed header */
    const char *dtype_name; /* the format's spelling ("F32", "I64", ...), into the header too */
    bool foreign;           /* a dtype gradcache has no tensors of (I64, U8, BOOL, ...): listed, not gettable */
    gc_dtype dtype;         /* when !foreign */
    unsigned element_size;  /* bytes */
    int ndim;
    int64_t shape[GC_MAX_DIMS];
    uint64_t begin, end; /* [begin, end) in the data buffer */
} gc_safetensors_entry;

struct gc_safetensors {
    char *name;                     /* the path (or the caller's name), for messages */
    gc_json *header;                /* owns the strings entries and metadata point to */
    gc_safetensors_entry *entries;  /* [count], sorted by name */
    int count;
    const gc_json **metadata;       /* [metadata_count] string values, sorted by key */
    int metadata_count;
    const char *checksum;           /* GC_SAFETENSORS_CHECKSUM_KEY's value (not among metadata), or NULL */
    unsigned char *data;            /* [data_size]; NULL until read (never, for a header-only open) */
    uint64_t data_size;
};

/* Parses and checks `length` bytes of header for a data buffer of data_size bytes. On
 * success *file is a new file whose data buffer is not allocated yet; otherwise
 * GC_ERR_FORMAT (or an allocation error) is recorded and nothing is left allocated. */
gc_status gc_safetensors_parse_header(const char *name, const char *header, size_t length, uint64_t data_size,
                                      gc_safetensors **file);

/* gc_safetensors_open without reading the tensor data: the header parsed and checked against
 * the file's size, so that what a file holds can be checked before anything is allocated
 * for it. Its entries can be listed and looked up, not read (gc_safetensors_get stops the
 * program), and its checksum is not verified: open the file whole to load it. */
gc_status gc_safetensors_open_header(const char *path, gc_safetensors **file);

/* Checks the data buffer, once filled, against the file's checksum if it has one:
 * GC_ERR_FORMAT naming the file when it does not match (or is not 16 hex digits). */
gc_status gc_safetensors_verify_checksum(const gc_safetensors *file);


/* The entry named `name`, or NULL. */
const gc_safetensors_entry *gc_safetensors_find(const gc_safetensors *file, const char *name);

/* Records GC_ERR_FORMAT as "safetensors: <name>: <problem>" and returns it. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
gc_status gc_safetensors_format_error(const char *name, const char *fmt, ...);

/* The format's spelling of our dtypes. */
static inline const char *gc_safetensors_dtype_name(gc_dtype dtype) {
    switch (dtype) {
    case GC_F32: return "F32";
    case GC_F16: return "F16";
    case GC_BF16: return "BF16";
    case GC_I32: return "I32";
    case GC_F64: return "F64";
    default: return "?";
    }
}

/* The element size of a dtype of the format that gradcache has no tensors of, or 0 for a
 * name the format does not define. */
static inline unsigned gc_safetensors_foreign_dtype_size(const char *name) {
    static const struct {
        const char *name;
        unsigned size;
    } foreign[] = {{"I64", 8}, {"U64", 8}, {"U32", 4}, {"I16", 2}, {"U16", 2}, {"I8", 1},
                   {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        if (strcmp(name, foreign[i].name) == 0) return foreign[i].size;
    return 0;
}

static inline bool gc_safetensors_dtype_parse(const char *name, gc_dtype *dtype) {
    for (int d = 0; d < GC_DTYPE_COUNT; d++)
        if (strcmp(name, gc_safetensors_dtype_name((gc_dtype)d)) == 0) {
            *dtype = (gc_dtype)d;
            return true;
        }
    return false;
}

#endif
