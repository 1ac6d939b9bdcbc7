/* Rotary position embeddings (Llama's "rotate half" form): the table of cosines and sines,
 * the checks and the dispatch; the per-pair arithmetic is tensor/rope_impl.h's. A rotation is
 * orthogonal, so the backward is the inverse rotation of the gradient, the same kernel with
 * the sines negated: nothing is saved but the table. */
#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"
#include "record.h"

/* Row t of a float table as transformers computes it for an f32, f16 or bf16 model: the
 * inverse frequencies 1 / theta^(2i / Dh) (divided by the linear scaling factor) and the
 * angles t inv_freq each rounded to f32, then their cosine and sine, rounded once from
 * double (PyTorch's float cos and sin are within an ulp of that). The models were trained
 * with these roundings: at position 1000 an angle rounded to f32 is off by up to 3e-5. */
static void float_row(float *row, int64_t t, int64_t head_dim, double theta, double scale) {
    int64_t half = head_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        float exponent = (float)(2 * i) / (float)head_dim;
        float inverse = 1.0f / (float)pow((double)(float)theta, (double)exponent);
        if (scale != 1) inverse /= (float)scale;
        double angle = (double)(inverse * (float)t);
        row[i] = (float)cos(angle);
        row[half + i] = (float)sin(angle);
    }
}

/* The same for an f64 model, all in double (gradient checks and the f64 parity). */
static void double_row(double *row, int64_t t, int64_t head_dim, double theta, double scale) {
    int64_t half = head_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        double angle = (double)t / (pow(theta, (double)(2 * i) / (double)head_dim) * scale);
        row[i] = cos(angle);
        row[half + i] = sin(angle);
    }
}

gc_tensor *gc_rope_table(int64_t length, int64_t head_dim, double theta, double scale, gc_dtype dtype,
                         gc_device device) {
    if (length < 1 || length > (1 << 24) || head_dim < 2 || head_dim > (1 << 16) || head_dim % 2 ||
        !(theta > 1) || !(scale > 0) || !gc_dtype_is_float(dtype))
        gc_fatal("rope_table: %lld positions of %lld dims (even), theta %g (> 1), scale %g (> 0), %s: out of range",
                 (long long)length, (long long)head_dim, theta, scale, gc_dtype_name(dtype));
    gc_dtype working = gc_working_dtype(dtype);
    size_t count = (size_t)(length * head_dim);
    void *host = malloc(count * gc_dtype_size(working));
    if (!host) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "rope_table: no host memory for %zu values", count);
        return NULL;
    }
    for (int64_t t = 0; t < length; t++) {
        if (working == GC_F64) double_row((double *)host + t * head_dim, t, head_dim, theta, scale);
        else float_row((float *)host + t * head_dim, t, head_dim, theta, scale);
    }
    gc_tensor *table = gc_from_host(host, GC_SHAPE(length, head_dim), working, device);
    free(host);
    return table;
}

static gc_tensor *rope(const char *op, const gc_tensor *x, const gc_tensor *table, bool inverse) {
    char x_text[128], table_text[128];
    gc_check_float(op, x);
    gc_check_same_device(op, x, table);
    if (x->ndim != 4 || x->shape[3] % 2 || table->ndim != 2 || table->shape[0] != x->shape[1] ||
        table->shape[1] != x->shape[3] || table->dtype != gc_working_dtype(x->dtype))
        gc_fatal("%s: x %s is not [B, T, H, Dh] (Dh even) with table %s [T, Dh] of its working dtype", op,
                 gc_tensor_str(x, x_text, sizeof x_text), gc_tensor_str(table, table_text, sizeof table_text));
    gc_tensor *y = gc_empty_like(x);
    if (y)
        gc_backend_for(x->device)->rope(gc_data(x), gc_data(table), gc_data(y), (size_t)(x->shape[0] * x->shape[1]),
                                        (size_t)x->shape[1], (size_t)x->shape[2], (size_t)x->shape[3], inverse,
                                        x->dtype);
    return y;
}

gc_tensor *gc_rope(const gc_tensor *x, const gc_tensor *table) {
    if (!x || !table) return NULL;
    gc_tensor *y = rope("rope", x, table, false);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_ROPE, .n_inputs = 2, .inputs = (const gc_tensor *[]){x, table},
                                        .output = y});
}

gc_tensor *gc_rope_inverse(const gc_tensor *x, const gc_tensor *table) {
    return x && table ? rope("rope_inverse", x, table, true) : NULL;
}
