/* Fused attention (gradcache/ops.h, gc_attention_fused): softmax(scale q k^T + bias) v with
 * dropout on the probabilities, as the unfused ops compute it, without the [B, H, T, T]
 * logits. The forward keeps each row's log-sum-exp [B, H, T] for the backward
 * (gc_attention_fused_backward), which recomputes the probabilities from it. The arithmetic
 * is tensor/attention_impl.h's, shared by the backends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"
#include "record.h"

/* Off unless GC_FUSED_ATTENTION=1 (read at the first question) or gc_set_fused_attention: on
 * the CPU the composed ops measured faster at the trainer's shapes (bench/bench_attention.c). */
static int fused_attention = -1; /* -1: not decided yet */

void gc_set_fused_attention(bool enabled) { fused_attention = enabled; }

bool gc_fused_attention(void) {
    if (fused_attention < 0) {
        const char *env = getenv("GC_FUSED_ATTENTION");
        fused_attention = env && strcmp(env, "1") == 0;
    }
    return fused_attention;
}

/* The [B, H, T, Dh] and [B, KVH, T, Dh] operands: one float dtype and device, KVH dividing H. */
static void check_operands(const char *op, const gc_tensor *q, const gc_tensor *k, const gc_tensor *v) {
    char q_text[128], k_text[128], v_text[128];
    gc_check_float(op, q);
    gc_check_same_dtype(op, q, k);
    gc_check_same_dtype(op, q, v);
    gc_check_same_device(op, q, k);
    gc_check_same_device(op, q, v);
    if (q->ndim != 4 || k->ndim != 4 || !gc_same_shape(k, v) || k->shape[0] != q->shape[0] || k->shape[1] <= 0 ||
        q->shape[1] % k->shape[1] || k->shape[2] != q->shape[2] || k->shape[3] != q->shape[3])
        gc_fatal("%s: q %s, k %s and v %s are not [B, H, T, Dh], [B, KVH, T, Dh] twice with KVH dividing H", op,
                 gc_tensor_str(q, q_text, sizeof q_text), gc_tensor_str(k, k_text, sizeof k_text),
                 gc_tensor_str(v, v_text, sizeof v_text));
}

/* The kernel arguments that the forward and the backward share: shapes, options, bias rows. */
static gc_attention_args make_args(const char *op, const gc_tensor *q, const gc_tensor *k, const gc_tensor *v,
                                   const gc_tensor *bias, const gc_attention_fused_options *o) {
    char q_text[128], bias_text[128];
    check_operands(op, q, k, v);
    if (!isfinite(o->scale) || o->window < 0 || !(o->dropout >= 0 && o->dropout < 1))
        gc_fatal("%s: scale %g (finite), window %lld (not negative) or dropout %g (in [0, 1)) out of range for q %s",
                 op, o->scale, (long long)o->window, o->dropout, gc_tensor_str(q, q_text, sizeof q_text));
    const int64_t *s = q->shape;
    gc_attention_args a = {.q = gc_data(q), .k = gc_data(k), .v = gc_data(v), .batch = s[0], .heads = s[1],
                           .kv_heads = k->shape[1], .length = s[2], .head_dim = s[3], .dtype = q->dtype,
                           .scale = o->scale, .causal = o->causal, .window = o->window,
                           .threshold = (uint32_t)ceil(o->dropout * 16777216.0), .keep_scale = 1 / (1 - o->dropout),
                           .seed = o->seed, .offset = o->offset};
    if (!bias) return a;
    gc_check_same_dtype(op, q, bias);
    gc_check_same_device(op, q, bias);
    const int64_t *b = bias->shape;
    if (bias->ndim != 4 || (b[0] != 1 && b[0] != s[0]) || b[1] != 1 || (b[2] != 1 && b[2] != s[2]) || b[3] != s[2])
        gc_fatal("%s: bias %s is not [1 or %lld, 1, 1 or %lld, %lld] for q %s", op,
                 gc_tensor_str(bias, bias_text, sizeof bias_text), (long long)s[0], (long long)s[2], (long long)s[2],
                 gc_tensor_str(q, q_text, sizeof q_text));
    /* the [B, H, T, T] logits' rows, as gc_softmax_scaled lays its bias out (an empty q has
     * no rows: its divisors are then 1 rather than 0) */
    size_t rows_per_batch = (size_t)(s[1] * s[2]);
    a.bias = (gc_softmax_bias){.data = gc_data(bias),
                               .rows_per_batch = rows_per_batch ? rows_per_batch : 1,
                               .queries = s[2] ? (size_t)s[2] : 1,
                               .batch_stride = b[0] == 1 ? 0 : (size_t)(b[2] * b[3]),
                               .query_stride = b[2] == 1 ? 0 : (size_t)b[3]};
    return a;
}

