/* Automatic chunk sizing when the memory limit refuses the loss step of a distributed step
 * (gradcache/auto_chunk_group.c): two processes, the limit on rank 0 alone, set between the
 * loss phase's peak at chunks of 4 and at chunks of 8 (the kept last graphs are what the chunk
 * size changes there), above the forwards' peak at 8 so that the forwards fit and the loss is
 * what is refused. Both ranks must retry together with chunks of 4, neither waiting for the
 * other past its collectives, and end with the gradients of a step given chunks of 4, bitwise
 * (f64: the same chunks compute the same numbers). The loss is gathered (plain InfoNCE over
 * the global batch) with a scratch tensor that makes its phase the step's largest. And the ring
 * loss tells its peers that a rank's memory refused its buffers, as out of memory. */
#include "check.h"
#include "dist_spawn.h"
#include "mlp_encoder.h"

#define ROWS 8 /* each rank's queries and passages */

/* InfoNCE with a scratch tensor held while it runs: the loss's temporaries, 64 KiB. */
static gc_tensor *heavy_infonce(gc_tensor *const *reps, int count, void *args) {
    gc_tensor *scratch = gc_zeros(GC_SHAPE(128, 64), GC_F64, reps[0]->device);
    gc_tensor *loss = scratch ? infonce(reps, count, args) : NULL;
    gc_tensor_release(scratch);
    return loss;
}

/* One cached step over this rank's rows with chunks of `chunk`, the gradients (f64, *n of them)
 * returned and zeroed; the report into *report. */
static double *step(mlp_encoder *e, gc_process_group *group, gc_batch *inputs, int64_t chunk, bool auto_chunk,
                    gc_status *status, gc_cache_report *report, int64_t *n) {
    gc_cache_config config = {.n_models = 2,
                              .models = {{e, encoder_forward, chunk, &e->params}, {e, encoder_forward, chunk, &e->params}},
                              .loss = {.forward = heavy_infonce},
                              .group = group,
                              .global_loss = GC_GLOBAL_LOSS_GATHER,
                              .keep_last_graph = true,
                              .auto_chunk = auto_chunk};
    gc_cache *cache = gc_cache_new(&config);
    double loss;
    *status = gc_cache_step(cache, inputs, &loss, report);
    gc_cache_free(cache);
    double *grads = *status == GC_OK ? collect_grads(&e, 1, n) : NULL;
    gc_param_list_zero_grad(&e->params);
    return grads;
}

static size_t largest_peak(const gc_cache_report *r) {
    size_t peak = r->forward_peak_bytes > r->loss_peak_bytes ? r->forward_peak_bytes : r->loss_peak_bytes;
    return peak > r->backward_peak_bytes ? peak : r->backward_peak_bytes;
}

static int loss_refused_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(20);
    mlp_encoder e = make_encoder(GC_F64, 1, 0);
    gc_tensor *queries = gc_uniform(GC_SHAPE(ROWS, IN), GC_F64, gc_cpu(), -1, 1, 10 + (uint64_t)rank, 0);
    gc_tensor *passages = gc_uniform(GC_SHAPE(ROWS, IN), GC_F64, gc_cpu(), -1, 1, 20 + (uint64_t)rank, 0);
    gc_batch inputs[2] = {{1, {"x"}, {queries}}, {1, {"x"}, {passages}}};
    gc_status status;
    gc_cache_report at4, at8, retried;
    int64_t n4, n8, n;
    double *grads4 = step(&e, group, inputs, 4, false, &status, &at4, &n4);
    REQUIRE(status == GC_OK);
    double *grads8 = step(&e, group, inputs, 8, false, &status, &at8, &n8);
    REQUIRE(status == GC_OK);
    /* rank 0's limit: the loss at chunks of 8 refused, everything at chunks of 4 fits */
    size_t limit = (largest_peak(&at4) + at8.loss_peak_bytes) / 2;
    if (rank == 0) {
        CHECK_MSG(at8.forward_peak_bytes < limit && largest_peak(&at4) < limit && limit < at8.loss_peak_bytes,
                  "peaks: forwards %zu, loss %zu at 8, largest %zu at 4: no limit refuses the loss alone",
                  at8.forward_peak_bytes, at8.loss_peak_bytes, largest_peak(&at4));
        gc_memory_set_limit(gc_cpu(), limit);
    }
    double *grads = step(&e, group, inputs, 8, true, &status, &retried, &n);
    CHECK_MSG(status == GC_OK, "rank %d: %s", rank, gc_last_error());
    CHECK_MSG(retried.retries == 1 && retried.chunk_sizes[0] == 4 && retried.chunk_sizes[1] == 4,
              "rank %d: %d retries, chunks %lld and %lld", rank, retried.retries, (long long)retried.chunk_sizes[0],
              (long long)retried.chunk_sizes[1]);
    CHECK(grads && n == n4 && memcmp(grads, grads4, (size_t)n * sizeof *grads) == 0);
    gc_memory_set_limit(gc_cpu(), 0);
    free(grads4);
    free(grads8);
    free(grads);
    RELEASE(queries, passages);
    free_encoder(&e);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Around the ring, rank 0 refused memory as the loss prepares its buffers (a limit 1 KiB past
 * what it holds: room for the exchange of the ranks' shapes, [2, 22] i32, and not for a side's
 * rows, [8, 64] f64): rank 1's error is out of memory too, naming another
 * rank, so that automatic chunk sizing retries on every rank; neither waits for the other. */
static int ring_refused_body(int rank, int world, void *arg) {
    (void)world, (void)arg;
    gc_process_group *group = dist_test_group(20);
    gc_tensor *reps[2] = {gc_uniform(GC_SHAPE(ROWS, 64), GC_F64, gc_cpu(), -1, 1, 30 + (uint64_t)rank, 0),
                          gc_uniform(GC_SHAPE(ROWS, 64), GC_F64, gc_cpu(), -1, 1, 40 + (uint64_t)rank, 0)};
    REQUIRE(reps[0] && reps[1]);
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_DOT, .temperature = 0.5,
                                      .method = GC_CONTRASTIVE_TILED, .tile_size = 3};
    gc_loss_fn ring = gc_contrastive_loss_fn(&options);
    if (rank == 0) gc_memory_set_limit(gc_cpu(), gc_memory_get_stats(gc_cpu()).live_bytes + 1024);
    double loss;
    gc_tensor *grads[2] = {NULL, NULL};
    gc_status status = ring.group_value_and_grad(group, reps, 2, ring.args, 1.0, &loss, grads);
    CHECK_MSG(status == GC_ERR_MEM_LIMIT, "rank %d: %s", rank, gc_last_error());
    if (rank == 1)
        CHECK_MSG(strstr(gc_last_error(), "another rank could not prepare (out of memory"), "said: %s",
                  gc_last_error());
    gc_memory_set_limit(gc_cpu(), 0);
    RELEASE(reps[0], reps[1], grads[0], grads[1]);
    gc_process_group_free(group);
    return gc_test_result();
}

int main(void) {
    CHECK_MSG(dist_all_pass(2, loss_refused_body, NULL, 60), "the loss step refused on rank 0");
    CHECK_MSG(dist_all_pass(2, ring_refused_body, NULL, 60), "the ring loss refused on rank 0 as it prepares");
    return gc_test_result();
}
