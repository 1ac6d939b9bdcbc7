/* Memory of a GradCache step. A model whose activations dominate (a wide MLP):
 *  - the peak of a cached step at batch 1024 with chunks of 16 stays within 1.1 x the peak
 *    of a plain step at batch 16, plus the cache (representations and their gradients) and
 *    the loss's own working memory (its B x B scores and their gradients), each measured;
 *  - automatic chunk sizing finds chunks that fit under a limit the plain step exceeds, the
 *    step succeeds with the plain step's gradients, and nothing leaks. */
#include "check.h"

#define IN 32
#define HIDDEN 1024
#define DIM 32

static const gc_device cpu = {GC_DEVICE_CPU, 0};

typedef struct wide_mlp {
    gc_tensor *w1; /* [IN, HIDDEN] */
    gc_tensor *w2; /* [HIDDEN, DIM] */
    gc_param_list params;
} wide_mlp;

static wide_mlp make_mlp(uint64_t seed) {
    wide_mlp m = {0};
    m.w1 = gc_uniform(GC_SHAPE(IN, HIDDEN), GC_F32, cpu, -0.2, 0.2, seed, 0);
    m.w2 = gc_uniform(GC_SHAPE(HIDDEN, DIM), GC_F32, cpu, -0.05, 0.05, seed + 1, 0);
    REQUIRE(m.w1 && m.w2);
    gc_set_requires_grad(m.w1, true);
    gc_set_requires_grad(m.w2, true);
    gc_param_list_add(&m.params, "", "w1", m.w1, false);
    gc_param_list_add(&m.params, "", "w2", m.w2, false);
    return m;
}

static void free_mlp(wide_mlp *m) {
    gc_tensor_release(m->w1);
    gc_tensor_release(m->w2);
    gc_param_list_free(&m->params);
}

static gc_tensor *mlp_forward(void *state, const gc_batch *chunk) {
    wide_mlp *m = state;
    gc_tensor *h = gc_matmul(chunk->tensors[0], m->w1, false, false);
    gc_tensor *a = gc_gelu_tanh(h);
    gc_tensor *d = gc_nn_dropout(a, 0.1, true);
    gc_tensor *out = gc_matmul(d, m->w2, false, false);
    gc_tensor_release(h);
    gc_tensor_release(a);
    gc_tensor_release(d);
    return out;
}

/* In-batch InfoNCE, dot products, query i's positive passage i (temperature 1). */
static gc_tensor *infonce(gc_tensor *const *reps, int count, void *args) {
    (void)count;
    (void)args;
    int64_t n = reps[0]->shape[0];
    gc_tensor *scores = gc_matmul(reps[0], reps[1], false, true);
    gc_tensor *log_probs = gc_log_softmax(scores);
    gc_tensor *eye_values = gc_zeros(GC_SHAPE(n, n), GC_F32, cpu);
    REQUIRE(eye_values);
    float *eye = gc_data(eye_values);
    for (int64_t i = 0; i < n; i++) eye[i * n + i] = 1;
    gc_tensor *picked = gc_mul(log_probs, eye_values);
    gc_tensor *total = gc_sum_all(picked);
    gc_tensor *loss = gc_mul_scalar(total, -1.0 / (double)n);
    gc_tensor *temporaries[] = {scores, log_probs, eye_values, picked, total};
    for (int i = 0; i < 5; i++) gc_tensor_release(temporaries[i]);
    return loss;
}

typedef struct setup {
    wide_mlp q, p;
    gc_tensor *xq, *xp; /* [batch, IN] */
    gc_batch inputs[2];
} setup;

static setup make_setup(int64_t batch) {
    setup s = {.q = make_mlp(1), .p = make_mlp(3)};
    s.xq = gc_uniform(GC_SHAPE(batch, IN), GC_F32, cpu, -1, 1, 5, 0);
    s.xp = gc_uniform(GC_SHAPE(batch, IN), GC_F32, cpu, -1, 1, 6, 0);
    REQUIRE(s.xq && s.xp);
    s.inputs[0] = (gc_batch){1, {"x"}, {s.xq}};
    s.inputs[1] = (gc_batch){1, {"x"}, {s.xp}};
    return s;
}

static void free_setup(setup *s) {
    gc_tensor_release(s->xq);
    gc_tensor_release(s->xp);
    free_mlp(&s->q);
    free_mlp(&s->p);
}

static gc_cache *make_cache(setup *s, int64_t chunk, bool auto_chunk) {
    gc_cache_config config = {.n_models = 2,
                              .models = {{&s->q, mlp_forward, chunk, &s->q.params}, {&s->p, mlp_forward, chunk, &s->p.params}},
                              .loss = {.forward = infonce},
                              .auto_chunk = auto_chunk};
    return gc_cache_new(&config);
}

/* The peak live bytes of one step (the cached step, or the plain one when plain). */
static size_t step_peak(setup *s, int64_t chunk, bool plain) {
    gc_cache *cache = make_cache(s, chunk, false);
    gc_param_list_zero_grad(&s->q.params);
    gc_param_list_zero_grad(&s->p.params);
    gc_memory_reset_peak(cpu);
    double loss;
    REQUIRE((plain ? gc_cache_full_batch_step(cache, s->inputs, &loss) : gc_cache_step(cache, s->inputs, &loss, NULL)) ==
            GC_OK);
    size_t peak = gc_memory_get_stats(cpu).peak_bytes;
    gc_cache_free(cache);
    return peak;
}

