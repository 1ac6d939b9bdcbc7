/* Length-sorted chunks (gc_cache_config.sort_by, gradcache/cache.h): each model's rows chunked
 * longest first, both passes over the very same chunks, and the padding cut per chunk falls;
 * the representations reach the loss, and the cache comes back, in the batch's order, so that
 * a sorted GradCache step's gradients equal the plain step over the whole padded batch (f64 to
 * 1e-10: only the order of sums differs), with and without a token budget, each model sorting
 * by its own lengths; with dropout, equal to the plain step that draws the same chunks' masks. */
#include "check.h"

#define ROWS 8
#define WIDTH 6

/* Queries of 1 and 6 tokens taking turns; passages of other lengths in another order, so each
 * side's sort is its own. */
static const int64_t query_lengths[ROWS] = {1, 6, 1, 6, 1, 6, 1, 6};
static const int64_t passage_lengths[ROWS] = {3, 3, 5, 2, 6, 1, 4, 2};

/* ids [ROWS, WIDTH] i32 (row r's token t: 10 r + t, so a chunk tells its rows) and its mask. */
static gc_batch make_batch(const int64_t *lengths, gc_dtype mask_dtype) {
    int32_t ids[ROWS * WIDTH];
    double mask[ROWS * WIDTH];
    for (int r = 0; r < ROWS; r++)
        for (int t = 0; t < WIDTH; t++) ids[r * WIDTH + t] = 10 * r + t, mask[r * WIDTH + t] = t < lengths[r];
    gc_tensor *mask_f64 = gc_from_host(mask, GC_SHAPE(ROWS, WIDTH), GC_F64, gc_cpu());
    gc_batch batch = {2,
                      {"ids", "mask"},
                      {gc_from_host(ids, GC_SHAPE(ROWS, WIDTH), GC_I32, gc_cpu()), gc_cast(mask_f64, mask_dtype)}};
    gc_tensor_release(mask_f64);
    return batch;
}

/* --- the chunks a model is given, recorded call by call --- */

#define MAX_CALLS 64

typedef struct recorder {
    int calls;
    int64_t rows[MAX_CALLS][ROWS]; /* each call's batch rows, in the chunk's order */
    int64_t count[MAX_CALLS], width[MAX_CALLS];
} recorder;

/* The representation of each row: its first id and its real tokens, as f64 [rows, 2]; in the
 * second pass a leaf, so that its backward has a gradient to reach. */
static gc_tensor *recording_forward(void *state, const gc_batch *chunk) {
    recorder *log = state;
    const gc_tensor *ids = chunk->tensors[0];
    REQUIRE(log->calls < MAX_CALLS);
    int32_t values[ROWS * WIDTH];
    double mask[ROWS * WIDTH], rep[ROWS * 2];
    gc_copy_to_host(ids, values);
    gc_to_host_f64(chunk->tensors[1], mask);
    int64_t rows = ids->shape[0], width = ids->shape[1];
    log->count[log->calls] = rows, log->width[log->calls] = width;
    for (int64_t r = 0; r < rows; r++) {
        log->rows[log->calls][r] = values[r * width] / 10;
        rep[2 * r] = values[r * width], rep[2 * r + 1] = 0;
        for (int64_t t = 0; t < width; t++) rep[2 * r + 1] += mask[r * width + t];
    }
    log->calls++;
    gc_tensor *out = gc_from_host(rep, GC_SHAPE(rows, 2), GC_F64, gc_cpu());
    if (out && gc_grad_enabled()) gc_set_requires_grad(out, true);
    return out;
}

/* A loss that checks the rows reach it in the batch's order (row r: first id 10 r, its real
 * tokens), then sums the representations: every row's gradient is 1 wherever it sits. */
static gc_tensor *order_checking_loss(gc_tensor *const *reps, int count, void *args) {
    const int64_t *const *lengths = args;
    for (int m = 0; m < count; m++) {
        double values[ROWS * 2];
        REQUIRE(reps[m]->shape[0] == ROWS);
        gc_to_host_f64(reps[m], values);
        for (int r = 0; r < ROWS; r++)
            CHECK_MSG(values[2 * r] == 10 * r && values[2 * r + 1] == (double)lengths[m][r],
                      "model %d: the loss's row %d is (%g, %g), want (%d, %lld)", m, r, values[2 * r],
                      values[2 * r + 1], 10 * r, (long long)lengths[m][r]);
    }
    gc_tensor *sums[GC_CACHE_MAX_MODELS];
    for (int m = 0; m < count; m++) sums[m] = gc_sum_all(reps[m]);
    gc_tensor *both = sums[0] && sums[1] ? gc_add(sums[0], sums[1]) : NULL; /* NULL: out of memory */
    RELEASE(sums[0], sums[1]);
    return both;
}

/* Chunks of 2 rows, each cut to its longest text (a budget no chunk reaches): the rows of each
 * first-pass chunk are of one length, both passes take the same rows, and the padded tokens
 * computed fall from 48 (every chunk holds a 6-token query) to the 28 real ones. */
