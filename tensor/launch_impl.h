/* How the CUDA kernels split their work: the launch geometry, and the ranges of elements a
 * thread or a block takes. Plain arithmetic, shared by the CUDA backend (tensor/cuda/) and
 * the CPU test that checks it (tests/test_launch_geometry.c): every element is covered exactly once,
 * no grid exceeds what a GPU accepts, and nothing overflows for tensors of 2^31 elements
 * and more. A GPU is rarely at hand; this is how these bugs are caught without one.
 *
 * Grids are one-dimensional. A grid's x dimension may have 2^31 - 1 blocks (y and z only
 * 65535); the caps below stay far under either, and the kernels loop (grid-stride) over what
 * one pass of the grid does not cover, with 64-bit indices. */
#ifndef GC_TENSOR_LAUNCH_IMPL_H
#define GC_TENSOR_LAUNCH_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host_device.h"

/* --- elementwise kernels: blocks of GC_CUDA_THREADS, one element per thread per pass --- */

#define GC_CUDA_THREADS 256
/* An H100 holds 8 resident blocks of 256 threads on each of its 132 SMs (~1000 in all);
 * eight times that keeps every SM busy, and the grid-stride loops cover the rest. */
#define GC_CUDA_MAX_BLOCKS 8192

/* Blocks for n work items: ceil(n / GC_CUDA_THREADS) capped at GC_CUDA_MAX_BLOCKS, 0 when n
 * is 0 (the launch is then skipped: a grid of 0 blocks is an error). */
static inline GC_HD unsigned gc_cuda_blocks(int64_t n) {
    int64_t blocks = n / GC_CUDA_THREADS + (n % GC_CUDA_THREADS != 0);
    return (unsigned)(blocks < GC_CUDA_MAX_BLOCKS ? blocks : GC_CUDA_MAX_BLOCKS);
}

/* --- row kernels (reductions, softmax, layernorm): one block per row --- */

/* The kernels are compiled for blocks of up to this many threads (__launch_bounds__), so a
 * launch never fails for want of registers. */
#define GC_ROW_MAX_THREADS 1024
/* Enough blocks to fill any GPU many times over; the kernels loop over the rows beyond. */
#define GC_ROW_MAX_BLOCKS 65536

/* Threads per block for rows of `cols` elements: one per element up to 1024, in whole warps
 * (the block reduction shuffles across full warps), at least one warp. */
static inline GC_HD unsigned gc_row_threads(size_t cols) {
    size_t warps = cols / 32 + (cols % 32 != 0);
    if (warps < 1) warps = 1;
    if (warps > GC_ROW_MAX_THREADS / 32) warps = GC_ROW_MAX_THREADS / 32;
    return (unsigned)(32 * warps);
}

/* One block per row, capped at GC_ROW_MAX_BLOCKS. */
static inline GC_HD unsigned gc_row_blocks(size_t rows) {
    return (unsigned)(rows < GC_ROW_MAX_BLOCKS ? rows : GC_ROW_MAX_BLOCKS);
}

/* --- few long rows (sum_all, mean_all): each row split into segments, a block each --- */

/* Partial results (rows x splits) a split reduction may write into its scratch. */
#define GC_REDUCE_MAX_PARTIALS 1024
/* The fewest elements a block of a split folds: 16 for each of 1024 threads. */
#define GC_REDUCE_MIN_SEGMENT 16384

/* Segments each row is split into: as many as keep every segment at least
 * GC_REDUCE_MIN_SEGMENT long and all partials within GC_REDUCE_MAX_PARTIALS; 1 (a block per
 * row, no split) when the rows alone fill the GPU or are short. It depends on the sizes
 * only, never on the GPU, so a sum is the same on every device and every run. */
static inline GC_HD size_t gc_reduce_splits(size_t rows, size_t cols) {
    if (rows == 0 || rows > GC_REDUCE_MAX_PARTIALS / 2) return 1;
    size_t by_length = cols / GC_REDUCE_MIN_SEGMENT, by_scratch = GC_REDUCE_MAX_PARTIALS / rows;
    size_t splits = by_length < by_scratch ? by_length : by_scratch;
    return splits < 2 ? 1 : splits;
}

