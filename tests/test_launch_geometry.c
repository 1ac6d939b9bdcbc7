/* The arithmetic the CUDA kernels split their work with (tensor/launch_impl.h) and the key in
 * which they report a bad index (tensor/index_key_impl.h), run on the CPU: the very code a
 * GPU runs, checked where no GPU is needed. Every element must be covered exactly once, no
 * grid may exceed what a GPU accepts, and sizes of 2^31 elements and more must not
 * overflow. */
#include <stdint.h>

#include "check.h"
#include "tensor/index_key_impl.h"
#include "tensor/launch_impl.h"

#define COUNT(array) (int)(sizeof(array) / sizeof((array)[0]))

/* Sizes around the boundaries: small, block multiples +- 1, 2^31 +- 1 and beyond. */
static const int64_t sizes[] = {0,      1,          255,         256,         257,          8191,
                                65537,  2097151,    2097152,     2097153,     (1LL << 31) - 1, 1LL << 31,
                                (1LL << 31) + 1, 1LL << 33, (1LL << 40) + 3};

static void test_elementwise_grid(void) {
    for (int s = 0; s < COUNT(sizes); s++) {
        int64_t n = sizes[s];
        unsigned blocks = gc_cuda_blocks(n);
        CHECK_MSG(n == 0 ? blocks == 0 : blocks >= 1 && blocks <= GC_CUDA_MAX_BLOCKS, "n %lld: %u blocks",
                  (long long)n, blocks);
        /* one pass of the grid covers everything when it can; else the grid is full */
        int64_t threads = (int64_t)blocks * GC_CUDA_THREADS;
        CHECK_MSG(threads >= n || blocks == GC_CUDA_MAX_BLOCKS, "n %lld: %u blocks do not cover it", (long long)n,
                  blocks);
        CHECK_MSG(n == 0 || threads - n < GC_CUDA_THREADS || blocks == GC_CUDA_MAX_BLOCKS,
                  "n %lld: a whole block idle", (long long)n);
    }
}

static void test_row_geometry(void) {
    const size_t cols[] = {0, 1, 31, 32, 33, 1000, 1024, 1025, 1u << 20, (size_t)1 << 33};
    for (int c = 0; c < COUNT(cols); c++) {
        unsigned threads = gc_row_threads(cols[c]);
        CHECK_MSG(threads % 32 == 0 && threads >= 32 && threads <= GC_ROW_MAX_THREADS, "cols %zu: %u threads",
                  cols[c], threads);
        CHECK_MSG(threads >= cols[c] || threads == GC_ROW_MAX_THREADS, "cols %zu: %u threads", cols[c], threads);
    }
    const size_t rows[] = {0, 1, 65535, 65536, 65537, (size_t)1 << 32};
    for (int r = 0; r < COUNT(rows); r++) {
        unsigned blocks = gc_row_blocks(rows[r]);
        CHECK_MSG(blocks <= GC_ROW_MAX_BLOCKS && (blocks == rows[r] || blocks == GC_ROW_MAX_BLOCKS),
                  "rows %zu: %u blocks", rows[r], blocks);
    }
}

/* Every element of every row in exactly one segment, segments in order and of the minimum
 * length (but the last), the partials within the scratch. */
static void check_split(size_t rows, size_t cols) {
    size_t splits = gc_reduce_splits(rows, cols);
    CHECK_MSG(splits >= 1 && rows * splits <= (splits == 1 ? rows : GC_REDUCE_MAX_PARTIALS), "rows %zu cols %zu: %zu",
              rows, cols, splits);
    if (splits == 1) return;
    CHECK_MSG(cols / splits >= GC_REDUCE_MIN_SEGMENT, "rows %zu cols %zu: %zu splits too many", rows, cols, splits);
    size_t expected_row = 0, expected_begin = 0;
    for (size_t b = 0; b < rows * splits; b++) {
        size_t row, begin, end;
        gc_reduce_segment(b, splits, cols, &row, &begin, &end);
        if (row != expected_row) {
            CHECK_MSG(expected_begin == cols, "rows %zu cols %zu: row %zu ends at %zu", rows, cols, expected_row,
                      expected_begin);
            expected_row = row;
            expected_begin = 0;
        }
        CHECK_MSG(row == expected_row && begin == expected_begin && begin <= end && end <= cols,
                  "rows %zu cols %zu: block %zu is row %zu [%zu, %zu)", rows, cols, b, row, begin, end);
        expected_begin = end;
    }
    CHECK_MSG(expected_row == rows - 1 && expected_begin == cols, "rows %zu cols %zu: the last row ends at %zu", rows,
              cols, expected_begin);
}