static void test_chunks_sorted(void) {
    gc_batch inputs[2] = {make_batch(query_lengths, GC_F32), make_batch(passage_lengths, GC_F32)};
    const int64_t *lengths[2] = {query_lengths, passage_lengths};
    gc_token_budget cut = {INT64_MAX, "mask"};
    for (int sorted = 0; sorted < 2; sorted++) {
        recorder logs[2] = {{0}};
        gc_cache_config config = {.n_models = 2,
                                  .models = {{&logs[0], recording_forward, 2, NULL}, {&logs[1], recording_forward, 2, NULL}},
                                  .loss = {.forward = order_checking_loss, .args = lengths},
                                  .split = gc_split_by_tokens, .user = &cut, .sort_by = sorted ? "mask" : NULL};
        gc_cache *cache = gc_cache_new(&config);
        double loss = 0;
        REQUIRE(gc_cache_step(cache, inputs, &loss, NULL) == GC_OK);
        for (int m = 0; m < 2; m++) {
            recorder *log = &logs[m];
            int chunks = log->calls / 2;
            CHECK_MSG(log->calls == 2 * 4, "model %d: %d calls, want 8 (4 chunks, twice)", m, log->calls);
            int64_t padded = 0, previous_longest = INT64_MAX;
            for (int c = 0; c < chunks; c++) {
                /* the second pass (graph, dropout replayed) on the first pass's rows */
                CHECK(log->count[c] == log->count[chunks + c] && log->width[c] == log->width[chunks + c]);
                for (int64_t r = 0; r < log->count[c]; r++) CHECK(log->rows[c][r] == log->rows[chunks + c][r]);
                padded += log->count[c] * log->width[c];
                if (!sorted) continue;
                /* longest first */
                for (int64_t r = 0; r < log->count[c]; r++) {
                    int64_t row = log->rows[c][r], length = lengths[m][row];
                    CHECK_MSG(length <= previous_longest, "model %d chunk %d row %lld: %lld tokens after %lld", m, c,
                              (long long)row, (long long)length, (long long)previous_longest);
                    previous_longest = length;
                }
            }
            /* queries: unsorted every chunk holds a 6 and a 1 (48 computed), sorted 6,6 | 6,6 | 1,1 | 1,1 (28);
             * passages 3,3 | 5,2 | 6,1 | 4,2 (36) against 6,5 | 4,3 | 3,2 | 2,1 (30; 26 real) */
            int64_t want = m == 0 ? (sorted ? 28 : 48) : (sorted ? 30 : 36);
            CHECK_MSG(padded == want, "model %d %s: %lld tokens computed, want %lld", m, sorted ? "sorted" : "unsorted",
                      (long long)padded, (long long)want);
        }
        CHECK_MSG(loss == 2 * 10 * 28 + 28 + 26, "loss %g, want the ids' 560 and the tokens' 54", loss);
        gc_cache_free(cache);
    }
    for (int m = 0; m < 2; m++) RELEASE(inputs[m].tensors[0], inputs[m].tensors[1]);
}

/* A recoverable error anywhere in a sorted step -- the order, the sorted copy, a chunk, the leaf,
 * the loss, the cache put in the chunks' order -- returns it and leaves nothing behind: the
 * step under every memory limit from the inputs' bytes up to what it needs either succeeds or
 * fails with GC_ERR_MEM_LIMIT, and the live bytes come back to the inputs' (the recording model
 * has no parameters, so nothing may stay). */
static void test_errors_leak_nothing(void) {
    gc_batch inputs[2] = {make_batch(query_lengths, GC_F32), make_batch(passage_lengths, GC_F32)};
    const int64_t *lengths[2] = {query_lengths, passage_lengths};
    gc_token_budget cut = {INT64_MAX, "mask"};
    size_t baseline = gc_memory_get_stats(gc_cpu()).live_bytes;
    int failed = 0, succeeded = 0;
    for (size_t extra = 0; extra < 8192 && !succeeded; extra += 16) {
        recorder logs[2] = {{0}};
        gc_cache_config config = {.n_models = 2,
                                  .models = {{&logs[0], recording_forward, 2, NULL}, {&logs[1], recording_forward, 2, NULL}},
                                  .loss = {.forward = order_checking_loss, .args = lengths},
                                  .split = gc_split_by_tokens, .user = &cut, .sort_by = "mask"};
        gc_cache *cache = gc_cache_new(&config);
        double loss = 0;
        gc_memory_set_limit(gc_cpu(), baseline + extra);
        gc_status status = gc_cache_step(cache, inputs, &loss, NULL);
        gc_memory_set_limit(gc_cpu(), 0);
        CHECK_MSG(status == GC_OK || status == GC_ERR_MEM_LIMIT, "limit +%zu: status %d", extra, (int)status);
        size_t live = gc_memory_get_stats(gc_cpu()).live_bytes;
        CHECK_MSG(live == baseline, "limit +%zu: %zu bytes live after the step, %zu before", extra, live, baseline);
        failed += status != GC_OK, succeeded += status == GC_OK;
        gc_clear_error();
        gc_cache_free(cache);
    }
    CHECK_MSG(failed > 10 && succeeded, "%d steps failed and %d succeeded under the limits", failed, succeeded);
    for (int m = 0; m < 2; m++) RELEASE(inputs[m].tensors[0], inputs[m].tensors[1]);
}

