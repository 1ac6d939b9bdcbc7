/* GradCache against the full batch: after one cached step every parameter gradient must
 * equal that of one plain step over the whole batch (norm-relative error <= 1e-5 in f32,
 * <= 1e-10 in f64), for separate and tied encoders, hard negatives, chunk sizes 1, uneven
 * and the whole batch, the last-chunk-graph option, and the functional API; dropout is on
 * unless stated, so these also prove that RNG replay gives the same masks. */
#include "check.h"
#include "mlp_encoder.h"

typedef struct scenario {
    const char *name;
    gc_dtype dtype;
    int64_t queries, passages;  /* passages = queries * (1 + hard negatives) */
    int64_t chunk_q, chunk_p;
    bool tied, keep_last_graph;
    double dropout;
} scenario;

static void run_scenario(const scenario *s) {
    mlp_encoder query_encoder = make_encoder(s->dtype, 10, s->dropout);
    mlp_encoder passage_encoder = make_encoder(s->dtype, 20, s->dropout);
    mlp_encoder *second = s->tied ? &query_encoder : &passage_encoder;
    gc_tensor *xq = gc_uniform(GC_SHAPE(s->queries, IN), s->dtype, gc_cpu(), -1, 1, 30, 0);
    gc_tensor *xp = gc_uniform(GC_SHAPE(s->passages, IN), s->dtype, gc_cpu(), -1, 1, 31, 0);
    REQUIRE(xq && xp);
    gc_batch inputs[2] = {{1, {"x"}, {xq}}, {1, {"x"}, {xp}}};
    gc_cache_config config = {
        .n_models = 2,
        .models = {{&query_encoder, encoder_forward, s->chunk_q, &query_encoder.params},
                   {second, encoder_forward, s->chunk_p, &second->params}},
        .loss = {.forward = infonce},
        .keep_last_graph = s->keep_last_graph,
    };
    gc_cache *cache = gc_cache_new(&config);
    mlp_encoder *encoders[2] = {&query_encoder, &passage_encoder};
    int n_encoders = s->tied ? 1 : 2;

    /* The same generator state for both steps: the same dropout masks. */
    gc_manual_seed(7);
    double cached_loss = 0, full_loss = 0;
    gc_cache_report report;
    REQUIRE(gc_cache_step(cache, inputs, &cached_loss, &report) == GC_OK);
    int64_t n;
    double *cached = collect_grads(encoders, n_encoders, &n);
    gc_param_list_zero_grad(&query_encoder.params);
    gc_param_list_zero_grad(&passage_encoder.params);
    gc_manual_seed(7);
    REQUIRE(gc_cache_full_batch_step(cache, inputs, &full_loss) == GC_OK);
    double *full = collect_grads(encoders, n_encoders, &n);

    /* f32: the two steps sum the same terms in different orders (chunked matmuls, a cat);
     * ~1e-7 per rounding, well under 1e-5 after the few ops here. f64: the same at 1e-16. */
    double tolerance = s->dtype == GC_F64 ? 1e-10 : 1e-5;
    double error = relative_error(cached, full, n);
    CHECK_MSG(error <= tolerance, "%s: gradient relative error %.3g > %.0e", s->name, error, tolerance);
    CHECK_MSG(fabs(cached_loss - full_loss) <= tolerance * fabs(full_loss), "%s: loss %.9g vs %.9g", s->name,
              cached_loss, full_loss);
    CHECK(report.cache_bytes == 2 * gc_dtype_size(s->dtype) * (size_t)(DIM * (s->queries + s->passages)));
    CHECK(report.chunk_sizes[0] == s->chunk_q && report.chunk_sizes[1] == s->chunk_p);
    free(cached);
    free(full);
    gc_cache_free(cache);
    gc_tensor_release(xq);
    gc_tensor_release(xp);
    free_encoder(&query_encoder);
    free_encoder(&passage_encoder);
}

