/* Matrix multiply: checks the operands and hands the product to the backend's GEMM. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"
#include "packed.h"
#include "record.h"

/* The GEMM of op(a) @ op(b) after checking a and b (c, alpha and beta left to the caller),
 * and in shape[0..ndim) the product's shape. */
static gc_matmul_args plan_matmul(const char *op, const gc_tensor *a, const gc_tensor *b, bool trans_a, bool trans_b,
                                  int64_t shape[3]) {
    char a_text[128], b_text[128];
    gc_check_same_device(op, a, b);
    gc_check_same_dtype(op, a, b);
    gc_check_float(op, a);
    bool batched = a->ndim == 3;
    if (a->ndim != b->ndim || (a->ndim != 2 && !batched) || (batched && a->shape[0] != b->shape[0]))
        gc_fatal("%s: needs two 2-D tensors or two 3-D tensors with one batch size, got %s and %s", op,
                 gc_tensor_str(a, a_text, sizeof a_text), gc_tensor_str(b, b_text, sizeof b_text));

    /* The matrix dims follow the batch dim. a is stored [m, k], or [k, m] when trans_a,
     * and b [k, n], or [n, k] when trans_b. */
    const int64_t *a_dims = a->shape + batched, *b_dims = b->shape + batched;
    int64_t m = a_dims[trans_a], k = a_dims[!trans_a];
    int64_t k_of_b = b_dims[trans_b], n = b_dims[!trans_b];
    if (k != k_of_b)
        gc_fatal("%s: inner dims differ: %s%s @ %s%s gives k = %lld and %lld", op,
                 gc_tensor_str(a, a_text, sizeof a_text), trans_a ? " (transposed)" : "",
                 gc_tensor_str(b, b_text, sizeof b_text), trans_b ? " (transposed)" : "", (long long)k,
                 (long long)k_of_b);

    int64_t batch = batched ? a->shape[0] : 1;
    int64_t dims[3] = {batch, m, n};
    for (int d = 0; d < a->ndim; d++) shape[d] = dims[d + !batched];
    gc_matmul_args args = {.a = gc_data(a), .b = gc_data(b), .dtype = a->dtype, .batch = batch, .m = m, .n = n,
                           .k = k, .trans_a = trans_a, .trans_b = trans_b, .alpha = 1.0f, .beta = 0.0f};
    gc_packed_prepare(b, &args); /* a weight's op(b): its kept panels */
    return args;
}

gc_tensor *gc_matmul(const gc_tensor *a, const gc_tensor *b, bool trans_a, bool trans_b) {
    if (!a || !b) return NULL;
    int64_t shape[3];
    gc_matmul_args args = plan_matmul("matmul", a, b, trans_a, trans_b, shape);
    gc_tensor *c = gc_empty(a->ndim, shape, a->dtype, a->device);
    if (!c) return NULL;
    args.c = gc_data(c);
    gc_backend_for(a->device)->matmul(&args);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_MATMUL, .n_inputs = 2, .inputs = (const gc_tensor *[]){a, b},
                                        .output = c, .params.matmul = {trans_a, trans_b}});
}

gc_tensor *gc_matmul_bias(const gc_tensor *a, const gc_tensor *b, const gc_tensor *bias, bool trans_a,
                          bool trans_b) {
    if (!a || !b || !bias) return NULL;
    int64_t shape[3];
    gc_matmul_args args = plan_matmul("matmul_bias", a, b, trans_a, trans_b, shape);
    gc_check_same_device("matmul_bias", a, bias);
    gc_check_same_dtype("matmul_bias", a, bias);
    int64_t n = shape[a->ndim - 1];
    if (a->ndim != 2 || bias->ndim != 1 || bias->shape[0] != n) {
        char a_text[128], bias_text[128];
        gc_fatal("matmul_bias: needs 2-D operands and a bias [%lld], got a %s and bias %s", (long long)n,
                 gc_tensor_str(a, a_text, sizeof a_text), gc_tensor_str(bias, bias_text, sizeof bias_text));
    }
    gc_tensor *c = gc_empty(2, shape, a->dtype, a->device);
    /* c = bias + op(a) op(b): the CPU's GEMM reads the bias row where c's first block is
     * added (one pass over c fewer); elsewhere c starts as the bias broadcast. */
    bool row_in_gemm = a->device.type == GC_DEVICE_CPU;
    if (!c || (!row_in_gemm && !gc_broadcast_into("matmul_bias", bias, c))) {
        gc_tensor_release(c);
        return NULL;
    }
    args.c = gc_data(c);
    args.c_row = row_in_gemm ? gc_data(bias) : NULL;
    args.beta = 1.0f;
    gc_backend_for(a->device)->matmul(&args);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_MATMUL, .n_inputs = 3,
                                        .inputs = (const gc_tensor *[]){a, b, bias}, .output = c,
                                        .params.matmul = {trans_a, trans_b}});
}

void gc_matmul_into(gc_tensor *c, const gc_tensor *a, const gc_tensor *b, bool trans_a, bool trans_b,
                    bool accumulate) {
    char c_text[128], want[64];
    int64_t shape[3];
    gc_matmul_args args = plan_matmul("matmul_into", a, b, trans_a, trans_b, shape);
    gc_check_same_device("matmul_into", c, a);
    gc_check_same_dtype("matmul_into", c, a);
    bool same_shape = c->ndim == a->ndim;
    for (int d = 0; d < a->ndim && same_shape; d++) same_shape = c->shape[d] == shape[d];
    if (!same_shape)
        gc_fatal("matmul_into: the product is %s, the output %s", gc_shape_str(a->ndim, shape, want, sizeof want),
                 gc_tensor_str(c, c_text, sizeof c_text));
    args.c = gc_data(c);
    args.beta = accumulate ? 1.0f : 0.0f;
    gc_backend_for(a->device)->matmul(&args);
    gc_tensor_mark_written(c);
}