/* The loss's own working memory at a batch: its peak above the two representations. */
static size_t loss_working_memory(int64_t batch) {
    gc_tensor *q = gc_uniform(GC_SHAPE(batch, DIM), GC_F32, cpu, -1, 1, 7, 0);
    gc_tensor *p = gc_uniform(GC_SHAPE(batch, DIM), GC_F32, cpu, -1, 1, 8, 0);
    gc_set_requires_grad(q, true);
    gc_set_requires_grad(p, true);
    size_t base = gc_memory_get_stats(cpu).live_bytes;
    gc_memory_reset_peak(cpu);
    gc_tensor *loss = infonce((gc_tensor *[]){q, p}, 2, NULL);
    REQUIRE(loss && gc_backward(&loss, NULL, 1) == GC_OK);
    size_t working = gc_memory_get_stats(cpu).peak_bytes - base;
    gc_tensor_release(loss);
    gc_tensor_release(q);
    gc_tensor_release(p);
    return working;
}

static void test_flat_memory(void) {
    setup small = make_setup(16);
    size_t plain_16 = step_peak(&small, 16, true);
    free_setup(&small);
    setup large = make_setup(1024);
    size_t cached_1024 = step_peak(&large, 16, false);
    size_t plain_1024 = step_peak(&large, 1024, true);
    free_setup(&large);
    size_t representations = 2 * 1024 * DIM * sizeof(float);
    size_t loss = loss_working_memory(1024); /* includes the representations' gradients */
    size_t bound = (size_t)(1.1 * (double)plain_16) + representations + loss;
    fprintf(stderr, "peak bytes: plain@16 %zu, cached@1024/16 %zu, plain@1024 %zu; bound %zu "
                    "(1.1 x plain@16 + representations %zu + loss working memory %zu)\n",
            plain_16, cached_1024, plain_1024, bound, representations, loss);
    CHECK_MSG(cached_1024 <= bound, "cached step peak %zu > bound %zu", cached_1024, bound);
    /* Apart from the loss (the same in both), far below the plain step at the same batch. */
    CHECK_MSG(cached_1024 - loss < (plain_1024 - loss) / 8, "beyond the loss: cached %zu, plain %zu", cached_1024 - loss,
              plain_1024 - loss);
}

static double *grads_of(setup *s, int64_t *n) {
    int64_t total = gc_param_list_numel(&s->q.params) + gc_param_list_numel(&s->p.params), at = 0;
    double *values = malloc(sizeof(double) * (size_t)total);
    REQUIRE(values);
    gc_param_list *lists[2] = {&s->q.params, &s->p.params};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < lists[l]->count; i++) {
            REQUIRE(gc_grad(lists[l]->items[i].tensor));
            gc_to_host_f64(gc_grad(lists[l]->items[i].tensor), values + at);
            at += gc_numel(lists[l]->items[i].tensor);
        }
    *n = total;
    return values;
}

static void test_automatic_chunk_size(void) {
    const int64_t batch = 256;
    setup s = make_setup(batch);
    size_t plain = step_peak(&s, batch, true), chunked = step_peak(&s, 32, false);
    REQUIRE(chunked < plain);
    gc_param_list_zero_grad(&s.q.params);
    gc_param_list_zero_grad(&s.p.params);
    size_t live_before = gc_memory_get_stats(cpu).live_bytes;

    /* The reference gradients, without a limit. */
    gc_manual_seed(11);
    double loss_reference, loss;
    gc_cache *reference = make_cache(&s, batch, false);
    gc_param_list_zero_grad(&s.q.params);
    gc_param_list_zero_grad(&s.p.params);
    REQUIRE(gc_cache_full_batch_step(reference, s.inputs, &loss_reference) == GC_OK);
    int64_t n;
    double *want = grads_of(&s, &n);
    gc_param_list_zero_grad(&s.q.params);
    gc_param_list_zero_grad(&s.p.params);

    /* Under a limit between the two peaks the plain step fails ... */
    gc_memory_set_limit(cpu, (plain + chunked) / 2);
    gc_clear_error();
    CHECK(gc_cache_full_batch_step(reference, s.inputs, &loss) == GC_ERR_MEM_LIMIT);
    gc_param_list_zero_grad(&s.q.params);
    gc_param_list_zero_grad(&s.p.params);
    CHECK(gc_memory_get_stats(cpu).live_bytes == live_before); /* ... leaking nothing */

    /* ... and the automatic step, starting from chunks of the whole batch, finds ones that fit. */
    gc_cache *automatic = make_cache(&s, batch, true);
    gc_cache_report report;
    gc_manual_seed(11);
    gc_status status = gc_cache_step(automatic, s.inputs, &loss, &report);
    gc_memory_set_limit(cpu, 0);
    CHECK_MSG(status == GC_OK, "automatic step: %s", gc_last_error());
    CHECK(report.retries >= 1 && report.chunk_sizes[0] < batch && report.chunk_sizes[1] < batch);
    fprintf(stderr, "automatic chunk size: %lld after %d retries\n", (long long)report.chunk_sizes[0], report.retries);
    double *got = grads_of(&s, &n);
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        ref += want[i] * want[i];
    }
    CHECK_MSG(sqrt(diff) / sqrt(ref) <= 1e-5, "automatic step gradients: relative error %.3g", sqrt(diff) / sqrt(ref));
    CHECK_NEAR(loss, loss_reference, 0, 1e-5);
    free(want);
    free(got);
    gc_cache_free(reference);
    gc_cache_free(automatic);
    gc_param_list_zero_grad(&s.q.params);
    gc_param_list_zero_grad(&s.p.params);
    CHECK(gc_memory_get_stats(cpu).live_bytes == live_before);
    free_setup(&s);
}

int main(void) {
    test_flat_memory();
    test_automatic_chunk_size();
    CHECK(gc_memory_get_stats(cpu).live_bytes == 0);
    return gc_test_result();
}