static void test_split_reduction(void) {
    /* sum_all of any size is one row; few long rows split too; many rows never do. */
    for (int s = 0; s < COUNT(sizes); s++) check_split(1, (size_t)sizes[s]);
    const size_t rows[] = {2, 3, 7, 100, 511, 512, 513, 100000};
    const size_t cols[] = {16383, 16384, 32767, 32768, 1000003, (size_t)1 << 31, ((size_t)1 << 32) + 5};
    for (int r = 0; r < COUNT(rows); r++)
        for (int c = 0; c < COUNT(cols); c++) check_split(rows[r], cols[c]);
    CHECK(gc_reduce_splits(1, 16 * 1024 * 1024) == GC_REDUCE_MAX_PARTIALS); /* a 4096 x 4096 sum_all */
    CHECK(gc_reduce_splits(1, 32767) == 1);
    CHECK(gc_reduce_splits(1, 32768) == 2);
    CHECK(gc_reduce_splits(4096, 1 << 24) == 1); /* enough rows for one block each */
}

/* sum_middle's blocks: each tile of columns of each outer slice in turn, its segments in
 * order covering [0, mid) exactly once, a tile's first column a multiple of the tile width
 * inside [0, inner); the split within its limits. Every block is walked when there are few. */
static void check_middle(size_t outer, size_t mid, size_t inner) {
    size_t splits = gc_middle_splits(outer, mid, inner), tiles = gc_middle_tiles(outer, inner);
    unsigned blocks = gc_middle_blocks(outer, inner, splits);
    CHECK_MSG(splits >= 1 && blocks <= GC_ROW_MAX_BLOCKS && (blocks == 0) == (outer * inner == 0),
              "outer %zu mid %zu inner %zu: %zu splits, %u blocks", outer, mid, inner, splits, blocks);
    CHECK_MSG(splits == 1 || (mid / splits >= GC_MIDDLE_MIN_SEGMENT && tiles * splits <= GC_MIDDLE_FILL_BLOCKS &&
                              outer * inner * splits <= GC_MIDDLE_MAX_PARTIALS),
              "outer %zu mid %zu inner %zu: %zu splits", outer, mid, inner, splits);
    if (tiles * splits > 100000) return;
    size_t tiles_per_outer = gc_middle_tiles(1, inner), expected_begin = 0;
    for (size_t b = 0; b < tiles * splits; b++) {
        size_t o, first_col, begin, end;
        gc_middle_block(b, splits, mid, inner, &o, &first_col, &begin, &end);
        bool tile_ok = o < outer && first_col < inner && first_col % GC_MIDDLE_TILE == 0 &&
                       o * tiles_per_outer + first_col / GC_MIDDLE_TILE == b / splits;
        if (b % splits == 0) expected_begin = 0;
        CHECK_MSG(tile_ok && begin == expected_begin && begin <= end && end <= mid,
                  "outer %zu mid %zu inner %zu: block %zu is slice %zu column %zu rows [%zu, %zu)", outer, mid, inner,
                  b, o, first_col, begin, end);
        expected_begin = end;
        if (b % splits == splits - 1)
            CHECK_MSG(end == mid, "outer %zu mid %zu inner %zu: tile %zu ends at row %zu", outer, mid, inner,
                      b / splits, end);
    }
}

