/* Cross-entropy, built from recorded ops so that autograd differentiates it.
 *
 * f16 and bf16 logits are cast to f32 first, as autocast does for losses (the log-softmax and
 * the mean over rows in 16 bits would round every step), so the loss is f32.
 *
 * loss_i = -log_softmax(logits)[i, target_i]. The target entries are gathered with
 * gc_embedding from the log-probabilities seen as a column [N C, 1], at the flat indices
 * i C + target_i: no new kernel, nothing [N, C] kept for the backward beyond what
 * log_softmax keeps, and a -inf logit in another class leaves the loss finite (as in
 * PyTorch), where multiplying by a one-hot matrix would make it 0 * -inf = nan. */
#include <stdint.h>

#include "gradcache/loss.h"
#include "gradcache/ops.h"
#include "tensor/op_util.h"

/* logits [N, C] float, targets i32 [N], on one device. */
static void check_shapes(const gc_tensor *logits, const gc_tensor *targets, gc_loss_reduction reduction) {
    char tl[128], tt[128];
    gc_tensor_str(logits, tl, sizeof tl);
    gc_tensor_str(targets, tt, sizeof tt);
    gc_check_float("cross_entropy", logits);
    if (logits->ndim != 2) gc_fatal("cross_entropy: needs logits [N, C], got %s", tl);
    if (targets->dtype != GC_I32 || targets->ndim != 1 || targets->shape[0] != logits->shape[0])
        gc_fatal("cross_entropy: needs i32 targets [%lld] for logits %s, got %s", (long long)logits->shape[0], tl, tt);
    gc_check_same_device("cross_entropy", logits, targets);
    if (reduction != GC_LOSS_MEAN && reduction != GC_LOSS_SUM)
        gc_fatal("cross_entropy: unknown reduction %d", (int)reduction);
    /* the flat indices i C + target_i are i32 */
    if (gc_numel(logits) > (int64_t)INT32_MAX + 1)
        gc_fatal("cross_entropy: logits %s have more than 2^31 elements", tl);
}

gc_tensor *gc_cross_entropy(const gc_tensor *logits, const gc_tensor *targets, gc_loss_reduction reduction) {
    if (!logits || !targets) return NULL;
    check_shapes(logits, targets, reduction);
    int64_t rows = logits->shape[0], classes = logits->shape[1];
    gc_check_index_range("cross_entropy", "target", targets, classes); /* on the device: no host wait */
    gc_tensor *row_starts = gc_arange(rows, 0, (double)classes, GC_I32, logits->device); /* i C */
    gc_tensor *flat_targets = gc_add(row_starts, targets);                                /* [N] */
    gc_tensor *working = gc_to_working(logits);                                           /* [N, C] */
    gc_tensor *log_probs = gc_log_softmax(working);                                       /* [N, C] */
    gc_tensor *column = gc_reshape(log_probs, GC_SHAPE(rows * classes, 1));               /* [N C, 1] */
    gc_tensor *picked = gc_embedding(column, flat_targets);                               /* [N, 1] */
    /* The mean of no rows is 0/0 = nan, as in PyTorch. */
    gc_tensor *total = reduction == GC_LOSS_MEAN ? gc_mean_all(picked) : gc_sum_all(picked);
    gc_tensor *loss = gc_neg(total);
    gc_tensor_release(row_starts);
    gc_tensor_release(flat_targets);
    gc_tensor_release(working);
    gc_tensor_release(log_probs);
    gc_tensor_release(column);
    gc_tensor_release(picked);
    gc_tensor_release(total);
    return loss;
}