/* Block b of a split into `splits` segments per row: row b / splits, elements [begin, end)
 * of it. Segments are ceil(cols / splits) long; the last one may be shorter or empty. */
static inline GC_HD void gc_reduce_segment(size_t b, size_t splits, size_t cols, size_t *row, size_t *begin,
                                           size_t *end) {
    size_t length = cols / splits + (cols % splits != 0);
    *row = b / splits;
    *begin = (b % splits) * length;
    if (*begin > cols) *begin = cols;
    *end = cols - *begin > length ? *begin + length : cols;
}

/* --- sum_middle: x [outer, mid, inner] -> [outer, inner], summed over mid --- */

/* A block sums a tile of GC_MIDDLE_TILE neighbouring columns over a segment of mid: a warp's
 * lanes take the tile's columns (each row of it one coalesced load), the block's
 * GC_MIDDLE_WARPS warps its rows in turn. */
#define GC_MIDDLE_TILE 32
#define GC_MIDDLE_WARPS (GC_CUDA_THREADS / GC_MIDDLE_TILE)
/* Blocks that fill an H100 (about 1000 resident ones, above); a split stops there. */
#define GC_MIDDLE_FILL_BLOCKS 1024
/* The fewest rows of mid a block of a split sums: 16 for each warp. */
#define GC_MIDDLE_MIN_SEGMENT 128
/* The most partial sums (outer x splits x inner) a split writes into its scratch: there are
 * at most GC_MIDDLE_FILL_BLOCKS / tiles splits, and a tile holds at most GC_MIDDLE_TILE of
 * the outer x inner columns. */
#define GC_MIDDLE_MAX_PARTIALS (GC_MIDDLE_FILL_BLOCKS * GC_MIDDLE_TILE)

/* Tiles of columns: ceil(inner / GC_MIDDLE_TILE) for each of the outer slices. */
static inline GC_HD size_t gc_middle_tiles(size_t outer, size_t inner) {
    return outer * (inner / GC_MIDDLE_TILE + (inner % GC_MIDDLE_TILE != 0));
}

/* Segments mid is split into: as many as make up to GC_MIDDLE_FILL_BLOCKS blocks with the
 * tiles while keeping every segment at least GC_MIDDLE_MIN_SEGMENT rows long; 1 (a block per
 * tile, no split) when the tiles alone fill the GPU or mid is short. A bias gradient
 * [4096 x 32, 256] -> [256] has 8 tiles: 128 segments of 1024 rows. The count depends on the
 * sizes only, never on the GPU, so a sum is the same on every device and every run. */
static inline GC_HD size_t gc_middle_splits(size_t outer, size_t mid, size_t inner) {
    size_t tiles = gc_middle_tiles(outer, inner);
    if (tiles == 0 || tiles > GC_MIDDLE_FILL_BLOCKS / 2) return 1;
    size_t by_fill = GC_MIDDLE_FILL_BLOCKS / tiles, by_length = mid / GC_MIDDLE_MIN_SEGMENT;
    size_t splits = by_fill < by_length ? by_fill : by_length;
    return splits < 2 ? 1 : splits;
}

/* Blocks of a sum_middle launch: one per tile and segment, capped at GC_ROW_MAX_BLOCKS (the
 * kernel loops over the rest); 0 when there is nothing to write. */
static inline GC_HD unsigned gc_middle_blocks(size_t outer, size_t inner, size_t splits) {
    size_t blocks = gc_middle_tiles(outer, inner) * splits;
    return (unsigned)(blocks < GC_ROW_MAX_BLOCKS ? blocks : GC_ROW_MAX_BLOCKS);
}

/* Block b's work: segment b % splits, rows [begin, end) of mid (gc_reduce_segment's
 * segments), of tile b / splits, which is columns [first_col, first_col + GC_MIDDLE_TILE)
 * (clipped to inner) of outer slice o. */
static inline GC_HD void gc_middle_block(size_t b, size_t splits, size_t mid, size_t inner, size_t *o,
                                         size_t *first_col, size_t *begin, size_t *end) {
    size_t tile, tiles_per_outer = gc_middle_tiles(1, inner);
    gc_reduce_segment(b, splits, mid, &tile, begin, end);
    *o = tile / tiles_per_outer;
    *first_col = tile % tiles_per_outer * GC_MIDDLE_TILE;
}

