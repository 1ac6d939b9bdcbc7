/* The text encoder on CUDA against the same encoder on the CPU: both initialised from one
 * generator state (gc_normal draws bitwise the same numbers on every device), then the same
 * forward and backward of L = sum(encoder(ids, mask) * w), in evaluation and in training
 * (the dropout masks match too: each device's default generator is seeded alike and draws
 * the same words). Outputs and every parameter's gradient must agree. Two variants attend
 * causally within a sliding window of 3 (Mistral's), composed and fused. */
#include <string.h>

#include "check.h"
#include "values.h"

enum { BATCH = 3, LENGTH = 12 };

typedef struct variant {
    bool pre_norm;
    gc_pooling pooling;
    int64_t projection;
    gc_dtype dtype;
    /* the agreement asked for, relative to the largest magnitude of the compared tensor */
    double tolerance;
    int64_t window; /* > 0: causal attention in a sliding window of this many keys */
    bool fused;     /* gc_attention_fused rather than the composed ops */
} variant;

/* f32: each op rounds differently on the two devices (cuBLAS sums in another order; CUDA's
 * exp, erf and tanh are a few ulps from glibc's), ~1e-6 relative per op, compounding over
 * the ~60 ops of two layers forward and back to a few 1e-5; 2e-4 leaves room and still
 * catches any real difference (a wrong index or mask is off by O(1)). f64: the same
 * reasoning with 2^-53 in place of 2^-24. */
static const variant variants[] = {
    {false, GC_POOL_CLS, 16, GC_F32, 2e-4, 0, false},
    {true, GC_POOL_MEAN, 0, GC_F32, 2e-4, 0, false},
    {false, GC_POOL_MEAN, 0, GC_F64, 1e-10, 0, false},
    {true, GC_POOL_LAST, 0, GC_F64, 1e-10, 3, false},
    {true, GC_POOL_LAST, 0, GC_F64, 1e-10, 3, true},
};

static gc_text_encoder_config config_of(const variant *v) {
    return (gc_text_encoder_config){.vocab = 50, .max_length = 16, .dim = 32, .heads = 4, .layers = 2,
                                    .hidden = 64, .projection = v->projection, .dropout = 0.1,
                                    .pre_norm = v->pre_norm, .activation = GC_ACT_GELU_ERF,
                                    .pooling = v->pooling, .dtype = v->dtype,
                                    .attention = {.causal = v->window > 0, .window = v->window}};
}

/* |got - want| <= tolerance * max |scale_of| + tolerance |want| for every element: elements
 * that cancel to near 0 are compared at the scale of `scale_of` (the tensor itself, or the
 * one whose terms cancelled). */
static void expect_close_at_scale_of(const gc_tensor *want, const gc_tensor *got, const gc_tensor *scale_of,
                                     double tolerance, const char *what) {
    gc_test_expect_close(want, got, tolerance * gc_test_largest_abs(scale_of), tolerance, what);
}

/* The key projection's bias has a gradient of exactly 0 in exact arithmetic: it adds q.b to
 * every score of a query's row, and softmax ignores a constant added to a row. Each device
 * returns rounding noise the size of the per-token terms that cancel (on an H200 both gave
 * noise near 1e-11 in f32 and 1e-20 in f64), so it is compared at the scale of the key
 * weight's gradient, which sums the same terms times layer-normed inputs of order 1. */
static const gc_tensor *scale_for_gradient(const gc_param_list *params, int i) {
    const char *name = params->items[i].name, *suffix = "attention.key.bias";
    size_t length = strlen(name), suffix_length = strlen(suffix);
    if (length < suffix_length || strcmp(name + length - suffix_length, suffix) != 0)
        return gc_grad(params->items[i].tensor);
    char weight[GC_PARAM_NAME_MAX];
    snprintf(weight, sizeof weight, "%.*sattention.key.weight", (int)(length - suffix_length), name);
    for (int j = 0; j < params->count; j++)
        if (strcmp(params->items[j].name, weight) == 0) return gc_grad(params->items[j].tensor);
    REQUIRE(!"a key bias without a key weight");
    return NULL;
}

