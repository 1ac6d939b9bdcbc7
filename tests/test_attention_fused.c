/* Fused attention on the CPU (gc_attention_fused): its output and the gradients of q, k and
 * v against the unfused ops it replaces (matmul, softmax_scaled over the bias with the causal
 * mask and the window added as -10000, dropout over the [B, H, T, T] probabilities, matmul),
 * in f64 and f32, for every case of attention_cases.h; the dropout mask bit for bit; an f64
 * gradient check; the 16-bit dtypes against f32; results independent of the thread count;
 * no [B, H, T, T] allocation in the forward or the backward; the attention layer fused
 * against composed; the programmer errors. */
#include "attention_cases.h"
#include "gradcheck.h"
#include "tensor/cpu/attention_cpu.h"

/* f64: the two paths sum the same terms of order 1 in other orders (dot products of Dh
 * terms, rows of T, gradients of G T): a few hundred roundings of 2^-53, far below 1e-12 of
 * the largest element.
 * f32: attention_f32_rtol (attention_cases.h). */
#define F64_RTOL 1e-12

static const gc_device cpu = {GC_DEVICE_CPU, 0};

/* transformers' masks, written out here independently of attention_impl.h: causal hides
 * k > q; a sliding window w hides k <= q - w, and without causal also k >= q + w. */
static bool reference_hidden(const attention_case *c, int64_t q, int64_t k) {
    if (c->causal && k > q) return true;
    if (c->window && q - k >= c->window) return true;
    return c->window && !c->causal && k - q >= c->window;
}

/* [B, 1, T, T]: the padding bias plus -10000 on every key the causal mask or the window
 * hides, as attention_inputs.c adds its causal bias to the padding. */
static gc_tensor *reference_bias(const attention_case *c, gc_dtype dtype) {
    int64_t t = c->length;
    double *host = malloc(sizeof(double) * (size_t)(c->batch * t * t));
    REQUIRE(host);
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t i = 0; i < t; i++)
            for (int64_t j = 0; j < t; j++)
                host[(b * t + i) * t + j] = (attention_token_real(c, b, j) ? 0.0 : -10000.0) +
                                            (reference_hidden(c, i, j) ? -10000.0 : 0.0);
    gc_tensor *bias = gc_from_host(host, GC_SHAPE(c->batch, 1, t, t), GC_F64, cpu);
    free(host);
    gc_tensor *cast = attention_on(bias, dtype, cpu);
    gc_tensor_release(bias);
    return cast;
}

/* The unfused path's probabilities after dropout, [B, H, T, T], and its context [B, H, T, Dh]. */
static gc_tensor *unfused_forward(const attention_case *c, const gc_tensor *q, const gc_tensor *k, const gc_tensor *v,
                                  const gc_tensor *bias, gc_tensor **dropped_probs) {
    int64_t b = c->batch, kvh = c->kv_heads, t = c->length, dh = c->head_dim, g = c->heads / c->kv_heads;
    gc_tensor *grouped = gc_reshape(q, GC_SHAPE(b * kvh, g * t, dh)), *keys = gc_reshape(k, GC_SHAPE(b * kvh, t, dh));
    gc_tensor *values = gc_reshape(v, GC_SHAPE(b * kvh, t, dh));
    gc_tensor *scores = gc_matmul(grouped, keys, false, true);
    gc_tensor *per_head = gc_reshape(scores, GC_SHAPE(b, c->heads, t, t));
    gc_tensor *probs = gc_softmax_scaled(per_head, 1 / sqrt((double)dh), bias);
    gc_tensor *dropped = c->dropout > 0 ? gc_dropout(probs, c->dropout, ATTENTION_SEED, ATTENTION_OFFSET)
                                        : gc_tensor_retain(probs);
    gc_tensor *flat = gc_reshape(dropped, GC_SHAPE(b * kvh, g * t, t));
    gc_tensor *context = gc_matmul(flat, values, false, false);
    gc_tensor *out = gc_reshape(context, GC_SHAPE(b, c->heads, t, dh));
    REQUIRE(out);
    if (dropped_probs) *dropped_probs = gc_tensor_retain(dropped);
    RELEASE(grouped, keys, values, scores, per_head, probs, dropped, flat, context);
    return out;
}

