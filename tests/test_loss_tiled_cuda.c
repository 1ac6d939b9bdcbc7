/* The tiled contrastive loss on CUDA (its tile kernels) against the untiled reference on the
 * CPU: every option and tile size of the CPU test, larger tiles that take several blocks per
 * row and per column block (rows of 300 and 600 scores, 8 lanes per column), a non-finite
 * representation, and the working memory at batch 16,384. And the ring loss on CUDA in a
 * world of one process (every device path of its passes; its shifts copy): every case of
 * dist_ring_loss_checks.h against the all-gather loss on the GPU and one process on the CPU
 * (several ranks on GPUs: test_dist_nccl). And the GIST loss, untiled and tiled, against
 * the PyTorch fixture and the CPU (gist_cuda_checks.h). */
#include "dist_ring_loss_checks.h"
#include "gist_cuda_checks.h"

static void test_large_tiles(gc_device device) {
    const loss_case cases[] = {
        {"cosine, 300 x 600, 1 hard negative", 300, 600, 64, NULL, GC_SIMILARITY_COSINE, 0.05, GC_LOSS_MEAN, true, 1},
        {"dot, 517 x 517, temperature 1e-3", 517, 517, 32, NULL, GC_SIMILARITY_DOT, 1e-3, GC_LOSS_SUM, true, 1},
    };
    const int64_t tiles[] = {37, 256, 0}; /* 0: the CUDA default, larger than the batch */
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++) {
            compare(&cases[k], GC_F64, tiles[t], 200 + k, device);
            compare(&cases[k], GC_F32, tiles[t], 200 + k, device);
        }
}

static void test_non_finite(gc_device device) {
    gc_tensor *q = gc_uniform(GC_SHAPE(40, 8), GC_F32, device, -1, 1, 1, 0);
    gc_tensor *p = gc_uniform(GC_SHAPE(40, 8), GC_F32, device, -1, 1, 2, 0);
    REQUIRE(q && p);
    gc_tensor *row = gc_slice0(p, 33, 34);
    REQUIRE(row);
    gc_fill_(row, NAN);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1, .tile_size = 16};
    double value;
    gc_tensor *gq = NULL, *gp = NULL;
    gc_status status = gc_contrastive_loss_tiled(q, p, &options, 1, &value, &gq, &gp);
    CHECK_MSG(status == GC_ERR_NON_FINITE && !gq && !gp, "a nan passage: status %s", gc_status_name(status));
    CHECK_MSG(strstr(gc_last_error(), "passage row 33 of [40, 8] f32 cuda:0"), "the error: %s", gc_last_error());
    gc_clear_error();
    RELEASE(q, p, row);
}

/* As on the CPU: all the loss allocates at batch 16,384 (the gradients included) stays
 * under 1% of the B x B f32 scores (1 GiB): the default tile is 16384 / 32 = 512 here. */
static void test_memory_at_16384(gc_device device) {
    const int64_t batch = 16384, dim = 32;
    gc_tensor *q = gc_uniform(GC_SHAPE(batch, dim), GC_F32, device, -1, 1, 3, 0);
    gc_tensor *p = gc_uniform(GC_SHAPE(batch, dim), GC_F32, device, -1, 1, 4, 0);
    REQUIRE(q && p);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    size_t before = gc_memory_get_stats(device).live_bytes;
    gc_memory_reset_peak(device);
    result r = run(q, p, &options, false);
    size_t working = gc_memory_get_stats(device).peak_bytes - before, matrix = (size_t)(batch * batch) * sizeof(float);
    CHECK_MSG(working < matrix / 100, "batch %lld: the loss allocates %zu bytes, 1%% of the scores is %zu",
              (long long)batch, working, matrix / 100);
    release_result(&r);
    RELEASE(q, p);
}

int main(void) {
    gc_test_require_cuda();
    gc_device device = gc_cuda(0);
    test_equal_to_reference(device);
    test_large_tiles(device);
    test_non_finite(device);
    test_memory_at_16384(device);
    check_gist_fixture(device);
    check_gist_large(device);
    gc_process_group *alone = gc_process_group_new(&(gc_dist_env){.rank = 0, .world_size = 1}, &(gc_dist_options){0});
    REQUIRE(alone);
    check_ring_loss(alone, device);
    gc_process_group_free(alone);
    return gc_test_result();
}