/* Without dropout the cached step must match one forward over the unchunked batch too. */
static void test_against_unchunked(void) {
    mlp_encoder q = make_encoder(GC_F32, 40, 0), p = make_encoder(GC_F32, 50, 0);
    gc_tensor *xq = gc_uniform(GC_SHAPE(10, IN), GC_F32, gc_cpu(), -1, 1, 60, 0);
    gc_tensor *xp = gc_uniform(GC_SHAPE(10, IN), GC_F32, gc_cpu(), -1, 1, 61, 0);
    gc_batch inputs[2] = {{1, {"x"}, {xq}}, {1, {"x"}, {xp}}};
    gc_cache_config chunked = {.n_models = 2,
                               .models = {{&q, encoder_forward, 3, &q.params}, {&p, encoder_forward, 4, &p.params}},
                               .loss = {.forward = infonce}};
    gc_cache_config whole = chunked;
    whole.models[0].chunk_size = whole.models[1].chunk_size = 10;
    gc_cache *cache = gc_cache_new(&chunked), *plain = gc_cache_new(&whole);
    double loss;
    REQUIRE(gc_cache_step(cache, inputs, &loss, NULL) == GC_OK);
    mlp_encoder *encoders[2] = {&q, &p};
    int64_t n;
    double *cached = collect_grads(encoders, 2, &n);
    gc_param_list_zero_grad(&q.params);
    gc_param_list_zero_grad(&p.params);
    REQUIRE(gc_cache_full_batch_step(plain, inputs, &loss) == GC_OK);
    double *full = collect_grads(encoders, 2, &n);
    double error = relative_error(cached, full, n);
    CHECK_MSG(error <= 1e-5, "against one unchunked forward: relative error %.3g", error);
    /* And the verify mode reports the same agreement per parameter. */
    double worst = 1, per_param[6];
    REQUIRE(gc_cache_verify(cache, inputs, 1e-12, &worst, per_param, 6) == GC_OK);
    CHECK_MSG(worst <= 1e-5, "verify: %.3g", worst);
    free(cached);
    free(full);
    gc_cache_free(cache);
    gc_cache_free(plain);
    gc_tensor_release(xq);
    gc_tensor_release(xp);
    free_encoder(&q);
    free_encoder(&p);
}

/* keep_last_graph saves one forward per model: calls = 2 chunks' count - 1 per model. */
static void test_keep_last_graph_saves_a_forward(void) {
    for (int keep = 0; keep < 2; keep++) {
        mlp_encoder q = make_encoder(GC_F32, 70, 0.2), p = make_encoder(GC_F32, 80, 0.2);
        gc_tensor *xq = gc_uniform(GC_SHAPE(8, IN), GC_F32, gc_cpu(), -1, 1, 90, 0);
        gc_tensor *xp = gc_uniform(GC_SHAPE(8, IN), GC_F32, gc_cpu(), -1, 1, 91, 0);
        gc_batch inputs[2] = {{1, {"x"}, {xq}}, {1, {"x"}, {xp}}};
        gc_cache_config config = {.n_models = 2,
                                  .models = {{&q, encoder_forward, 2, &q.params}, {&p, encoder_forward, 4, &p.params}},
                                  .loss = {.forward = infonce},
                                  .keep_last_graph = keep};
        gc_cache *cache = gc_cache_new(&config);
        double loss;
        REQUIRE(gc_cache_step(cache, inputs, &loss, NULL) == GC_OK);
        CHECK_MSG(q.calls == 2 * 4 - keep && p.calls == 2 * 2 - keep, "keep %d: %d and %d forward calls", keep, q.calls,
                  p.calls);
        gc_cache_free(cache);
        gc_tensor_release(xq);
        gc_tensor_release(xp);
        free_encoder(&q);
        free_encoder(&p);
    }
}

/* The functional API over small batches equals one step over their concatenation. */
static gc_tensor *cat_and_infonce(gc_tensor *const *query_leaves, gc_tensor *const *passage_leaves, int count) {
    gc_tensor *q = gc_cat0(query_leaves, count), *p = gc_cat0(passage_leaves, count);
    gc_tensor *loss = infonce((gc_tensor *[]){q, p}, 2, NULL);
    gc_tensor_release(q);
    gc_tensor_release(p);
    return loss;
}

