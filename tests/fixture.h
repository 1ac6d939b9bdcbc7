/* Reader of the binary fixtures that scripts under tests/ write with PyTorch (run by
 * hand; the fixtures are committed). Format, all little-endian:
 *
 *     magic    8 bytes  "GCFIXTR\0"
 *     version  u32      1
 *     count    u32      number of entries
 *     entries  count x { name_length u32, name bytes (no NUL), dtype u32 (0 f32, 1 i32,
 *                        2 f64), ndim u32, shape ndim x i64, data numel x dtype size }
 *
 * A fixture that does not parse is a setup error (exit 99), not a test failure. */
#ifndef GC_TESTS_FIXTURE_H
#define GC_TESTS_FIXTURE_H

#include <errno.h>

#include "check.h"

#define GC_FIXTURE_VERSION 1

static inline void gc_fixture_read(FILE *file, void *into, size_t size, const char *path) {
    if (fread(into, 1, size, file) != size) {
        fprintf(stderr, "fixture %s: truncated\n", path);
        exit(GC_TEST_SETUP_ERROR);
    }
}

static inline uint32_t gc_fixture_u32(FILE *file, const char *path) {
    unsigned char bytes[4];
    gc_fixture_read(file, bytes, 4, path);
    return (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
}

/* Every entry as a CPU tensor under its name. */
static inline gc_param_list gc_fixture_load(const char *path) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        fprintf(stderr, "fixture %s: cannot open: %s\n", path, strerror(errno));
        exit(GC_TEST_SETUP_ERROR);
    }
    char magic[8];
    gc_fixture_read(file, magic, 8, path);
    uint32_t version = gc_fixture_u32(file, path);
    if (memcmp(magic, "GCFIXTR", 8) != 0 || version != GC_FIXTURE_VERSION) {
        fprintf(stderr, "fixture %s: not a version %d fixture\n", path, GC_FIXTURE_VERSION);
        exit(GC_TEST_SETUP_ERROR);
    }
    uint32_t count = gc_fixture_u32(file, path);
    gc_param_list entries = {0};
    static const gc_dtype dtypes[3] = {GC_F32, GC_I32, GC_F64};
    for (uint32_t i = 0; i < count; i++) {
        char name[GC_PARAM_NAME_MAX];
        uint32_t length = gc_fixture_u32(file, path);
        REQUIRE(length < sizeof name);
        gc_fixture_read(file, name, length, path);
        name[length] = '\0';
        uint32_t dtype = gc_fixture_u32(file, path), ndim = gc_fixture_u32(file, path);
        REQUIRE(dtype < 3 && ndim <= GC_MAX_DIMS);
        int64_t shape[GC_MAX_DIMS];
        gc_fixture_read(file, shape, sizeof(int64_t) * ndim, path); /* little-endian hosts only */
        gc_tensor *t = gc_empty((int)ndim, shape, dtypes[dtype], gc_cpu());
        REQUIRE(t);
        gc_fixture_read(file, gc_data(t), gc_nbytes(t), path);
        gc_param_list_add(&entries, "", name, t, false);
        gc_tensor_release(t);
    }
    fclose(file);
    return entries;
}

/* The named entry; a missing one is a setup error. */
static inline gc_tensor *gc_fixture_get(const gc_param_list *entries, const char *name) {
    gc_tensor *t = gc_param_list_find(entries, name);
    if (!t) {
        fprintf(stderr, "fixture: no entry '%s'\n", name);
        exit(GC_TEST_SETUP_ERROR);
    }
    return t;
}

#endif
