/* Element-wise reductions on host buffers, for the TCP ring (and the tests' sequential
 * reference). f16 and bf16 are widened to f32, combined, and rounded back to nearest even,
 * once per combination, as NCCL does; i32 sums wrap around (two's complement). Private to
 * dist/. */
#ifndef GC_DIST_HOST_REDUCE_H
#define GC_DIST_HOST_REDUCE_H

#include <stddef.h>

#include "gradcache/dist.h"

/* acc[i] = op(acc[i], in[i]) for i < count (AVG adds: divide afterwards). MAX and MIN
 * propagate nan. */
void gc_host_reduce(gc_dtype dtype, gc_dist_op op, void *acc, const void *in, size_t count);
/* x[i] /= divisor, for AVG (floating dtypes). */
void gc_host_divide(gc_dtype dtype, void *x, size_t count, int divisor);

#endif