static void test_functional_api(void) {
    enum { BATCHES = 3, ROWS = 4 };
    mlp_encoder q = make_encoder(GC_F64, 100, 0.1), p = make_encoder(GC_F64, 110, 0.1);
    gc_tensor *xq[BATCHES], *xp[BATCHES], *rq[BATCHES], *rp[BATCHES];
    gc_closure *cq[BATCHES], *cp[BATCHES];
    gc_manual_seed(3);
    for (int k = 0; k < BATCHES; k++) {
        xq[k] = gc_uniform(GC_SHAPE(ROWS, IN), GC_F64, gc_cpu(), -1, 1, 120 + (uint64_t)k, 0);
        xp[k] = gc_uniform(GC_SHAPE(ROWS, IN), GC_F64, gc_cpu(), -1, 1, 130 + (uint64_t)k, 0);
        rq[k] = gc_cached_forward(&q, encoder_forward, &(gc_batch){1, {"x"}, {xq[k]}}, NULL, NULL, &cq[k]);
        rp[k] = gc_cached_forward(&p, encoder_forward, &(gc_batch){1, {"x"}, {xp[k]}}, NULL, NULL, &cp[k]);
        REQUIRE(rq[k] && rp[k] && gc_requires_grad(rq[k]) && gc_is_leaf(rq[k]));
    }
    gc_tensor *loss = cat_and_infonce(rq, rp, BATCHES);
    REQUIRE(gc_backward(&loss, NULL, 1) == GC_OK);
    for (int k = 0; k < BATCHES; k++) {
        REQUIRE(gc_closure_run(cq[k], rq[k]) == GC_OK);
        REQUIRE(gc_closure_run(cp[k], rp[k]) == GC_OK);
    }
    mlp_encoder *encoders[2] = {&q, &p};
    int64_t n;
    double *cached = collect_grads(encoders, 2, &n);
    gc_param_list_zero_grad(&q.params);
    gc_param_list_zero_grad(&p.params);
    /* The reference: the same forwards, in the same order (so the same masks), with graphs. */
    gc_manual_seed(3);
    gc_tensor *gq[BATCHES], *gp[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        gq[k] = encoder_forward(&q, &(gc_batch){1, {"x"}, {xq[k]}});
        gp[k] = encoder_forward(&p, &(gc_batch){1, {"x"}, {xp[k]}});
    }
    gc_tensor *reference = cat_and_infonce(gq, gp, BATCHES);
    REQUIRE(gc_backward(&reference, NULL, 1) == GC_OK);
    double *full = collect_grads(encoders, 2, &n);
    double error = relative_error(cached, full, n);
    CHECK_MSG(error <= 1e-10, "functional API: relative error %.3g", error);
    CHECK_NEAR(gc_item(loss), gc_item(reference), 0, 1e-12);
    for (int k = 0; k < BATCHES; k++) {
        gc_tensor *all[] = {xq[k], xp[k], rq[k], rp[k], gq[k], gp[k]};
        for (int i = 0; i < 6; i++) gc_tensor_release(all[i]);
        gc_closure_free(cq[k]);
        gc_closure_free(cp[k]);
    }
    gc_tensor_release(loss);
    gc_tensor_release(reference);
    free(cached);
    free(full);
    free_encoder(&q);
    free_encoder(&p);
}

/* RNG replay reproduces the dropout masks bitwise: a model that logs, at each call, the
 * mask of a dropout it draws before running its encoder. */
typedef struct logging_model {
    mlp_encoder *encoder;
    int calls;
    unsigned char masks[16][8 * 16]; /* [call][row * 16 + column]: 1 where dropout kept */
} logging_model;

static gc_tensor *logging_forward(void *state, const gc_batch *chunk) {
    logging_model *model = state;
    int64_t rows = chunk->tensors[0]->shape[0];
    REQUIRE(rows <= 8 && model->calls < 16);
    gc_tensor *ones = gc_ones(GC_SHAPE(rows, 16), GC_F32, gc_cpu());
    gc_tensor *dropped = gc_nn_dropout(ones, 0.5, true);
    float values[8 * 16];
    gc_copy_to_host(dropped, values);
    for (int64_t i = 0; i < rows * 16; i++) model->masks[model->calls][i] = values[i] != 0;
    model->calls++;
    gc_tensor_release(ones);
    gc_tensor_release(dropped);
    return encoder_forward(model->encoder, chunk);
}

static void test_replay_reproduces_masks(void) {
    mlp_encoder q = make_encoder(GC_F32, 150, 0.3), p = make_encoder(GC_F32, 160, 0.3);
    logging_model lq = {.encoder = &q}, lp = {.encoder = &p};
    gc_tensor *xq = gc_uniform(GC_SHAPE(9, IN), GC_F32, gc_cpu(), -1, 1, 170, 0);
    gc_tensor *xp = gc_uniform(GC_SHAPE(9, IN), GC_F32, gc_cpu(), -1, 1, 171, 0);
    gc_batch inputs[2] = {{1, {"x"}, {xq}}, {1, {"x"}, {xp}}};
    gc_cache_config config = {.n_models = 2,
                              .models = {{&lq, logging_forward, 4, NULL}, {&lp, logging_forward, 3, NULL}},
                              .loss = {.forward = infonce}};
    gc_cache *cache = gc_cache_new(&config);
    double loss;
    REQUIRE(gc_cache_step(cache, inputs, &loss, NULL) == GC_OK);
    /* 3 chunks of the queries (4, 4, 1 rows) and 3 of the passages, each run twice. */
    CHECK(lq.calls == 6 && lp.calls == 6);
    const int64_t q_rows[3] = {4, 4, 1}, p_rows[3] = {3, 3, 3};
    for (int c = 0; c < 3; c++) {
        CHECK_MSG(memcmp(lq.masks[c], lq.masks[3 + c], (size_t)(q_rows[c] * 16)) == 0, "query chunk %d: masks differ", c);
        CHECK_MSG(memcmp(lp.masks[c], lp.masks[3 + c], (size_t)(p_rows[c] * 16)) == 0, "passage chunk %d: masks differ", c);
    }
    CHECK(memcmp(lq.masks[0], lq.masks[1], 4 * 16) != 0); /* the stream moves on between chunks */
    gc_cache_free(cache);
    gc_tensor_release(xq);
    gc_tensor_release(xp);
    free_encoder(&q);
    free_encoder(&p);
}

