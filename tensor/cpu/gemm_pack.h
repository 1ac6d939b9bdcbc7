/* The packing routines of a gemm variant (see gemm_kernel.h), written once for any element
 * type and panel width: GEMM_PACK_DEFINE(T, name, LANES, TRANSPOSED) defines `static void
 * name(...)` for panels of LANES lanes (a constant, so that a panel row is a fixed-size
 * copy). Each variant's file instantiates it for its mr and nr, compiled for its instruction
 * set. TRANSPOSED(out, panel, lane_stride, lanes, full, depth, &steps) copies part of a panel
 * of `full` real lanes (of `lanes`) that each hold their depth contiguously (a transposed
 * operand): the lanes [0, returned) of the steps [0, steps), by the variant's vector
 * transpose, or none (gemm_pack_no_transpose). */
#ifndef GC_TENSOR_GEMM_PACK_H
#define GC_TENSOR_GEMM_PACK_H

#include <stdint.h>
#include <string.h>

/* The TRANSPOSED of a variant without a vector transpose: every element is gathered. */
static inline int64_t gemm_pack_no_transpose(void *out, const void *panel, int64_t lane_stride, int64_t lanes,
                                             int64_t full, int64_t depth, int64_t *steps) {
    (void)out, (void)panel, (void)lane_stride, (void)lanes, (void)full, (void)depth;
    *steps = 0;
    return 0;
}

/* Lanes that are contiguous in memory (lane_stride 1) are copied a panel row at a time,
 * depth by depth across all the full panels, so that the source is read front to back (a
 * panel at a time would walk down the whole depth once per panel, a cache miss per row); a
 * transposed operand's panels (depth_stride 1) go through TRANSPOSED first; what is left,
 * and the last panel's missing lanes (zeros), are gathered element by element. */
#define GEMM_PACK_DEFINE(T, NAME, LANES, TRANSPOSED)                                                       \
    static void NAME(void *dst, const void *src, int64_t lane_stride, int64_t depth_stride, int64_t width, \
                     int64_t depth) {                                                                      \
        const int64_t lanes = LANES;                                                                       \
        T *out = dst;                                                                                      \
        const T *in = src;                                                                                 \
        int64_t first = 0;                                                                                 \
        if (lane_stride == 1) {                                                                            \
            int64_t full_panels = width / lanes;                                                           \
            for (int64_t p = 0; p < depth; p++)                                                            \
                for (int64_t panel = 0; panel < full_panels; panel++)                                      \
                    memcpy(out + (panel * depth + p) * lanes, in + p * depth_stride + panel * lanes,       \
                           (size_t)lanes * sizeof(T));                                                     \
            first = full_panels * lanes;                                                                   \
            out += full_panels * depth * lanes;                                                            \
        }                                                                                                  \
        for (; first < width; first += lanes) {                                                            \
            const T *panel = in + first * lane_stride;                                                     \
            int64_t full = width - first < lanes ? width - first : lanes, steps = 0, done = 0;             \
            if (depth_stride == 1) done = TRANSPOSED(out, panel, lane_stride, lanes, full, depth, &steps); \
            for (int64_t p = 0; p < depth; p++, out += lanes) {                                            \
                int64_t l = p < steps ? done : 0;                                                          \
                for (; l < full; l++) out[l] = panel[l * lane_stride + p * depth_stride];                  \
                for (; l < lanes; l++) out[l] = (T)0;                                                      \
            }                                                                                              \
        }                                                                                                  \
    }

#endif
