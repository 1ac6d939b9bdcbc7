/* No hidden host waits on the hot path: the library's count of copies to the host and of
 * synchronisations (gc_device_get_sync_stats) must not move during an op's forward and
 * backward, a text encoder's training step, or a GradCache chunk, and must move by exactly
 * one copy for the loss of a GradCache step. A copy or a wait added to any of these paths
 * (as cross-entropy and the embedding used to make on a GPU, to check their indices) fails
 * here, on the CPU too: the count is kept above the backends.
 *
 * Usage: test_host_sync [cpu|cuda] (the cuda suite runs it with "cuda"; exits 77 without a
 * GPU). On CUDA it also checks that a long run of index checks with no wait in between
 * costs one counted wait, when the device's pending checks fill up. */
#include <string.h>

#include "check.h"

#define BATCH 8
#define LENGTH 6

static gc_device device;

/* What the counters moved by since `before`. */
static gc_sync_stats since(gc_sync_stats before) {
    gc_sync_stats now = gc_device_get_sync_stats(device);
    return (gc_sync_stats){now.to_host_copies - before.to_host_copies, now.to_host_bytes - before.to_host_bytes,
                           now.synchronizations - before.synchronizations};
}

static void expect_no_wait(gc_sync_stats before, const char *what) {
    gc_sync_stats moved = since(before);
    CHECK_MSG(moved.to_host_copies == 0 && moved.synchronizations == 0, "%s: %llu copies to the host, %llu waits",
              what, (unsigned long long)moved.to_host_copies, (unsigned long long)moved.synchronizations);
}

static gc_tensor *on_device(gc_tensor *cpu_tensor) {
    REQUIRE(cpu_tensor);
    gc_tensor *t = gc_to_device(cpu_tensor, device);
    REQUIRE(t);
    gc_tensor_release(cpu_tensor);
    return t;
}

static gc_tensor *ids_tensor(int64_t rows, int64_t cols, int32_t vocab, uint64_t seed) {
    int32_t values[BATCH * LENGTH];
    REQUIRE(rows * cols <= BATCH * LENGTH);
    for (int64_t i = 0; i < rows * cols; i++) values[i] = (int32_t)((seed * 7919 + (uint64_t)i * 104729) % vocab);
    return on_device(gc_from_host(values, GC_SHAPE(rows, cols), GC_I32, gc_cpu()));
}

/* The counters themselves: a read is one copy of its bytes, a synchronisation one wait. */
static void test_counting(void) {
    gc_tensor *x = on_device(gc_full(GC_SHAPE(3), GC_F32, gc_cpu(), 2.0));
    gc_tensor *sum = gc_sum_all(x);
    REQUIRE(sum);
    gc_sync_stats before = gc_device_get_sync_stats(device);
    CHECK(gc_item(sum) == 6.0);
    gc_sync_stats moved = since(before);
    CHECK(moved.to_host_copies == 1 && moved.to_host_bytes == 4 && moved.synchronizations == 0);
    before = gc_device_get_sync_stats(device);
    gc_device_synchronize(device);
    moved = since(before);
    CHECK(moved.to_host_copies == 0 && moved.synchronizations == 1);
    gc_tensor *back = gc_to_device(x, gc_cpu());
    REQUIRE(back);
    CHECK(since(before).to_host_copies == (device.type == GC_DEVICE_CPU ? 0 : 1)); /* cpu to cpu is no read */
    RELEASE(x, sum, back);
}

/* Embedding, cross-entropy and the contrastive loss, forward and backward. */
static void test_ops(void) {
    gc_tensor *table = on_device(gc_uniform(GC_SHAPE(20, 4), GC_F32, gc_cpu(), -1, 1, 1, 0));
    gc_set_requires_grad(table, true);
    gc_tensor *ids = ids_tensor(BATCH, LENGTH, 20, 3);
    gc_tensor *logits = on_device(gc_uniform(GC_SHAPE(BATCH, 5), GC_F32, gc_cpu(), -1, 1, 2, 0));
    gc_set_requires_grad(logits, true);
    gc_tensor *targets = ids_tensor(1, BATCH, 5, 4);
    gc_tensor *flat_targets = gc_reshape(targets, GC_SHAPE(BATCH));
    gc_tensor *queries = on_device(gc_uniform(GC_SHAPE(BATCH, 4), GC_F32, gc_cpu(), -1, 1, 5, 0));
    gc_tensor *passages = on_device(gc_uniform(GC_SHAPE(2 * BATCH, 4), GC_F32, gc_cpu(), -1, 1, 6, 0));
    gc_set_requires_grad(queries, true);
    gc_set_requires_grad(passages, true);
    REQUIRE(flat_targets);

    gc_sync_stats before = gc_device_get_sync_stats(device);
    gc_tensor *vectors = gc_embedding(table, ids);
    gc_tensor *vectors_sum = gc_sum_all(vectors);
    REQUIRE(gc_backward(&vectors_sum, NULL, 1) == GC_OK);
    expect_no_wait(before, "embedding forward and backward");

    before = gc_device_get_sync_stats(device);
    gc_tensor *ce = gc_cross_entropy(logits, flat_targets, GC_LOSS_MEAN);
    REQUIRE(ce && gc_backward(&ce, NULL, 1) == GC_OK);
    expect_no_wait(before, "cross_entropy forward and backward");

    before = gc_device_get_sync_stats(device);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05, .reduction = GC_LOSS_MEAN};
    gc_tensor *infonce = gc_contrastive_loss(queries, passages, &options);
    REQUIRE(infonce && gc_backward(&infonce, NULL, 1) == GC_OK);
    expect_no_wait(before, "contrastive loss forward and backward");
    RELEASE(table, ids, logits, targets, flat_targets, queries, passages, vectors, vectors_sum, ce, infonce);
}

