/* Matrix multiply: checks the operands and hands the product to the backend's GEMM. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_util.h"
#include "record.h"

gc_tensor *gc_matmul(const gc_tensor *a, const gc_tensor *b, bool trans_a, bool trans_b) {
    if (!a || !b) return NULL;
    char a_text[128], b_text[128];
    gc_check_same_device("matmul", a, b);
    gc_check_same_dtype("matmul", a, b);
    gc_check_float("matmul", a);
    bool batched = a->ndim == 3;
    if (a->ndim != b->ndim || (a->ndim != 2 && !batched) || (batched && a->shape[0] != b->shape[0]))
        gc_fatal("matmul: needs two 2-D tensors or two 3-D tensors with one batch size, got %s and %s",
                 gc_tensor_str(a, a_text, sizeof a_text), gc_tensor_str(b, b_text, sizeof b_text));

    /* The matrix dims follow the batch dim. a is stored [m, k], or [k, m] when trans_a,
     * and b [k, n], or [n, k] when trans_b. */
    const int64_t *a_dims = a->shape + batched, *b_dims = b->shape + batched;
    int64_t m = a_dims[trans_a], k = a_dims[!trans_a];
    int64_t k_of_b = b_dims[trans_b], n = b_dims[!trans_b];
    if (k != k_of_b)
        gc_fatal("matmul: inner dims differ: %s%s @ %s%s gives k = %lld and %lld",
                 gc_tensor_str(a, a_text, sizeof a_text), trans_a ? " (transposed)" : "",
                 gc_tensor_str(b, b_text, sizeof b_text), trans_b ? " (transposed)" : "", (long long)k,
                 (long long)k_of_b);

    int64_t batch = batched ? a->shape[0] : 1;
    int64_t shape[3] = {batch, m, n};
    gc_tensor *c = gc_empty(a->ndim, shape + !batched, a->dtype, a->device);
    if (!c) return NULL;
    gc_matmul_args args = {.a = gc_data(a), .b = gc_data(b), .c = gc_data(c), .dtype = a->dtype,
                           .batch = batch, .m = m, .n = n, .k = k, .trans_a = trans_a,
                           .trans_b = trans_b, .alpha = 1.0f, .beta = 0.0f};
    gc_backend_for(a->device)->matmul(&args);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_MATMUL, .n_inputs = 2, .inputs = (const gc_tensor *[]){a, b},
                                        .output = c, .params.matmul = {trans_a, trans_b}});
}
