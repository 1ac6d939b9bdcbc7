/* The packing routines of a gemm variant (see gemm_kernel.h), written once for any element
 * type and panel width: GEMM_PACK_DEFINE(T, name, LANES) defines `static void name(...)`
 * for panels of LANES lanes (a constant, so that a panel row is a fixed-size copy). Each
 * variant's file instantiates it for its mr and nr, compiled for its instruction set. */
#ifndef GC_TENSOR_GEMM_PACK_H
#define GC_TENSOR_GEMM_PACK_H

#include <string.h>

/* Lanes that are contiguous in memory (lane_stride 1) are copied a panel row at a time,
 * depth by depth across all the full panels, so that the source is read front to back (a
 * panel at a time would walk down the whole depth once per panel, a cache miss per row);
 * otherwise, and in a partial last panel, each element is gathered. */
#define GEMM_PACK_DEFINE(T, NAME, LANES)                                                                   \
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
            int64_t full = width - first < lanes ? width - first : lanes;                                  \
            if (full == lanes) /* a whole panel: a constant count, so the gather is unrolled */            \
                for (int64_t p = 0; p < depth; p++, out += lanes)                                          \
                    for (int64_t l = 0; l < LANES; l++) out[l] = panel[l * lane_stride + p * depth_stride]; \
            else                                                                                           \
                for (int64_t p = 0; p < depth; p++, out += lanes) {                                        \
                    for (int64_t l = 0; l < full; l++) out[l] = panel[l * lane_stride + p * depth_stride]; \
                    for (int64_t l = full; l < lanes; l++) out[l] = (T)0;                                  \
                }                                                                                          \
        }                                                                                                  \
    }

#endif