gc_tensor *gc_attention_fused(const gc_tensor *q /* [B, H, T, Dh] */, const gc_tensor *k /* [B, KVH, T, Dh] */,
                              const gc_tensor *v /* [B, KVH, T, Dh] */,
                              const gc_tensor *bias /* [B or 1, 1, T or 1, T] or NULL */,
                              const gc_attention_fused_options *options) {
    if (!q || !k || !v) return NULL;
    gc_attention_args a = make_args("attention_fused", q, k, v, bias, options);
    gc_tensor *out = gc_empty_like(q);
    gc_tensor *lse = out ? gc_empty(3, q->shape, gc_working_dtype(q->dtype), q->device) : NULL; /* [B, H, T] */
    if (lse) {
        a.out = gc_data(out);
        a.lse = gc_data(lse);
        gc_backend_for(q->device)->attention_forward(&a);
    } else {
        gc_tensor_release(out);
        out = NULL;
    }
    gc_tensor *result = gc_finish_op(&(gc_op_record){.kind = GC_OP_ATTENTION, .n_inputs = 4,
                                                     .inputs = (const gc_tensor *[]){q, k, v, bias}, .output = out,
                                                     .params.attention = {*options, lse}});
    gc_tensor_release(lse);
    return result;
}

bool gc_attention_fused_backward(const gc_attention_fused_saved *saved, const gc_tensor *g, gc_tensor **dq,
                                 gc_tensor **dk, gc_tensor **dv) {
    const gc_tensor *q = saved->q, *k = saved->k, *v = saved->v;
    gc_attention_args a = make_args("attention_fused_backward", q, k, v, saved->bias, saved->options);
    char g_text[128], out_text[128];
    if (!gc_same_shape(g, q) || !gc_same_shape(saved->out, q) || g->dtype != q->dtype ||
        !gc_device_equal(g->device, q->device))
        gc_fatal("attention_fused_backward: g %s and the output %s are not q's shape, dtype and device",
                 gc_tensor_str(g, g_text, sizeof g_text), gc_tensor_str(saved->out, out_text, sizeof out_text));
    gc_dtype working = gc_working_dtype(q->dtype);
    gc_tensor *row_dot = gc_empty(3, q->shape, working, q->device); /* [B, H, T] */
    gc_tensor *q_grad = gc_empty(4, q->shape, working, q->device);
    gc_tensor *k_grad = gc_empty(4, k->shape, working, q->device), *v_grad = gc_empty(4, v->shape, working, q->device);
    bool ok = row_dot && q_grad && k_grad && v_grad;
    if (ok) {
        a.out = gc_data(saved->out);
        a.lse = gc_data(saved->lse);
        a.grad_out = gc_data(g);
        a.row_dot = gc_data(row_dot);
        a.dq = gc_data(q_grad);
        a.dk = gc_data(k_grad);
        a.dv = gc_data(v_grad);
        gc_backend_for(q->device)->attention_backward(&a);
        *dq = q_grad;
        *dk = k_grad;
        *dv = v_grad;
    } else {
        gc_tensor_release(q_grad);
        gc_tensor_release(k_grad);
        gc_tensor_release(v_grad);
    }
    gc_tensor_release(row_dot);
    return ok;
}