/* Forward and backward with the dropout stream at `seed`; returns the output. */
static gc_tensor *forward_backward(const gc_text_encoder *encoder, const gc_param_list *params, const gc_tensor *ids,
                                   const gc_tensor *mask, bool training, uint64_t seed) {
    gc_param_list_zero_grad(params);
    gc_manual_seed(seed);
    gc_tensor *out = gc_text_encoder_forward(encoder, ids, mask, training);
    REQUIRE(out);
    gc_tensor *weight = gc_uniform(out->ndim, out->shape, out->dtype, out->device, -1, 1, 77, 0);
    REQUIRE(weight);
    REQUIRE(gc_backward(&out, &weight, 1) == GC_OK);
    gc_tensor_release(weight);
    return out;
}

static void compare_variant(const variant *v) {
    gc_set_fused_attention(v->fused);
    gc_text_encoder_config config = config_of(v);
    gc_text_encoder on_cpu, on_gpu;
    gc_generator cpu_init = {21, 0}, gpu_init = {21, 0};
    REQUIRE(gc_text_encoder_init(&on_cpu, &config, gc_cpu(), &cpu_init) == GC_OK);
    REQUIRE(gc_text_encoder_init(&on_gpu, &config, gc_cuda(0), &gpu_init) == GC_OK);
    gc_param_list cpu_params = {0}, gpu_params = {0};
    gc_text_encoder_params(&on_cpu, "", &cpu_params);
    gc_text_encoder_params(&on_gpu, "", &gpu_params);
    REQUIRE(cpu_params.count == gpu_params.count);
    for (int i = 0; i < cpu_params.count; i++)
        gc_test_expect_close(cpu_params.items[i].tensor, gpu_params.items[i].tensor, 0, 0, cpu_params.items[i].name);

    /* ids in [0, 49); sequences of 12, 7 and 1 real tokens */
    gc_tensor *ids = gc_test_random_in(GC_SHAPE(BATCH, LENGTH), GC_I32, 0, 49, 5);
    const int lengths[BATCH] = {12, 7, 1};
    double mask_values[BATCH * LENGTH];
    for (int i = 0; i < BATCH * LENGTH; i++) mask_values[i] = i % LENGTH < lengths[i / LENGTH];
    gc_tensor *mask = gc_test_tensor(v->dtype, GC_SHAPE(BATCH, LENGTH), mask_values);
    gc_tensor *gpu_ids = gc_to_device(ids, gc_cuda(0)), *gpu_mask = gc_to_device(mask, gc_cuda(0));
    REQUIRE(gpu_ids && gpu_mask);

    for (int training = 0; training < 2; training++) {
        gc_tensor *cpu_out = forward_backward(&on_cpu, &cpu_params, ids, mask, training, 31);
        gc_tensor *gpu_out = forward_backward(&on_gpu, &gpu_params, gpu_ids, gpu_mask, training, 31);
        char what[GC_PARAM_NAME_MAX + 64];
        snprintf(what, sizeof what, "%s %s output", gc_dtype_name(v->dtype), training ? "training" : "eval");
        expect_close_at_scale_of(cpu_out, gpu_out, cpu_out, v->tolerance, what);
        for (int i = 0; i < cpu_params.count; i++) {
            const gc_tensor *cpu_grad = gc_grad(cpu_params.items[i].tensor);
            const gc_tensor *gpu_grad = gc_grad(gpu_params.items[i].tensor);
            snprintf(what, sizeof what, "%s %s grad of %s", gc_dtype_name(v->dtype), training ? "training" : "eval",
                     cpu_params.items[i].name);
            CHECK_MSG(cpu_grad && gpu_grad, "%s: missing", what);
            if (cpu_grad && gpu_grad)
                expect_close_at_scale_of(cpu_grad, gpu_grad, scale_for_gradient(&cpu_params, i), v->tolerance, what);
        }
        gc_tensor_release(cpu_out);
        gc_tensor_release(gpu_out);
    }
    gc_tensor_release(ids);
    gc_tensor_release(mask);
    gc_tensor_release(gpu_ids);
    gc_tensor_release(gpu_mask);
    gc_param_list_free(&cpu_params);
    gc_param_list_free(&gpu_params);
    gc_text_encoder_free(&on_cpu);
    gc_text_encoder_free(&on_gpu);
}

int main(void) {
    gc_test_require_cuda();
    size_t start = gc_memory_get_stats(gc_cuda(0)).live_bytes;
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) compare_variant(&variants[i]);
    CHECK(gc_memory_get_stats(gc_cuda(0)).live_bytes == start);
    return gc_test_result();
}