static attention_results unfused_run(const attention_case *c, const attention_inputs *in, gc_dtype dtype) {
    gc_tensor *q = attention_on(in->q, dtype, cpu), *k = attention_on(in->k, dtype, cpu);
    gc_tensor *v = attention_on(in->v, dtype, cpu), *g = attention_on(in->g, dtype, cpu);
    gc_tensor *bias = reference_bias(c, dtype);
    gc_set_requires_grad(q, true);
    gc_set_requires_grad(k, true);
    gc_set_requires_grad(v, true);
    gc_tensor *out = unfused_forward(c, q, k, v, bias, NULL);
    REQUIRE(gc_backward(&out, &g, 1) == GC_OK);
    attention_results r = {attention_host(out), attention_host(gc_grad(q)), attention_host(gc_grad(k)),
                           attention_host(gc_grad(v))};
    RELEASE(q, k, v, g, bias, out);
    return r;
}

static void test_against_unfused(void) {
    for (int i = 0; i < ATTENTION_CASES; i++) {
        const attention_case *c = &attention_cases[i];
        attention_inputs in = attention_make_inputs(c);
        for (int d = 0; d < 2; d++) {
            gc_dtype dtype = d ? GC_F32 : GC_F64;
            attention_results fused = attention_fused_run(c, &in, dtype, cpu), unfused = unfused_run(c, &in, dtype);
            char name[160];
            snprintf(name, sizeof name, "%s (%s)", c->name, gc_dtype_name(dtype));
            attention_expect_results(name, c, &fused, &unfused, d ? attention_f32_rtol(c) : F64_RTOL);
            attention_free_results(&fused);
            attention_free_results(&unfused);
        }
        attention_free_inputs(&in);
    }
}

/* With one-hot values (v_j = e_j, Dh = T) the context is the dropped probabilities
 * themselves: their zeros must be the unfused path's, element for element, and the kept
 * ones equal to f64 precision. */
static void test_dropout_mask(void) {
    const attention_case c = {"one-hot values", 2, 4, 2, 12, 12, RIGHT_PADDING, true, 0, 0.5};
    attention_inputs in = attention_make_inputs(&c);
    int64_t n_values = c.batch * c.kv_heads * c.length * c.head_dim;
    double *one_hot = calloc((size_t)n_values, sizeof *one_hot);
    REQUIRE(one_hot);
    for (int64_t r = 0; r < c.batch * c.kv_heads * c.length; r++) one_hot[r * c.head_dim + r % c.length] = 1;
    gc_tensor *v = gc_from_host(one_hot, GC_SHAPE(c.batch, c.kv_heads, c.length, c.head_dim), GC_F64, cpu);
    REQUIRE(v);
    gc_tensor *bias = reference_bias(&c, GC_F64), *dropped = NULL;
    gc_attention_fused_options o = attention_options(&c);
    gc_tensor *fused = gc_attention_fused(in.q, in.k, v, in.bias, &o);
    gc_tensor *unfused = unfused_forward(&c, in.q, in.k, v, bias, &dropped);
    double *got = attention_host(fused), *want = attention_host(dropped);
    int64_t n = gc_numel(dropped), zeros = 0, mismatched = 0;
    for (int64_t e = 0; e < n; e++) {
        zeros += want[e] == 0;
        mismatched += (got[e] == 0) != (want[e] == 0);
    }
    CHECK_MSG(mismatched == 0 && zeros > n / 4, "dropout: %lld of %lld zeros differ (%lld zeros)", (long long)mismatched,
              (long long)n, (long long)zeros);
    attention_expect_close("dropped probabilities", c.name, got, want, n, F64_RTOL);
    free(got);
    free(want);
    free(one_hot);
    RELEASE(v, bias, dropped, fused, unfused);
    attention_free_inputs(&in);
}

static gc_tensor *fused_op(gc_tensor *const *inputs, const void *context) {
    const attention_case *c = context;
    gc_attention_fused_options o = attention_options(c);
    return gc_attention_fused(inputs[0], inputs[1], inputs[2], inputs[3], &o);
}

