/* The per-element arithmetic of fused attention (gc_attention_fused, gc_attention_args in
 * backend.h), shared by the CPU kernels (cpu/attention_cpu.c) and the CUDA ones
 * (cuda/attention_cuda.cu), so that both backends hide the same keys, drop the same
 * probabilities and run one formula; only the order in which a row's terms are summed
 * differs.
 *
 * A row's softmax is computed online, a tile of keys at a time (FlashAttention): the row
 * keeps the largest logit seen so far and the sum of exp(logit - max) over the keys seen
 * so far; a tile with a larger logit rescales that sum, and the row's accumulated context,
 * by exp(old max - new max). The forward keeps each row's log-sum-exp, max + log(sum), from
 * which the backward recomputes every probability as exp(logit - lse).
 *
 * C has no overloading: each function exists for T = float and T = double, named with a
 * _float or _double suffix; the CUDA templates reach them through overloads of their own. */
#ifndef GC_TENSOR_ATTENTION_IMPL_H
#define GC_TENSOR_ATTENTION_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "host_device.h"
#include "philox_impl.h"

/* What a hidden key adds to its logit: the value attention's padding and causal biases hold
 * (nn/layers/attention_inputs.c), so that a fused row and an unfused one hide alike. */
#define GC_ATTENTION_HIDDEN (-10000.0)

/* True when the causal mask or the sliding window hides key `key` from query `query`:
 * causal hides the keys after the query; a window > 0 the keys window or more before it
 * (transformers' sliding_window: q - window < k <= q with causal), and without causal also
 * those window or more after it. */
static inline GC_HD bool gc_attention_hidden(int64_t query, int64_t key, bool causal, int64_t window) {
    if (causal && key > query) return true;
    return window > 0 && (query - key >= window || (!causal && key - query >= window));
}

/* The dropout word of probability `key` of row `row` (= (b H + h) T + i of the [B, H, T, T]
 * probabilities): the one gc_dropout reads for that element, offset + row T + key (modulo
 * 2^64). */
static inline GC_HD uint64_t gc_attention_word(uint64_t offset, int64_t row, int64_t length, int64_t key) {
    return offset + (uint64_t)row * (uint64_t)length + (uint64_t)key;
}

/* Whether a probability whose word is `word` survives dropout: its top 24 bits reach the
 * threshold (0: no dropout, everything kept), as in gc_dropout. */
static inline GC_HD bool gc_attention_kept(uint32_t word, uint32_t threshold) { return (word >> 8) >= threshold; }

/* The same from the stream itself: `reader` computes each Philox block once when a row's
 * keys are read in order. */
static inline GC_HD bool gc_attention_keep(gc_philox_reader *reader, uint64_t offset, int64_t row, int64_t length,
                                           int64_t key, uint32_t threshold) {
    return threshold == 0 || gc_attention_kept(gc_philox_read(reader, gc_attention_word(offset, row, length, key)),
                                               threshold);
}

/* EXP and LOG are T's (expf and logf for float): CUDA's device library has both. */
#define GC_DEFINE_ATTENTION_ELEMENT(T, EXP, LOG)                                                            \
    /* The bias of one (query, key): plus GC_ATTENTION_HIDDEN when the causal mask or the window       \
     * hides the key (added to the bias first, as the unfused path adds the causal bias to the         \
     * padding bias). */                                                                               \
    static inline GC_HD T gc_attention_bias_##T(T bias, bool hidden) {                                   \
        return hidden ? bias + (T)GC_ATTENTION_HIDDEN : bias;                                            \
    }                                                                                                   \
    /* The logit of one (query, key): the scaled dot product plus its bias (above). */                 \
    static inline GC_HD T gc_attention_logit_##T(T dot, T scale, T bias) { return dot * scale + bias; } \
    /* Moves a row's running max to cover a tile whose largest logit is tile_max; returns the         \
     * factor that rescales the row's running sum and context (0 before the first tile). */          \
    static inline GC_HD T gc_attention_rescale_##T(T *max, T tile_max) {                                \
        T merged = *max > tile_max ? *max : tile_max;                                                    \
        T factor = *max == (T)-INFINITY ? (T)0 : EXP(*max - merged);                                     \
        *max = merged;                                                                                   \
        return factor;                                                                                   \
    }                                                                                                   \
    /* A row's log-sum-exp from its running pair. */                                                   \
    static inline GC_HD T gc_attention_lse_##T(T max, T sum) { return max + LOG(sum); }                  \
    /* d loss / d logit of one probability p whose (dropped) gradient is dprob, in a row whose        \
     * rowsum(dO o O) is row_dot (FlashAttention-2's D: sum_j p_j dprob_j). */                        \
    static inline GC_HD T gc_attention_logit_grad_##T(T prob, T dprob, T row_dot) {                      \
        return prob * (dprob - row_dot);                                                                 \
    }

GC_DEFINE_ATTENTION_ELEMENT(float, expf, logf)
GC_DEFINE_ATTENTION_ELEMENT(double, exp, log)

#undef GC_DEFINE_ATTENTION_ELEMENT

#endif
