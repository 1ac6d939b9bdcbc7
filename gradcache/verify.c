/* The plain full-batch step and the verify mode that compares it with the cached step. */
#include <math.h>
#include <stdlib.h>

#include "cache_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

gc_status gc_cache_full_batch_step(gc_cache *cache, const gc_batch *inputs, double *loss) {
    const gc_cache_config *config = &cache->config;
    int n = config->n_models;
    gc_tensor *reps[GC_CACHE_MAX_MODELS] = {0}, *leaves[GC_CACHE_MAX_MODELS] = {0}, *grads[GC_CACHE_MAX_MODELS] = {0};
    gc_status status = GC_OK;
    for (int m = 0; m < n && status == GC_OK; m++) {
        reps[m] = gc_cache_forward_with_graph(cache, m, &inputs[m]);
        leaves[m] = gc_detach(reps[m]);
        if (!leaves[m]) status = gc_last_status();
        else gc_set_requires_grad(leaves[m], true);
    }
    if (status == GC_OK) status = gc_cache_loss(cache, leaves, loss, grads, NULL);
    gc_cache_sync sync = {0};
    int64_t ones[GC_CACHE_MAX_MODELS]; /* one backward per model */
    for (int m = 0; m < n; m++) ones[m] = 1;
    if (status == GC_OK) status = gc_cache_sync_begin(cache, ones, &sync);
    for (int m = 0; m < n && status == GC_OK; m++) {
        bool synced = gc_cache_sync_before(&sync, m, 0, config->models[m].params);
        status = gc_cache_backward(config->backward, reps[m], grads[m], config->user);
        status = gc_cache_sync_after(&sync, synced, m, 0, status);
    }
    gc_cache_sync_end(&sync);
    for (int m = 0; m < n; m++) {
        gc_tensor_release(reps[m]);
        gc_tensor_release(leaves[m]);
        gc_tensor_release(grads[m]);
    }
    return status;
}

/* The distinct parameters of all models (a tied model's appear once). */
static int distinct_params(const gc_cache_config *config, gc_tensor **params, int capacity) {
    int count = 0;
    for (int m = 0; m < config->n_models; m++) {
        const gc_param_list *list = config->models[m].params;
        if (!list) gc_fatal("cache_verify: model %d has no parameter list", m);
        for (int i = 0; i < list->count; i++) {
            bool seen = false;
            for (int k = 0; k < count && !seen; k++) seen = params[k] == list->items[i].tensor;
            if (seen) continue;
            if (count == capacity) gc_fatal("cache_verify: more than %d parameters", capacity);
            params[count++] = list->items[i].tensor;
        }
    }
    return count;
}

static void zero_grads(gc_tensor *const *params, int count) {
    for (int i = 0; i < count; i++) gc_zero_grad(params[i]);
}

/* ||a - b|| and ||b|| in f64 (a or b NULL counts as zeros). */
static void difference_norms(const gc_tensor *a, const gc_tensor *b, int64_t numel, double *diff, double *ref) {
    double *x = calloc((size_t)numel + 1, sizeof *x), *y = calloc((size_t)numel + 1, sizeof *y);
    if (!x || !y) gc_fatal("cache_verify: out of host memory for %lld values", (long long)numel);
    if (a) gc_to_host_f64(a, x);
    if (b) gc_to_host_f64(b, y);
    double d = 0, r = 0;
    for (int64_t i = 0; i < numel; i++) {
        d += (x[i] - y[i]) * (x[i] - y[i]);
        r += y[i] * y[i];
    }
    *diff = sqrt(d);
    *ref = sqrt(r);
    free(x);
    free(y);
}

gc_status gc_cache_verify(gc_cache *cache, const gc_batch *inputs, double floor, double *max_relative,
                          double *per_param, int per_param_capacity) {
    enum { capacity = 4096 };
    gc_tensor **params = malloc(capacity * sizeof *params), **cached = calloc(capacity, sizeof *cached);
    if (!params || !cached) gc_fatal("cache_verify: out of host memory");
    int count = distinct_params(&cache->config, params, capacity);
    double loss;
    zero_grads(params, count);
    gc_rng_context start = gc_rng_capture(); /* both steps draw the same dropout masks */
    gc_status status = gc_cache_step(cache, inputs, &loss, NULL);
    for (int i = 0; i < count && status == GC_OK; i++) {
        cached[i] = gc_grad(params[i]) ? gc_clone(gc_grad(params[i])) : NULL;
        if (gc_grad(params[i]) && !cached[i]) status = gc_last_status();
    }
    if (status == GC_OK) {
        zero_grads(params, count);
        gc_rng_restore(&start);
        status = gc_cache_full_batch_step(cache, inputs, &loss);
    }
    *max_relative = 0;
    for (int i = 0; i < count && status == GC_OK; i++) {
        double diff, ref;
        difference_norms(cached[i], gc_grad(params[i]), gc_numel(params[i]), &diff, &ref);
        double relative = diff / (ref > floor ? ref : floor);
        if (relative > *max_relative) *max_relative = relative;
        if (per_param && i < per_param_capacity) per_param[i] = relative;
    }
    for (int i = 0; i < count; i++) gc_tensor_release(cached[i]);
    free(cached);
    free(params);
    return status;
}