static void test_middle_split(void) {
    const size_t outers[] = {1, 2, 3, 16, 100, 4096};
    const size_t mids[] = {0, 1, 127, 128, 255, 256, 4097, 131072, (size_t)1 << 33};
    const size_t inners[] = {0, 1, 31, 32, 33, 256, 1000, 1024, 16384, 100000};
    for (int o = 0; o < COUNT(outers); o++)
        for (int m = 0; m < COUNT(mids); m++)
            for (int i = 0; i < COUNT(inners); i++) check_middle(outers[o], mids[m], inners[i]);
    CHECK(gc_middle_splits(1, 4096 * 32, 256) == 128); /* a bias gradient: 8 tiles, 1024 blocks */
    CHECK(gc_middle_splits(1, 512 * 32, 1024) == 32);  /* 32 tiles: 32 segments of 512 rows */
    CHECK(gc_middle_splits(1, (size_t)1 << 33, 256) == 128);
    CHECK(gc_middle_splits(1, 255, 256) == 1); /* too short for two segments of 128 */
    CHECK(gc_middle_splits(1, 256, 256) == 2);
    CHECK(gc_middle_splits(4, 4096, 64) == 32);     /* [4, 4096, 64] -> [4, 1, 64]: 8 tiles, by length */
    CHECK(gc_middle_splits(512, 32, 1024) == 1);    /* [512, 32, 1024] -> [512, 1, 1024]: tiles enough */
    CHECK(gc_middle_splits(1, 1 << 20, 16416) == 1); /* 513 tiles fill the GPU */
    CHECK(gc_middle_splits(1, 0, 256) == 1 && gc_middle_splits(1, 1, 256) == 1);
}

/* A broadcast of 4 dims merged into two: when it merges, every output element reads the same
 * elements of a and b as the walk over the 4 dims (checked one by one). */
typedef struct bcast_case {
    int64_t shape[4], a_stride[4], b_stride[4];
    bool merges;
} bcast_case;

static int64_t walk_offset(const int64_t *shape, const int64_t *stride, int64_t i) {
    int64_t offset = 0;
    for (int d = 3; d >= 0; d--) {
        offset += i % shape[d] * stride[d];
        i /= shape[d];
    }
    return offset;
}

static void check_merge(const bcast_case *c, const char *what) {
    gc_broadcast_2d merged;
    bool merges = gc_broadcast_merge_2d(4, c->shape, c->a_stride, c->b_stride, &merged);
    CHECK_MSG(merges == c->merges, "%s: merges %d", what, merges);
    if (!merges || merged.numel > 100000) return;
    int wrong = 0;
    for (uint32_t i = 0; i < merged.numel; i++) {
        uint32_t q = i / merged.inner, r = i % merged.inner;
        wrong += q * merged.a_stride[0] + r * merged.a_stride[1] != walk_offset(c->shape, c->a_stride, i) ||
                 q * merged.b_stride[0] + r * merged.b_stride[1] != walk_offset(c->shape, c->b_stride, i);
    }
    CHECK_MSG(wrong == 0, "%s: %d of %u elements read elsewhere", what, wrong, merged.numel);
}

static void test_broadcast_merge(void) {
    const int64_t big = (int64_t)1 << 16;
    const struct {
        const char *what;
        bcast_case c;
    } cases[] = {
        {"[5, 7] + [7]", {{1, 1, 5, 7}, {0, 0, 7, 1}, {0, 0, 0, 1}, true}},
        {"[7] + [5, 7]", {{1, 1, 5, 7}, {0, 0, 0, 1}, {0, 0, 7, 1}, true}},
        {"[5, 7] + [5, 1]", {{1, 1, 5, 7}, {0, 0, 7, 1}, {0, 0, 1, 0}, true}},
        {"[2, 3, 4] + [2, 3, 1]", {{1, 2, 3, 4}, {0, 12, 4, 1}, {0, 3, 1, 0}, true}},
        {"[2, 3, 4, 5] + [5]", {{2, 3, 4, 5}, {60, 20, 5, 1}, {0, 0, 0, 1}, true}},
        {"[5, 1] + [7]", {{1, 1, 5, 7}, {0, 0, 1, 0}, {0, 0, 0, 1}, true}}, /* neither full */
        {"[] + [4, 33]", {{1, 1, 4, 33}, {0, 0, 0, 0}, {0, 0, 33, 1}, true}},
        {"[] + []", {{1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}, true}},
        {"[3, 5, 33] + [3, 1, 33]", {{1, 3, 5, 33}, {0, 165, 33, 1}, {0, 33, 0, 1}, false}},
        {"[2, 1, 1, 7] + [2, 3, 7, 7]", {{2, 3, 7, 7}, {7, 0, 0, 1}, {147, 49, 7, 1}, false}},
        {"[2^16, 2^15] + [2^15]", {{1, 1, big, big / 2}, {0, 0, big / 2, 1}, {0, 0, 0, 1}, false}}, /* 2^31 */
        {"[2^31 - 1] + []", {{1, 1, 1, INT32_MAX}, {0, 0, 0, 1}, {0, 0, 0, 0}, true}},
        {"[0, 7] + [7]", {{1, 1, 0, 7}, {0, 0, 7, 1}, {0, 0, 0, 1}, true}},
    };
    for (int c = 0; c < COUNT(cases); c++) check_merge(&cases[c].c, cases[c].what);
}

