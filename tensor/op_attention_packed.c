/* Attention over packed tokens (gradcache/ops.h, gc_attention_packed): the context of an
 * inference forward whose real tokens are packed, without unpacking them. The backend's kernel
 * (backend_kernels.h, attention_packed) does the work; this checks what it is given. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_util.h"
#include "record.h"

bool gc_attention_packed_available(const gc_tensor *q) {
    return q && q->dtype == GC_F32 && gc_backend_for(q->device)->attention_packed;
}

/* positions i32 [N] in host memory: increasing, each in [0, B T). */
static void check_positions(const gc_tensor *positions, int64_t tokens, int64_t places) {
    char text[128];
    if (positions->dtype != GC_I32 || positions->ndim != 1 || positions->shape[0] != tokens ||
        positions->device.type != GC_DEVICE_CPU)
        gc_fatal("attention_packed: positions %s are not [%lld] i32 in host memory",
                 gc_tensor_str(positions, text, sizeof text), (long long)tokens);
    const int32_t *place = gc_data(positions);
    for (int64_t r = 0; r < tokens; r++)
        if (place[r] < 0 || place[r] >= places || (r > 0 && place[r] <= place[r - 1]))
            gc_fatal("attention_packed: position %d at row %lld is outside [0, %lld) or not above the one before",
                     place[r], (long long)r, (long long)places);
}

gc_tensor *gc_attention_packed(const gc_tensor *q /* [N, H * Dh] */, const gc_tensor *k /* [N, KVH * Dh] */,
                               const gc_tensor *v /* [N, KVH * Dh] */, const gc_tensor *positions /* i32 [N] or NULL */,
                               const gc_tensor *bias /* [B, 1, 1, T] or NULL */,
                               const gc_attention_packed_shape *shape) {
    if (!q || !k || !v) return NULL;
    const char *op = "attention_packed";
    char q_text[128], k_text[128], v_text[128], bias_text[128];
    if (!gc_attention_packed_available(q))
        gc_fatal("%s: no kernel for q %s (see gc_attention_packed_available)", op,
                 gc_tensor_str(q, q_text, sizeof q_text));
    gc_check_same_dtype(op, q, k);
    gc_check_same_dtype(op, q, v);
    gc_check_same_device(op, q, k);
    gc_check_same_device(op, q, v);
    int64_t heads = shape->heads, kv_heads = shape->kv_heads, dh = shape->head_dim;
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads || dh <= 0 || shape->batch < 0 || shape->length < 0 ||
        q->ndim != 2 || q->shape[1] != heads * dh || k->ndim != 2 || !gc_same_shape(k, v) ||
        k->shape[0] != q->shape[0] || k->shape[1] != kv_heads * dh)
        gc_fatal("%s: q %s, k %s and v %s are not [N, %lld] and [N, %lld] twice (%lld heads, %lld key heads of %lld)",
                 op, gc_tensor_str(q, q_text, sizeof q_text), gc_tensor_str(k, k_text, sizeof k_text),
                 gc_tensor_str(v, v_text, sizeof v_text), (long long)(heads * dh), (long long)(kv_heads * dh),
                 (long long)heads, (long long)kv_heads, (long long)dh);
    int64_t tokens = q->shape[0];
    if (positions) check_positions(positions, tokens, shape->batch * shape->length);
    else if (tokens != shape->batch * shape->length)
        gc_fatal("%s: q %s has not the %lld rows of %lld texts of %lld places (positions NULL)", op,
                 gc_tensor_str(q, q_text, sizeof q_text), (long long)(shape->batch * shape->length),
                 (long long)shape->batch, (long long)shape->length);
    if (bias) {
        gc_check_same_dtype(op, q, bias);
        gc_check_same_device(op, q, bias);
        if (bias->ndim != 4 || bias->shape[0] != shape->batch || bias->shape[1] != 1 || bias->shape[2] != 1 ||
            bias->shape[3] != shape->length)
            gc_fatal("%s: bias %s is not [%lld, 1, 1, %lld]", op, gc_tensor_str(bias, bias_text, sizeof bias_text),
                     (long long)shape->batch, (long long)shape->length);
    }
    if (gc_op_would_record((const gc_tensor *[]){q, k, v}, 3))
        gc_fatal("%s: no backward; q %s needs a gradient here (run it without a graph)", op,
                 gc_tensor_str(q, q_text, sizeof q_text));
    gc_tensor *out = gc_empty_like(q);
    if (!out) return NULL;
    gc_attention_packed_args args = {.q = gc_data(q), .k = gc_data(k), .v = gc_data(v),
                                     .positions = positions ? gc_data(positions) : NULL,
                                     .bias = bias ? gc_data(bias) : NULL, .tokens = tokens, .batch = shape->batch,
                                     .length = shape->length, .heads = heads, .kv_heads = kv_heads,
                                     .head_dim = dh, .dtype = q->dtype, .scale = shape->scale, .out = gc_data(out)};
    gc_backend_for(q->device)->attention_packed(&args);
    return out;
}
