/* A Gradient Cache step through the functional API (gradcache/cache.h), for the tests that
 * check it against gc_cache_step's: each model's input cut into small batches of its
 * config->models[m].chunk_size rows as a loader would emit them, each given to
 * gc_cached_forward, the loss over the concatenated leaves by gc_functional_loss (across the
 * config's group), and the closures run by gc_closures_run (one reduction with its ddp). */
#ifndef GC_TESTS_FUNCTIONAL_STEP_H
#define GC_TESTS_FUNCTIONAL_STEP_H

#include "check.h"

#define FUNCTIONAL_MAX_BATCHES 64

/* Rows [start, end) of every tensor of `input`, as views (new references). */
static inline gc_batch small_batch(const gc_batch *input, int64_t start, int64_t end) {
    gc_batch small = *input;
    for (int t = 0; t < input->count; t++) small.tensors[t] = gc_slice0(input->tensors[t], start, end);
    return small;
}

static inline gc_status functional_step(const gc_cache_config *config, const gc_batch *inputs, double *loss) {
    gc_closure *closures[FUNCTIONAL_MAX_BATCHES];
    gc_tensor *leaves[FUNCTIONAL_MAX_BATCHES], *seeds[FUNCTIONAL_MAX_BATCHES];
    gc_tensor *reps[GC_CACHE_MAX_MODELS], *grads[GC_CACHE_MAX_MODELS] = {0};
    int n = 0, first[GC_CACHE_MAX_MODELS + 1];
    for (int m = 0; m < config->n_models; m++) {
        const gc_cached_model *model = &config->models[m];
        int64_t rows = inputs[m].tensors[0]->shape[0];
        first[m] = n;
        for (int64_t start = 0; start < rows; start += model->chunk_size, n++) {
            REQUIRE(n < FUNCTIONAL_MAX_BATCHES);
            int64_t end = start + model->chunk_size < rows ? start + model->chunk_size : rows;
            gc_batch small = small_batch(&inputs[m], start, end);
            leaves[n] = gc_cached_forward(model->state, model->forward, &small, NULL, NULL, &closures[n]);
            for (int t = 0; t < small.count; t++) gc_tensor_release(small.tensors[t]); /* the closure keeps them */
            REQUIRE(leaves[n]);
        }
        bool previous = gc_set_grad_enabled(false);
        reps[m] = gc_cat0(leaves + first[m], n - first[m]);
        gc_set_grad_enabled(previous);
    }
    first[config->n_models] = n;
    gc_status status = gc_functional_loss(&config->loss, config->group, NULL, reps, config->n_models, loss, grads);
    for (int m = 0; m < config->n_models; m++) {
        int64_t start = 0;
        for (int b = first[m]; b < first[m + 1]; b++) {
            int64_t rows = leaves[b]->shape[0];
            seeds[b] = status == GC_OK ? gc_slice0(grads[m], start, start + rows) : NULL;
            start += rows;
        }
    }
    if (status == GC_OK) status = gc_closures_run(closures, seeds, n, config->ddp);
    for (int b = 0; b < n; b++) {
        gc_closure_free(closures[b]);
        RELEASE(leaves[b], seeds[b]);
    }
    for (int m = 0; m < config->n_models; m++) RELEASE(reps[m], grads[m]);
    return status;
}

#endif