/* Groups cover [0, n) exactly once, in order. */
static void test_philox_groups(void) {
    const int64_t lengths[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 1001};
    for (int l = 0; l < COUNT(lengths); l++) {
        int64_t n = lengths[l];
        size_t next = 0;
        for (size_t g = 0; g < gc_random_group_count((size_t)n); g++) {
            size_t begin, end;
            gc_random_group(g, (size_t)n, &begin, &end);
            CHECK_MSG(begin == next && end > begin && end - begin <= GC_RANDOM_PER_THREAD, "random n %lld group %zu",
                      (long long)n, g);
            next = end;
        }
        CHECK_MSG(next == (size_t)n, "random n %lld: covered up to %zu", (long long)n, next);
        for (uint64_t offset = 0; offset < 9; offset++) {
            int64_t covered = 0;
            for (int64_t g = 0; g < gc_dropout_group_count(n, offset); g++) {
                int64_t begin, end;
                gc_dropout_group(g, n, offset, &begin, &end);
                /* the group's words share one Philox block: (offset + i) / 4 is g + offset / 4 */
                CHECK_MSG(begin == covered && end >= begin, "dropout n %lld offset %llu group %lld", (long long)n,
                          (unsigned long long)offset, (long long)g);
                for (int64_t i = begin; i < end; i++)
                    CHECK_MSG((offset + (uint64_t)i) / 4 == (uint64_t)g + offset / 4, "dropout n %lld element %lld",
                              (long long)n, (long long)i);
                covered = end;
            }
            CHECK_MSG(covered == n, "dropout n %lld offset %llu: covered up to %lld", (long long)n,
                      (unsigned long long)offset, (long long)covered);
        }
    }
    /* the last group of a draw past 2^32 elements, without overflow */
    int64_t begin, end, huge = (1LL << 33) + 3;
    gc_dropout_group(gc_dropout_group_count(huge, 2) - 1, huge, 2, &begin, &end);
    CHECK(end == huge && begin == huge - 1);
}

/* Keys order like positions, carry the index, and never equal the clean value. */
static void test_index_keys(void) {
    const int32_t values[] = {-1, 0, 7, INT32_MIN, INT32_MAX};
    const int64_t positions[] = {0, 1, 5, (1LL << 31), 0xFFFFFFFDLL, 0xFFFFFFFELL, 1LL << 40};
    for (int p = 0; p < COUNT(positions); p++)
        for (int v = 0; v < COUNT(values); v++) {
            uint64_t key = gc_index_key(positions[p], values[v]);
            bool at_least;
            int64_t position = gc_index_key_position(key, &at_least);
            bool saturated = positions[p] >= (int64_t)GC_INDEX_KEY_FAR;
            CHECK(key != GC_INDEX_KEY_NONE);
            CHECK(gc_index_key_value(key) == values[v]);
            CHECK(at_least == saturated);
            CHECK(position == (saturated ? (int64_t)GC_INDEX_KEY_FAR : positions[p]));
            if (p > 0 && !saturated) /* an earlier position wins whatever the values */
                for (int w = 0; w < COUNT(values); w++) CHECK(gc_index_key(positions[p - 1], values[w]) < key);
        }
}

int main(void) {
    test_elementwise_grid();
    test_row_geometry();
    test_split_reduction();
    test_middle_split();
    test_broadcast_merge();
    test_philox_groups();
    test_index_keys();
    return gc_test_result();
}
