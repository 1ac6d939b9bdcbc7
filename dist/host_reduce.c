/* Element-wise reductions on host buffers (see host_reduce.h). */
#include "host_reduce.h"

#include <stdint.h>

/* op on two values of a floating type; nan wins MAX and MIN, as in NCCL and PyTorch. */
#define COMBINE(op, a, b)                                                                    \
    ((op) == GC_DIST_MAX   ? ((a) != (a) || (a) > (b) ? (a) : (b))                        \
     : (op) == GC_DIST_MIN ? ((a) != (a) || (a) < (b) ? (a) : (b))                        \
                             : (a) + (b))

void gc_host_reduce(gc_dtype dtype, gc_dist_op op, void *acc, const void *in, size_t count) {
    switch (dtype) {
    case GC_F32: {
        float *a = acc;
        const float *b = in;
        for (size_t i = 0; i < count; i++) a[i] = COMBINE(op, a[i], b[i]);
        break;
    }
    case GC_F64: {
        double *a = acc;
        const double *b = in;
        for (size_t i = 0; i < count; i++) a[i] = COMBINE(op, a[i], b[i]);
        break;
    }
    case GC_F16:
    case GC_BF16: {
        uint16_t *a = acc;
        const uint16_t *b = in;
        bool half = dtype == GC_F16;
        for (size_t i = 0; i < count; i++) {
            float x = half ? gc_f16_to_f32(a[i]) : gc_bf16_to_f32(a[i]);
            float y = half ? gc_f16_to_f32(b[i]) : gc_bf16_to_f32(b[i]);
            float r = COMBINE(op, x, y);
            a[i] = half ? gc_f32_to_f16(r) : gc_f32_to_bf16(r);
        }
        break;
    }
    case GC_I32: {
        int32_t *a = acc;
        const int32_t *b = in;
        for (size_t i = 0; i < count; i++) {
            if (op == GC_DIST_MAX) a[i] = a[i] > b[i] ? a[i] : b[i];
            else if (op == GC_DIST_MIN) a[i] = a[i] < b[i] ? a[i] : b[i];
            else a[i] = (int32_t)((uint32_t)a[i] + (uint32_t)b[i]);
        }
        break;
    }
    default: gc_fatal("reduce: unknown dtype %d", (int)dtype);
    }
}

void gc_host_divide(gc_dtype dtype, void *x, size_t count, int divisor) {
    switch (dtype) {
    case GC_F32:
        for (size_t i = 0; i < count; i++) ((float *)x)[i] /= (float)divisor;
        break;
    case GC_F64:
        for (size_t i = 0; i < count; i++) ((double *)x)[i] /= (double)divisor;
        break;
    case GC_F16:
        for (size_t i = 0; i < count; i++) {
            uint16_t *v = &((uint16_t *)x)[i];
            *v = gc_f32_to_f16(gc_f16_to_f32(*v) / (float)divisor);
        }
        break;
    case GC_BF16:
        for (size_t i = 0; i < count; i++) {
            uint16_t *v = &((uint16_t *)x)[i];
            *v = gc_f32_to_bf16(gc_bf16_to_f32(*v) / (float)divisor);
        }
        break;
    default: gc_fatal("reduce: an average of %s values", gc_dtype_name(dtype));
    }
}