/* Central differences in f64 (gradcheck.h's tolerance), with padding, causal, GQA and
 * dropout together, and a window without causal. */
static void test_gradcheck(void) {
    const attention_case cases[] = {{"gradcheck", 2, 4, 2, 5, 3, RIGHT_PADDING, true, 0, 0.25},
                                    {"gradcheck window", 1, 2, 1, 6, 4, LEFT_PADDING, false, 2, 0}};
    for (int i = 0; i < 2; i++) {
        attention_inputs in = attention_make_inputs(&cases[i]);
        gc_set_requires_grad(in.q, true);
        gc_set_requires_grad(in.k, true);
        gc_set_requires_grad(in.v, true);
        gc_test_gradcheck(cases[i].name, fused_op, (gc_tensor *[]){in.q, in.k, in.v, in.bias}, 4, &cases[i]);
        attention_free_inputs(&in);
    }
}

/* f16 and bf16 against f32 on the same (rounded) inputs: both compute in f32, and the 16-bit
 * results are rounded once to 2^-11 (f16) or 2^-8 (bf16) relative, the output before the
 * backward reads it (D = rowsum(dO o O)) too: within 4 roundings of the largest element. */
static void test_half_precision(void) {
    const attention_case *c = &attention_cases[8]; /* dropout, causal, padding, G 2 */
    gc_dtype halves[2] = {GC_F16, GC_BF16};
    double units[2] = {0x1p-11, 0x1p-8};
    for (int h = 0; h < 2; h++) {
        attention_inputs in = attention_make_inputs(c), rounded;
        gc_tensor **from[5] = {&in.q, &in.k, &in.v, &in.g, &in.bias}, **to[5] = {&rounded.q, &rounded.k, &rounded.v,
                                                                                &rounded.g, &rounded.bias};
        for (int t = 0; t < 5; t++) {
            gc_tensor *half = attention_on(*from[t], halves[h], cpu);
            *to[t] = attention_on(half, GC_F64, cpu);
            gc_tensor_release(half);
        }
        attention_results got = attention_fused_run(c, &rounded, halves[h], cpu);
        attention_results want = attention_fused_run(c, &rounded, GC_F32, cpu);
        attention_expect_results(gc_dtype_name(halves[h]), c, &got, &want, 4 * units[h]);
        attention_free_results(&got);
        attention_free_results(&want);
        attention_free_inputs(&in);
        attention_free_inputs(&rounded);
    }
}

/* The forward and backward bitwise the same with 1, 2 and 3 threads (tasks of uneven counts). */
static void test_thread_count(void) {
    const attention_case c = {"threads", 3, 4, 2, 130, 20, RIGHT_PADDING, true, 0, 0.2};
    attention_inputs in = attention_make_inputs(&c);
    attention_results first = {0};
    int threads_before = gc_cpu_threads();
    for (int threads = 1; threads <= 3; threads++) {
        gc_set_cpu_threads(threads);
        attention_results r = attention_fused_run(&c, &in, GC_F32, cpu);
        if (threads == 1) {
            first = r;
            continue;
        }
        int64_t nq = c.batch * c.heads * c.length * c.head_dim, nk = nq / (c.heads / c.kv_heads);
        CHECK_MSG(memcmp(r.out, first.out, sizeof(double) * (size_t)nq) == 0 &&
                      memcmp(r.dq, first.dq, sizeof(double) * (size_t)nq) == 0 &&
                      memcmp(r.dk, first.dk, sizeof(double) * (size_t)nk) == 0 &&
                      memcmp(r.dv, first.dv, sizeof(double) * (size_t)nk) == 0,
                  "%d threads differ from 1", threads);
        attention_free_results(&r);
    }
    gc_set_cpu_threads(threads_before);
    attention_free_results(&first);
    attention_free_inputs(&in);
}

/* The AVX2 kernels give the portable ones' bits (the same C, no contraction into FMA): the
 * output, the lse and the three gradients of an f32 case with dropout, causal and GQA. */