/* --- broadcasts of two dims: a row or a column repeated beside a full operand --- */

/* A broadcast's output as [outer, inner] (numel elements, under 2^31), each operand read at
 * q stride[0] + r stride[1] for element (q, r): a full operand has strides {inner, 1}, a row
 * [inner] repeated over the leading dims {0, 1} (a bias), a column [outer, 1] repeated along
 * the last dim {1, 0} (layernorm's statistics per row). Element i is (i / inner, i % inner):
 * one 32-bit division, where the walk over every dim takes one 64-bit division per dim. */
typedef struct gc_broadcast_2d {
    uint32_t numel, inner;
    uint32_t a_stride[2], b_stride[2]; /* {outer, inner} */
} gc_broadcast_2d;

/* Merges the dims of a broadcast (ndim dims of `shape`, the operands' strides in elements, 0
 * along a repeated dim) into two where it can: a dim joins the merged dim after it when each
 * operand steps over it by the merged dim's whole extent (or not at all); dims of 1 are
 * skipped. True, with *merged filled, when at most two dims remain and the output has fewer
 * than 2^31 elements, so that no index of the 32-bit arithmetic (nor one grid-stride step
 * beyond the last) overflows. */
static inline GC_HD bool gc_broadcast_merge_2d(int ndim, const int64_t *shape, const int64_t *a_stride,
                                               const int64_t *b_stride, gc_broadcast_2d *merged) {
    /* the merged dims, inner first: their sizes, and a's and b's strides over them */
    int64_t size[2] = {1, 1}, sa[2] = {0, 0}, sb[2] = {0, 0}, numel = 1;
    int dims = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        numel *= shape[d];
        if (shape[d] == 1) continue;
        int outermost = dims - 1;
        if (dims > 0 && a_stride[d] == sa[outermost] * size[outermost] &&
            b_stride[d] == sb[outermost] * size[outermost]) {
            size[outermost] *= shape[d];
            continue;
        }
        if (dims == 2) return false;
        size[dims] = shape[d];
        sa[dims] = a_stride[d];
        sb[dims] = b_stride[d];
        dims++;
    }
    if (numel > INT32_MAX) return false;
    merged->numel = (uint32_t)numel;
    merged->inner = (uint32_t)size[0];
    for (int k = 0; k < 2; k++) { /* {outer, inner} */
        merged->a_stride[k] = (uint32_t)sa[1 - k];
        merged->b_stride[k] = (uint32_t)sb[1 - k];
    }
    return true;
}

/* --- Philox-driven kernels: a thread per Philox block of 4 words, computed once --- */

/* Random fills: element i of a draw uses words from i on; a thread takes 4 consecutive
 * elements, group g = elements [4g, 4g + 4) clipped to n. */
#define GC_RANDOM_PER_THREAD 4

static inline GC_HD size_t gc_random_group_count(size_t n) {
    return n / GC_RANDOM_PER_THREAD + (n % GC_RANDOM_PER_THREAD != 0);
}

static inline GC_HD void gc_random_group(size_t g, size_t n, size_t *begin, size_t *end) {
    *begin = g * GC_RANDOM_PER_THREAD;
    *end = n - *begin < GC_RANDOM_PER_THREAD ? n : *begin + GC_RANDOM_PER_THREAD;
}

/* Dropout: element i uses word offset + i, which lies in Philox block (offset + i) / 4. With
 * lead = offset % 4, element i falls in group (lead + i) / 4; group g holds the elements
 * [4g - lead, 4g + 4 - lead) clipped to [0, n), whose words share one block. */
static inline GC_HD int64_t gc_dropout_group_count(int64_t n, uint64_t offset) {
    return ((int64_t)(offset % 4) + n + 3) / 4;
}

static inline GC_HD void gc_dropout_group(int64_t g, int64_t n, uint64_t offset, int64_t *begin, int64_t *end) {
    int64_t lead = (int64_t)(offset % 4);
    *begin = 4 * g - lead < 0 ? 0 : 4 * g - lead;
    *end = 4 * g + 4 - lead > n ? n : 4 * g + 4 - lead;
}

#endif
