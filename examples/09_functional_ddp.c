/* Step 9: the functional API under data parallelism, for loaders that emit small batches. Run
 * as is, the program starts itself twice under the library's launcher. Each process receives
 * its 24 pairs as 3 small batches of 8 (a loader's), and per small batch calls
 * gc_cached_forward on each tower: the representation as a leaf, without a graph, and a closure
 * that can redo that forward. Then gc_functional_loss computes the loss over every process's
 * representations (all-gathered: 48 pairs) and each representation's gradient; gc_closures_run
 * replays each closure's forward with a graph and back-propagates its gradient, with the
 * bucketer's sync suppressed for all 6 backwards but the last: one reduction per bucket per step.
 * Build: cc 09_functional_ddp.c $(pkg-config --cflags --libs gradcache). Exit status 0 when each
 * step reduced every bucket exactly once and both processes hold the same parameters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gradcache/gradcache.h>

enum { IN = 16, DIM = 8, SMALL = 8, BATCHES = 3, STEPS = 2 };

static gc_tensor *project(void *tower, const gc_batch *batch) { return gc_linear_forward(tower, batch->tensors[0]); }

/* One step: returns whether it reduced each of the bucketer's buckets once. */
static bool functional_step(gc_linear towers[2], gc_ddp *ddp, gc_process_group *group, const gc_loss_fn *loss,
                            uint64_t seed, double *value) {
    gc_closure *closures[2 * BATCHES];
    gc_tensor *leaves[2 * BATCHES], *grads[2 * BATCHES], *reps[2], *rep_grads[2];
    for (int t = 0; t < 2; t++) {
        for (int b = 0; b < BATCHES; b++) { /* what a loader gives: small batches of features */
            gc_tensor *x = gc_uniform(GC_SHAPE(SMALL, IN), GC_F32, gc_cpu(), -1, 1, seed + (uint64_t)(t * BATCHES + b), 0);
            gc_batch small = {1, {"x"}, {x}};
            leaves[t * BATCHES + b] = gc_cached_forward(&towers[t], project, &small, NULL, NULL, &closures[t * BATCHES + b]);
            gc_tensor_release(x); /* the closure keeps it */
        }
        bool previous = gc_set_grad_enabled(false);
        reps[t] = gc_cat0(leaves + t * BATCHES, BATCHES); /* this process's [24, DIM] */
        gc_set_grad_enabled(previous);
    }
    int64_t before = gc_ddp_get_stats(ddp).all_reduces;
    gc_ddp_zero_grad(ddp);
    bool ok = gc_functional_loss(loss, group, NULL, reps, 2, value, rep_grads) == GC_OK;
    for (int i = 0; i < 2 * BATCHES; i++) /* each small batch's rows of its tower's gradient */
        grads[i] = ok ? gc_slice0(rep_grads[i / BATCHES], i % BATCHES * SMALL, (i % BATCHES + 1) * SMALL) : NULL;
    ok = ok && gc_closures_run(closures, grads, 2 * BATCHES, ddp) == GC_OK;
    bool once = ok && gc_ddp_get_stats(ddp).all_reduces - before == gc_ddp_get_stats(ddp).buckets;
    for (int i = 0; i < 2 * BATCHES; i++) {
        gc_closure_free(closures[i]);
        gc_tensor_release(leaves[i]);
        gc_tensor_release(grads[i]);
    }
    for (int t = 0; t < 2; t++) {
        gc_tensor_release(reps[t]);
        if (ok) gc_tensor_release(rep_grads[t]);
    }
    return once;
}

static bool same_values(const gc_tensor *a, const gc_tensor *b) {
    size_t n = (size_t)gc_numel(a);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y) return false;
    gc_to_host_f64(a, x);
    gc_to_host_f64(b, y);
    bool same = memcmp(x, y, n * sizeof *x) == 0;
    free(x);
    free(y);
    return same;
}

static int rank_main(void) {
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){GC_DIST_TCP, 30, gc_cpu()});
    if (!group) return fprintf(stderr, "%s\n", gc_last_error()), 1;
    int rank = gc_dist_rank(group);
    gc_generator init = {9, 0}; /* the same weights on every rank (the bucketer checks it) */
    gc_linear towers[2];
    gc_param_list params = {0};
    for (int t = 0; t < 2; t++) {
        if (gc_linear_init(&towers[t], IN, DIM, true, GC_F32, gc_cpu(), &init) != GC_OK) return 1;
        gc_linear_params(&towers[t], t ? "passage" : "query", &params);
    }
    gc_ddp *ddp = gc_ddp_new(group, &params, &(gc_ddp_options){.first_bucket_bytes = 256, .bucket_bytes = 512});
    gc_sgd sgd;
    if (!ddp || gc_sgd_init(&sgd, &params, 0.1, 0, 0) != GC_OK) return 1;
    gc_contrastive_options options = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.1};
    gc_loss_fn loss = gc_contrastive_loss_fn(&options);
    bool right = true;
    for (int step = 0; step < STEPS; step++) {
        double value = 0;
        bool once = functional_step(towers, ddp, group, &loss, 1000 * (uint64_t)step + 100 * (uint64_t)rank, &value);
        right = right && once && gc_sgd_step(&sgd) == GC_OK;
        if (rank == 0) printf("step %d: loss %.4f over both processes' 48 pairs, 6 backwards, %s\n", step, value,
                              once ? "one reduction per bucket" : "NOT one reduction per bucket");
    }
    /* the same parameters on both processes: each one's weight is the element-wise max of both */
    gc_tensor *high = gc_clone(towers[0].weight);
    right = right && high && gc_dist_all_reduce(group, high, GC_DIST_MAX) == GC_OK && same_values(high, towers[0].weight);
    gc_tensor_release(high);
    if (rank == 0) printf("example 09_functional_ddp: %s\n", right ? "ok" : "WRONG");
    for (int t = 0; t < 2; t++) gc_linear_free(&towers[t]);
    gc_param_list_free(&params);
    gc_sgd_free(&sgd);
    gc_ddp_free(ddp); /* before its group */
    gc_process_group_free(group);
    gc_shutdown();
    return !right;
}

/* A process of the run (WORLD_SIZE set), or the launcher that starts two. */
int main(int argc, char **argv) {
    (void)argc;
    return getenv("WORLD_SIZE") ? rank_main() : gc_launch(&(gc_launch_options){.nproc = 2}, argv);
}