static void test_instruction_sets(void) {
    if (!gc_cpu_isa_available(GC_ISA_AVX2)) return;
    const attention_case c = {"instruction sets", 2, 4, 2, 70, 20, NO_MASK, true, 0, 0.2};
    attention_inputs in = attention_make_inputs(&c);
    gc_tensor *q = attention_on(in.q, GC_F32, cpu), *k = attention_on(in.k, GC_F32, cpu);
    gc_tensor *v = attention_on(in.v, GC_F32, cpu), *g = attention_on(in.g, GC_F32, cpu);
    gc_tensor *results[2][6];
    for (int variant = 0; variant < 2; variant++) {
        gc_tensor **r = results[variant]; /* out, lse, row_dot, dq, dk, dv */
        r[0] = gc_empty_like(q);
        r[1] = gc_empty(GC_SHAPE(c.batch, c.heads, c.length), GC_F32, cpu);
        r[2] = gc_empty(GC_SHAPE(c.batch, c.heads, c.length), GC_F32, cpu);
        r[3] = gc_empty_like(q);
        r[4] = gc_empty_like(k);
        r[5] = gc_empty_like(v);
        gc_attention_args a = {.q = gc_data(q), .k = gc_data(k), .v = gc_data(v), .batch = c.batch, .heads = c.heads,
                               .kv_heads = c.kv_heads, .length = c.length, .head_dim = c.head_dim, .dtype = GC_F32,
                               .scale = 0.25, .causal = true, .threshold = 3355444, .keep_scale = 1.25,
                               .seed = 9, .offset = 77, .out = gc_data(r[0]), .lse = gc_data(r[1]),
                               .grad_out = gc_data(g), .row_dot = gc_data(r[2]), .dq = gc_data(r[3]),
                               .dk = gc_data(r[4]), .dv = gc_data(r[5])};
        gc_cpu_isa isa = variant ? GC_ISA_AVX2 : GC_ISA_PORTABLE;
        gc_cpu_attention_forward_on(isa, &a);
        gc_cpu_attention_backward_on(isa, &a);
    }
    const char *names[6] = {"output", "lse", "row_dot", "dq", "dk", "dv"};
    for (int i = 0; i < 6; i++) {
        CHECK_MSG(memcmp(gc_data(results[0][i]), gc_data(results[1][i]), gc_nbytes(results[0][i])) == 0,
                  "instruction sets: the AVX2 %s differs from the portable one", names[i]);
        RELEASE(results[0][i], results[1][i]);
    }
    RELEASE(q, k, v, g);
    attention_free_inputs(&in);
}

/* The peak of a forward and backward at T = 512, Dh = 8: the [B, H, T, T] probabilities
 * would be 8 MiB in f32; everything the fused op holds (q, k, v, their gradients, the output
 * and the rows' statistics) is below a fifth of that. */
static void test_peak_memory(void) {
    const attention_case c = {"peak", 2, 4, 4, 512, 8, RIGHT_PADDING, true, 0, 0.1};
    attention_inputs in = attention_make_inputs(&c);
    size_t scores_bytes = (size_t)(c.batch * c.heads * c.length * c.length) * sizeof(float);
    gc_tensor *q = attention_on(in.q, GC_F32, cpu), *k = attention_on(in.k, GC_F32, cpu);
    gc_tensor *v = attention_on(in.v, GC_F32, cpu), *g = attention_on(in.g, GC_F32, cpu);
    gc_tensor *bias = attention_on(in.bias, GC_F32, cpu);
    gc_set_requires_grad(q, true);
    gc_set_requires_grad(k, true);
    gc_set_requires_grad(v, true);
    size_t before = gc_memory_get_stats(cpu).live_bytes;
    gc_memory_reset_peak(cpu);
    gc_attention_fused_options o = attention_options(&c);
    gc_tensor *out = gc_attention_fused(q, k, v, bias, &o);
    REQUIRE(out && gc_backward(&out, &g, 1) == GC_OK);
    size_t peak = gc_memory_get_stats(cpu).peak_bytes - before;
    CHECK_MSG(peak < scores_bytes / 5, "fused attention's peak %zu bytes is not below a fifth of the scores' %zu", peak,
              scores_bytes);
    RELEASE(q, k, v, g, bias, out);
    attention_free_inputs(&in);
}