static gc_tensor *text_forward(void *state, const gc_batch *chunk) {
    return gc_text_encoder_forward(state, chunk->tensors[0], chunk->tensors[1], true);
}

/* Every parameter's gradient, concatenated into a new host array. */
static double *gradients(const gc_param_list *params) {
    double *g = malloc((size_t)gc_param_list_numel(params) * sizeof *g);
    REQUIRE(g);
    for (int i = 0, at = 0; i < params->count; at += (int)gc_numel(params->items[i].tensor), i++)
        gc_to_host_f64(gc_grad(params->items[i].tensor), g + at);
    return g;
}

static double relative_error(const double *got, const double *want, int64_t n) {
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < n; i++) diff += (got[i] - want[i]) * (got[i] - want[i]), norm += want[i] * want[i];
    return sqrt(diff / norm);
}

/* The sorted GradCache step of `split` against the plain step of `plain` (whole batch, one graph). */
static void expect_full_batch(const char *what, const gc_param_list *params,
                              const gc_batch *inputs, const gc_cache_config *split, const gc_cache_config *plain) {
    gc_cache *cached = gc_cache_new(split), *full = gc_cache_new(plain);
    double loss = 0, full_loss = 0;
    gc_rng_context start = gc_rng_capture();
    gc_param_list_zero_grad(params);
    REQUIRE(gc_cache_step(cached, inputs, &loss, NULL) == GC_OK);
    double *got = gradients(params);
    gc_param_list_zero_grad(params);
    gc_rng_restore(&start); /* the same dropout stream */
    REQUIRE(gc_cache_full_batch_step(full, inputs, &full_loss) == GC_OK);
    double *want = gradients(params);
    double error = relative_error(got, want, gc_param_list_numel(params));
    CHECK_MSG(error <= 1e-10, "%s: relative error %.3g", what, error);
    CHECK_MSG(fabs(loss - full_loss) <= 1e-10 * fabs(full_loss), "%s: loss %.17g, full batch %.17g", what, loss,
              full_loss);
    free(got);
    free(want);
    gc_cache_free(cached);
    gc_cache_free(full);
}

static void test_gradients_equal_full_batch(void) {
    for (int dropout = 0; dropout < 2; dropout++) {
        gc_text_encoder_config config = {.vocab = 80, .max_length = WIDTH, .dim = 8, .heads = 2, .layers = 2,
                                         .hidden = 16, .projection = 4, .activation = GC_ACT_GELU_ERF,
                                         .pooling = GC_POOL_MEAN, .dropout = dropout ? 0.2 : 0, .dtype = GC_F64};
        gc_text_encoder encoder;
        gc_generator init = {7, 0};
        REQUIRE(gc_text_encoder_init(&encoder, &config, gc_cpu(), &init) == GC_OK);
        gc_param_list params = {0};
        gc_text_encoder_params(&encoder, "", &params);
        gc_batch inputs[2] = {make_batch(query_lengths, GC_F64), make_batch(passage_lengths, GC_F64)};
        gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1};
        gc_token_budget budget = {9, "mask"};
        /* tied: one encoder for both sides, each side sorted by its own lengths */
        gc_cache_config rows = {.n_models = 2,
                                .models = {{&encoder, text_forward, 3, &params}, {&encoder, text_forward, 3, &params}},
                                .loss = gc_contrastive_loss_fn(&options), .sort_by = "mask"};
        gc_cache_config tokens = rows, kept = rows, unsorted = rows;
        tokens.split = gc_split_by_tokens, tokens.user = &budget;
        kept.keep_last_graph = true;
        unsorted.sort_by = NULL;
        unsorted.models[0].chunk_size = unsorted.models[1].chunk_size = ROWS;
        if (!dropout) { /* the same function, whatever the chunks: against one graph over the batch */
            expect_full_batch("sorted rows", &params, inputs, &rows, &unsorted);
            expect_full_batch("sorted by token budget", &params, inputs, &tokens, &unsorted);
            expect_full_batch("sorted, last graph kept", &params, inputs, &kept, &unsorted);
        } else { /* the masks are drawn per chunk: the plain step that takes the same sorted chunks */
            expect_full_batch("dropout, sorted rows", &params, inputs, &rows, &rows);
            expect_full_batch("dropout, sorted by token budget", &params, inputs, &tokens, &tokens);
        }
        for (int m = 0; m < 2; m++) RELEASE(inputs[m].tensors[0], inputs[m].tensors[1]);
        gc_param_list_free(&params);
        gc_text_encoder_free(&encoder);
    }
}

int main(void) {
    GC_TEST_CASE(test_chunks_sorted);
    GC_TEST_CASE(test_errors_leak_nothing);
    GC_TEST_CASE(test_gradients_equal_full_batch);
    return gc_test_result();
}
