/* The tiled contrastive loss's tile kernels on the CPU (see gc_score_tile_args in
 * ../backend.h; the per-element arithmetic is ../score_tile_impl.h's, shared with CUDA).
 *
 * A tile's log-sum-exp is found in two passes over it, as softmax does: the max first, then
 * the sum of exp(s - max), so each score costs one exp; only the merge into the running pair
 * (one per row or column per tile) rescales. The sums are accumulated in double, the exps and
 * everything stored in the tile's dtype (as on CUDA). Columns are done a block of
 * GC_CPU_CHUNK at a time, walking the tile row by row so that memory is read in order. */
#include <tgmath.h>

#include "../score_tile_impl.h"
#include "kernels_cpu.h"
#include "rows_cpu.h"

/* tgmath.h makes exp the float function for a float argument and the double one for a
 * double, so one body gives both precisions. */
#define DEFINE_SCORE_TILE_CPU(T)                                                                         \
    /* Rows: s = dot * scales in place, then each row's (max, sum) merged into the running pair. */    \
    static void rows_lse_##T(const gc_score_tile_args *a) {                                              \
        T *scores = a->scores, *row_max = a->row_max, *row_sum = a->row_sum;                             \
        const T *row_scale = a->row_scale, *col_scale = a->col_scale, *bias = a->bias;                   \
        for (int64_t i = 0; i < a->rows; i++) {                                                          \
            T *s = scores + i * a->cols, max = -INFINITY;                                                \
            for (int64_t j = 0; j < a->cols; j++) {                                                      \
                s[j] = gc_tile_score_##T(s[j], row_scale[i], col_scale[j]);                              \
                if (bias) s[j] += bias[i * a->cols + j];                                                 \
                max = gc_tile_nan_max_##T(max, s[j]);                                                    \
            }                                                                                            \
            double sum = 0;                                                                              \
            for (int64_t j = 0; j < a->cols && max != -INFINITY; j++) sum += exp(s[j] - max);            \
            gc_lse_merge_##T(&row_max[i], &row_sum[i], max, (T)sum);                                     \
            int64_t target = a->targets[i] - a->col_start;                                               \
            if (target >= 0 && target < a->cols) ((T *)a->target_score)[i] = s[target];                 \
        }                                                                                                \
    }                                                                                                    \
                                                                                                         \
    /* Columns (after rows_lse: scores hold s), GC_CPU_CHUNK of them at a time. */                     \
    static void columns_lse_##T(const gc_score_tile_args *a) {                                           \
        const T *scores = a->scores;                                                                     \
        T *col_max = a->col_max, *col_sum = a->col_sum;                                                  \
        for (int64_t first = 0; first < a->cols; first += GC_CPU_CHUNK) {                                \
            int64_t len = (int64_t)gc_chunk_len((size_t)a->cols, (size_t)first);                         \
            T max[GC_CPU_CHUNK];                                                                         \
            double sum[GC_CPU_CHUNK] = {0};                                                              \
            for (int64_t j = 0; j < len; j++) max[j] = -INFINITY;                                        \
            for (int64_t i = 0; i < a->rows; i++)                                                        \
                for (int64_t j = 0; j < len; j++)                                                        \
                    max[j] = gc_tile_nan_max_##T(max[j], scores[i * a->cols + first + j]);               \
            for (int64_t i = 0; i < a->rows; i++)                                                        \
                for (int64_t j = 0; j < len; j++)                                                        \
                    if (max[j] != -INFINITY) sum[j] += exp(scores[i * a->cols + first + j] - max[j]);    \
            for (int64_t j = 0; j < len; j++)                                                            \
                gc_lse_merge_##T(&col_max[first + j], &col_sum[first + j], max[j], (T)sum[j]);           \
        }                                                                                                \
    }                                                                                                    \
                                                                                                         \
    static void grad_##T(const gc_score_tile_args *a) {                                                  \
        T *scores = a->scores;                                                                           \
        const T *row_scale = a->row_scale, *col_scale = a->col_scale, *row_lse = a->row_lse;             \
        const T *col_lse = a->col_lse, *col_weight = a->col_weight, *bias = a->bias;                     \
        bool symmetric = col_lse != NULL;                                                                \
        for (int64_t i = 0; i < a->rows; i++) {                                                          \
            int64_t target = a->targets[i] - a->col_start;                                               \
            for (int64_t j = 0; j < a->cols; j++) {                                                      \
                T *dot = &scores[i * a->cols + j];                                                       \
                T s = gc_tile_score_##T(*dot, row_scale[i], col_scale[j]);                               \
                if (bias) s += bias[i * a->cols + j];                                                    \
                *dot = gc_tile_dot_grad_##T(s, row_lse[i], (T)a->row_weight, symmetric,                  \
                                            symmetric ? col_lse[j] : (T)0, symmetric ? col_weight[j] : (T)0, \
                                            j == target, (T)a->target_weight, row_scale[i], col_scale[j]); \
            }                                                                                            \
        }                                                                                                \
    }

DEFINE_SCORE_TILE_CPU(float)
DEFINE_SCORE_TILE_CPU(double)

void gc_cpu_score_tile_lse(const gc_score_tile_args *args) {
    if (args->dtype == GC_F64) {
        rows_lse_double(args);
        if (args->col_max) columns_lse_double(args);
    } else {
        rows_lse_float(args);
        if (args->col_max) columns_lse_float(args);
    }
}

void gc_cpu_score_tile_grad(const gc_score_tile_args *args) {
    if (args->dtype == GC_F64) grad_double(args);
    else grad_float(args);
}