/* The trainer's model: a BERT-style text encoder with dropout, as GradCache's model. */
static gc_text_encoder_config encoder_config(void) {
    return (gc_text_encoder_config){.vocab = 30, .max_length = LENGTH, .dim = 8, .heads = 2, .layers = 2,
                                    .hidden = 16, .projection = 8, .dropout = 0.1, .pre_norm = false,
                                    .activation = GC_ACT_GELU_ERF, .pooling = GC_POOL_MEAN, .dtype = GC_F32};
}

static gc_tensor *encode(void *encoder, const gc_batch *chunk) {
    return gc_text_encoder_forward(encoder, chunk->tensors[0], chunk->tensors[1], true);
}

static void test_training_step(void) {
    gc_text_encoder_config config = encoder_config();
    gc_generator init = {11, 0};
    gc_text_encoder towers[2];
    gc_param_list params[2] = {{0}};
    for (int t = 0; t < 2; t++) {
        REQUIRE(gc_text_encoder_init(&towers[t], &config, device, &init) == GC_OK);
        gc_text_encoder_params(&towers[t], t ? "passage" : "query", &params[t]);
    }
    float mask_values[BATCH * LENGTH];
    for (int i = 0; i < BATCH * LENGTH; i++) mask_values[i] = i % LENGTH < 2 + (i / LENGTH) % 4; /* padded rows */
    gc_tensor *mask = on_device(gc_from_host(mask_values, GC_SHAPE(BATCH, LENGTH), GC_F32, gc_cpu()));
    gc_tensor *ids[2] = {ids_tensor(BATCH, LENGTH, 30, 7), ids_tensor(BATCH, LENGTH, 30, 8)};
    gc_batch inputs[2] = {{2, {"ids", "mask"}, {ids[0], mask}}, {2, {"ids", "mask"}, {ids[1], mask}}};

    /* A plain forward and backward of one tower. */
    gc_sync_stats before = gc_device_get_sync_stats(device);
    gc_tensor *reps = encode(&towers[0], &inputs[0]);
    gc_tensor *total = gc_sum_all(reps);
    REQUIRE(total && gc_backward(&total, NULL, 1) == GC_OK);
    expect_no_wait(before, "text encoder forward and backward");
    RELEASE(reps, total);

    /* A GradCache step in chunks of 2: one read, the loss; no wait in any chunk. */
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05, .reduction = GC_LOSS_MEAN};
    gc_cache_config cache_config = {.n_models = 2, .loss = gc_contrastive_loss_fn(&options)};
    for (int t = 0; t < 2; t++) cache_config.models[t] = (gc_cached_model){&towers[t], encode, 2, &params[t]};
    gc_cache *cache = gc_cache_new(&cache_config);
    double loss = 0;
    before = gc_device_get_sync_stats(device);
    REQUIRE(gc_cache_step(cache, inputs, &loss, NULL) == GC_OK);
    gc_sync_stats moved = since(before);
    CHECK_MSG(moved.to_host_copies == 1 && moved.to_host_bytes == 4 && moved.synchronizations == 0,
              "GradCache step: %llu copies (%llu bytes), %llu waits; want 1 copy of the f32 loss",
              (unsigned long long)moved.to_host_copies, (unsigned long long)moved.to_host_bytes,
              (unsigned long long)moved.synchronizations);
    CHECK(isfinite(loss));
    gc_cache_free(cache);
    RELEASE(mask, ids[0], ids[1]);
    for (int t = 0; t < 2; t++) {
        gc_param_list_free(&params[t]);
        gc_text_encoder_free(&towers[t]);
    }
}

/* CUDA: index checks pend on the device until the host waits anyway; past the device's
 * capacity (4096 checks) with no wait in between, reading them costs one counted wait.
 * Under GC_CUDA_SYNC=1 every launch reads its own checks, so none pend and none costs one. */
static void test_pending_index_checks(void) {
    gc_tensor *table = on_device(gc_zeros(GC_SHAPE(20, 4), GC_F32, gc_cpu()));
    gc_tensor *ids = ids_tensor(1, 3, 20, 1);
    gc_device_synchronize(device); /* nothing pending */
    gc_sync_stats before = gc_device_get_sync_stats(device);
    for (int i = 0; i < 4096; i++) gc_tensor_release(gc_embedding(table, ids));
    expect_no_wait(before, "4096 embeddings");
    gc_tensor_release(gc_embedding(table, ids));
    uint64_t waits = gc_test_cuda_sync_mode() ? 0 : 1;
    CHECK(since(before).synchronizations == waits && since(before).to_host_copies == 0);
    RELEASE(table, ids);
}

int main(int argc, char **argv) {
    bool cuda = argc > 1 && strcmp(argv[1], "cuda") == 0;
    if (argc > 1 && !cuda && strcmp(argv[1], "cpu") != 0) {
        fprintf(stderr, "usage: %s [cpu|cuda]\n", argv[0]);
        return GC_TEST_SETUP_ERROR;
    }
    if (cuda) gc_test_require_cuda();
    device = cuda ? gc_cuda(0) : gc_cpu();
    test_counting();
    test_ops();
    test_training_step();
    if (cuda) test_pending_index_checks();
    return gc_test_result();
}
