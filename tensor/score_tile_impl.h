/* The per-element arithmetic of the tiled contrastive loss's tile kernels (tensor/backend.h,
 * gc_score_tile_args), shared by the CPU kernels (cpu/score_tile_cpu.c) and the CUDA ones
 * (cuda/score_tile_cuda.cu), so that both backends run one formula; only the order in which
 * a tile's terms are summed differs.
 *
 * The log-sum-exp of a row of scores is kept as a running pair (max, sum): the largest score
 * seen so far and the sum of exp(score - max) over the scores seen so far, so no exp ever
 * overflows whatever the scores (FlashAttention's online softmax). Two pairs merge by
 * rescaling the one with the smaller max. A nan anywhere makes the pair nan, so a bad score
 * cannot vanish from the loss.
 *
 * C has no overloading: each function exists for T = float and T = double, named with a
 * _float or _double suffix; the CUDA templates reach them through overloads of their own. */
#ifndef GC_TENSOR_SCORE_TILE_IMPL_H
#define GC_TENSOR_SCORE_TILE_IMPL_H

#include <math.h>
#include <stdbool.h>

#include "host_device.h"

/* EXP is the exp of T (expf for float, exp for double): CUDA's device library has both. */
#define GC_DEFINE_SCORE_TILE_ELEMENT(T, EXP)                                                               \
    /* The score of one tile element: its dot product times the row's and the column's scale. */       \
    static inline GC_HD T gc_tile_score_##T(T dot, T row_scale, T col_scale) {                           \
        return dot * row_scale * col_scale;                                                              \
    }                                                                                                    \
    /* The larger of a and b, or the nan if either is one. */                                           \
    static inline GC_HD T gc_tile_nan_max_##T(T a, T b) { return a > b || a != a ? a : b; }            \
    /* Folds the pair (other_max, other_sum) into (*max, *sum). Two empty pairs (max -inf)             \
     * stay empty rather than making -inf - -inf = nan. */                                              \
    static inline GC_HD void gc_lse_merge_##T(T *max, T *sum, T other_max, T other_sum) {                \
        T merged = gc_tile_nan_max_##T(*max, other_max);                                                 \
        if (merged == -INFINITY) return;                                                                 \
        *sum = *sum * EXP(*max - merged) + other_sum * EXP(other_max - merged);                          \
        *max = merged;                                                                                   \
    }                                                                                                    \
    /* Folds one score into (*max, *sum) with one exp: a -inf score adds nothing. */                   \
    static inline GC_HD void gc_lse_add_##T(T *max, T *sum, T score) {                                   \
        if (score > *max || score != score) {                                                            \
            *sum = *sum * EXP(*max - score) + (T)1;                                                      \
            *max = score;                                                                                \
        } else if (score != -INFINITY) {                                                                 \
            *sum += EXP(score - *max);                                                                   \
        }                                                                                                \
    }                                                                                                    \
    /* d loss / d dot for one element of score s whose row's log-sum-exp is row_lse: the row's        \
     * softmax times row_weight, plus (symmetric loss) the column's softmax times col_weight,          \
     * minus target_weight at the row's positive; then times the scales that made s of the dot. */   \
    static inline GC_HD T gc_tile_dot_grad_##T(T s, T row_lse, T row_weight, bool symmetric, T col_lse,  \
                                               T col_weight, bool is_target, T target_weight,            \
                                               T row_scale, T col_scale) {                               \
        T grad = row_weight * EXP(s - row_lse);                                                          \
        if (symmetric) grad += col_weight * EXP(s - col_lse);                                            \
        if (is_target) grad -= target_weight;                                                            \
        return grad * row_scale * col_scale;                                                             \
    }

GC_DEFINE_SCORE_TILE_ELEMENT(float, expf)
GC_DEFINE_SCORE_TILE_ELEMENT(double, exp)

#undef GC_DEFINE_SCORE_TILE_ELEMENT

#endif
