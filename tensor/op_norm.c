/* Layer normalisation over the last dim: the checks, the allocations and the dispatch
 * (the arithmetic is described in tensor/cpu/layernorm_cpu.c).
 *
 * Choices:
 *  - the saved mean and rstd have x's leading shape, as a reduction of the last dim
 *    without keepdim gives: [B, T] for x [B, T, D], and 0-dim for a 1-D x [D];
 *  - a NULL gamma or beta means none (1 or 0), so a NULL from a failed op upstream
 *    cannot be told from "none": pass parameters the caller holds, not fresh results;
 *  - eps must be > 0 (a nan is refused too): with eps = 0 a constant row would give
 *    0 * inf = nan instead of 0;
 *  - the last dim must not be empty: there is no mean of zero elements. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"
#include "record.h"

/* gamma or beta (when given): [D] for x [..., D], of x's dtype and on x's device. */
static void check_param(const char *name, const gc_tensor *param, const gc_tensor *x) {
    char got[128], text[128];
    if (!param) return;
    int64_t cols = gc_last_dim(x);
    if (param->ndim != 1 || param->shape[0] != cols)
        gc_fatal("layernorm: %s is %s but x is %s, so it must be [%lld]", name,
                 gc_tensor_str(param, got, sizeof got), gc_tensor_str(x, text, sizeof text), (long long)cols);
    gc_check_same_dtype("layernorm", x, param);
    gc_check_same_device("layernorm", x, param);
}

/* An f32 tensor of x's leading shape, for one saved statistic per row. */
static gc_tensor *row_statistic(const gc_tensor *x) {
    return gc_empty(x->ndim - 1, x->shape, GC_F32, x->device);
}

gc_tensor *gc_layernorm(const gc_tensor *x, const gc_tensor *gamma, const gc_tensor *beta,
                        double eps, gc_tensor **mean, gc_tensor **rstd) {
    char text[128];
    if (mean) *mean = NULL;
    if (rstd) *rstd = NULL;
    if (!x) return NULL;
    gc_check_float("layernorm", x);
    gc_check_min_ndim("layernorm", x, 1);
    if (gc_last_dim(x) == 0)
        gc_fatal("layernorm: %s has an empty last dim, nothing to normalise", gc_tensor_str(x, text, sizeof text));
    check_param("gamma", gamma, x);
    check_param("beta", beta, x);
    if (!(eps > 0)) gc_fatal("layernorm: eps must be > 0, got %g", eps);

    /* Allocated in this order, stopping at the first failure. */
    gc_tensor *y = gc_empty_like(x), *saved_mean = NULL, *saved_rstd = NULL;
    bool ok = y && (!mean || (saved_mean = row_statistic(x))) && (!rstd || (saved_rstd = row_statistic(x)));
    if (!ok) {
        gc_tensor_release(y);
        gc_tensor_release(saved_mean);
        return NULL;
    }
    gc_backend_for(x->device)->layernorm(gc_data(x), gamma ? gc_data(gamma) : NULL, beta ? gc_data(beta) : NULL,
                                         gc_data(y), saved_mean ? gc_data(saved_mean) : NULL,
                                         saved_rstd ? gc_data(saved_rstd) : NULL, (size_t)gc_leading_rows(x),
                                         (size_t)gc_last_dim(x), eps, x->dtype);
    /* The backward recomputes the statistics from x, so the record keeps none. */
    y = gc_finish_op(&(gc_op_record){.kind = GC_OP_LAYERNORM, .n_inputs = 3,
                                     .inputs = (const gc_tensor *[]){x, gamma, beta}, .output = y,
                                     .params.layernorm = {eps}});
    if (!y) {
        gc_tensor_release(saved_mean);
        gc_tensor_release(saved_rstd);
        return NULL;
    }
    if (mean) *mean = saved_mean;
    if (rstd) *rstd = saved_rstd;
    return y;
}