/* The attention layer fused and composed: the same function, with the same dropout masks
 * (both take the [B, H, T, T] words of the default generator), to f64 rounding; causal
 * decoder-style (GQA, rotary) and BERT-style with padding. */
static void test_layer_paths(void) {
    const gc_attention_options decoder = {.kv_heads = 2, .causal = true, .rope_theta = 10000};
    const gc_attention_options *options[2] = {NULL, &decoder};
    for (int l = 0; l < 2; l++) {
        gc_attention layer;
        gc_generator init = {5, 0};
        REQUIRE(gc_attention_init(&layer, 16, 4, 0.2, options[l], GC_F64, cpu, &init) == GC_OK);
        gc_tensor *x = gc_normal(GC_SHAPE(3, 9, 16), GC_F64, cpu, 0, 1, 21, 0);
        const double mask_values[27] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0};
        gc_tensor *mask = gc_from_host(mask_values, GC_SHAPE(3, 9), GC_F64, cpu);
        REQUIRE(x && mask);
        double *results[2];
        for (int fused = 0; fused < 2; fused++) {
            gc_set_fused_attention(fused);
            gc_rng_context start = {{{7, 100}}};
            gc_rng_restore(&start);
            gc_tensor *y = gc_attention_forward(&layer, x, mask, true);
            results[fused] = attention_host(y);
            CHECK_MSG(gc_default_generator(cpu)->offset == 100 + 3 * 4 * 9 * 9,
                      "layer %d, fused %d: dropout took %llu words", l, fused,
                      (unsigned long long)(gc_default_generator(cpu)->offset - 100));
            gc_tensor_release(y);
        }
        attention_expect_close("layer output", l ? "decoder layer" : "BERT layer", results[1], results[0], 3 * 9 * 16,
                               F64_RTOL);
        free(results[0]);
        free(results[1]);
        RELEASE(x, mask);
        gc_attention_free(&layer);
    }
    gc_set_fused_attention(true);
}

static void kv_heads_not_dividing(void *unused) {
    (void)unused;
    gc_tensor *q = gc_zeros(GC_SHAPE(1, 3, 4, 2), GC_F32, cpu), *k = gc_zeros(GC_SHAPE(1, 2, 4, 2), GC_F32, cpu);
    gc_attention_fused(q, k, k, NULL, &(gc_attention_fused_options){.scale = 1});
}

static void bias_of_wrong_shape(void *unused) {
    (void)unused;
    gc_tensor *q = gc_zeros(GC_SHAPE(2, 2, 4, 2), GC_F32, cpu), *bias = gc_zeros(GC_SHAPE(2, 1, 1, 3), GC_F32, cpu);
    gc_attention_fused(q, q, q, bias, &(gc_attention_fused_options){.scale = 1});
}

static void negative_window(void *unused) {
    (void)unused;
    gc_tensor *q = gc_zeros(GC_SHAPE(1, 1, 4, 2), GC_F32, cpu);
    gc_attention_fused(q, q, q, NULL, &(gc_attention_fused_options){.scale = 1, .window = -1});
}

static void test_programmer_errors(void) {
    gc_test_expect_fatal(kv_heads_not_dividing, NULL, "attention_fused: q [1, 3, 4, 2] f32 cpu, k [1, 2, 4, 2] f32 cpu");
    gc_test_expect_fatal(bias_of_wrong_shape, NULL, "attention_fused: bias [2, 1, 1, 3] f32 cpu is not [1 or 2, 1, 1 or 4, 4]");
    gc_test_expect_fatal(negative_window, NULL, "attention_fused: scale 1 (finite), window -1");
}

int main(void) {
    GC_TEST_CASE(test_against_unfused);
    GC_TEST_CASE(test_dropout_mask);
    GC_TEST_CASE(test_gradcheck);
    GC_TEST_CASE(test_half_precision);
    GC_TEST_CASE(test_thread_count);
    GC_TEST_CASE(test_instruction_sets);
    GC_TEST_CASE(test_peak_memory);
    GC_TEST_CASE(test_layer_paths);
    GC_TEST_CASE(test_programmer_errors);
    return gc_test_result();
}