/* A tied text encoder (one encoder for queries and passages) in f64, dropout on, padded
 * rows and hard negatives: the cached step against the plain one. */
static gc_tensor *text_forward(void *state, const gc_batch *chunk) {
    return gc_text_encoder_forward(state, chunk->tensors[0], chunk->tensors[1], true);
}

static void test_tied_text_encoder(void) {
    gc_text_encoder_config config = {.vocab = 30, .max_length = 6, .dim = 8, .heads = 2, .layers = 2, .hidden = 16,
                                     .projection = 4, .dropout = 0.1, .activation = GC_ACT_GELU_ERF,
                                     .pooling = GC_POOL_MEAN, .dtype = GC_F64};
    gc_text_encoder encoder;
    gc_generator init = {5, 0};
    REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
    gc_param_list params = {0};
    gc_text_encoder_params(&encoder, "", &params);
    gc_tensor *q_uniform = gc_uniform(GC_SHAPE(5, 6), GC_F32, gc_cpu(), 0, 30, 180, 0);
    gc_tensor *p_uniform = gc_uniform(GC_SHAPE(10, 6), GC_F32, gc_cpu(), 0, 30, 181, 0);
    gc_tensor *q_ids = gc_cast(q_uniform, GC_I32), *p_ids = gc_cast(p_uniform, GC_I32);
    gc_tensor *q_mask = gc_ones(GC_SHAPE(5, 6), GC_F64, gc_cpu()), *p_mask = gc_ones(GC_SHAPE(10, 6), GC_F64, gc_cpu());
    REQUIRE(q_ids && p_ids && q_mask && p_mask);
    double *mask_values = gc_data(p_mask);
    for (int t = 3; t < 6; t++) mask_values[2 * 6 + t] = 0; /* passage 2 has 3 padding tokens */
    gc_batch inputs[2] = {{2, {"ids", "mask"}, {q_ids, q_mask}}, {2, {"ids", "mask"}, {p_ids, p_mask}}};
    gc_contrastive_options options = {GC_SIMILARITY_COSINE, 0.1, NULL, GC_LOSS_MEAN}; /* 1 hard negative each */
    gc_cache_config cache_config = {.n_models = 2,
                                    .models = {{&encoder, text_forward, 2, &params}, {&encoder, text_forward, 3, &params}},
                                    .loss = gc_contrastive_loss_fn(&options)};
    gc_cache *cache = gc_cache_new(&cache_config);
    gc_manual_seed(9);
    double worst = 1;
    REQUIRE(gc_cache_verify(cache, inputs, 1e-12, &worst, NULL, 0) == GC_OK);
    CHECK_MSG(worst <= 1e-10, "tied text encoder: largest relative gradient difference %.3g", worst);
    gc_cache_free(cache);
    RELEASE(q_uniform, p_uniform, q_ids, p_ids, q_mask, p_mask);
    gc_param_list_free(&params);
    gc_text_encoder_free(&encoder);
}

int main(void) {
    const scenario scenarios[] = {
        {"two encoders, f32", GC_F32, 12, 12, 4, 5, false, false, 0.1},
        {"two encoders, f64", GC_F64, 12, 12, 4, 5, false, false, 0.1},
        {"tied encoder", GC_F32, 12, 12, 5, 3, true, false, 0.1},
        {"tied encoder, f64", GC_F64, 12, 12, 5, 3, true, false, 0.1},
        {"hard negatives (3 per query)", GC_F64, 6, 24, 4, 7, false, false, 0.1},
        {"chunk 1", GC_F64, 6, 6, 1, 1, false, false, 0.1},
        {"chunk = batch", GC_F64, 6, 6, 6, 6, false, false, 0.1},
        {"uneven last chunk", GC_F64, 10, 10, 4, 3, false, false, 0.1},
        {"keep last graph", GC_F64, 10, 10, 4, 3, false, true, 0.1},
        {"keep last graph, tied", GC_F32, 10, 10, 4, 3, true, true, 0.1},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++) run_scenario(&scenarios[i]);
    test_against_unchunked();
    test_keep_last_graph_saves_a_forward();
    test_functional_api();
    test_replay_reproduces_masks();
    test_tied_text_encoder();
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == 0);
    return gc_test_result();
}
