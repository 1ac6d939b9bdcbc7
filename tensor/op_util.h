/* Checks shared by the op front-ends. Each stops the program (a programmer error) with
 * one line naming the op and the offending tensors. */
#ifndef GC_TENSOR_OP_UTIL_H
#define GC_TENSOR_OP_UTIL_H

#include "gradcache/tensor.h"

/* a and b on one device. */
void gc_check_same_device(const char *op, const gc_tensor *a, const gc_tensor *b);
/* a and b of one dtype. */
void gc_check_same_dtype(const char *op, const gc_tensor *a, const gc_tensor *b);
/* x of a floating dtype. */
void gc_check_float(const char *op, const gc_tensor *x);
/* x has at least `ndim` dims. */
void gc_check_min_ndim(const char *op, const gc_tensor *x, int ndim);
/* Every element of `index` (i32) in [0, bound); otherwise the program stops with one line
 * "<op>: <what> 7 at position 1 of <what>s [3] i32 cpu is outside [0, 4)": at once on the
 * CPU, at the device's next synchronisation on a GPU (the check itself never waits). */
void gc_check_index_range(const char *op, const char *what, const gc_tensor *index, int64_t bound);
/* Size of the last dim (1 for a 0-dim tensor) and the number of rows before it. */
int64_t gc_last_dim(const gc_tensor *x);
int64_t gc_leading_rows(const gc_tensor *x);

#endif
