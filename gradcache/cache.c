/* The cached-gradient step (gradcache/cache.h has the algorithm), read top to bottom: the
 * set-up, the helpers each step uses, step 3 (the loss and the cache), then steps 1-2
 * (forward_without_graph), 4-5 (forward_backward), and attempt() and gc_cache_step(), which
 * run them in order and retry with smaller chunks when asked to. What a process group adds
 * (the global batch, one reduction per step) is distributed.c's; verify.c has the plain
 * full-batch step to compare with. */
#include <stdlib.h>
#include <string.h>

#include "cache_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/clock.h"
#include "gradcache/memory.h"
#include "gradcache/ops.h"
#include "split.h"

gc_cache *gc_cache_new(const gc_cache_config *config) {
    if (config->n_models < 1 || config->n_models > GC_CACHE_MAX_MODELS)
        gc_fatal("cache: %d models (1 to %d are supported)", config->n_models, GC_CACHE_MAX_MODELS);
    if (!config->loss.forward) gc_fatal("cache: the loss needs a forward function");
    for (int m = 0; m < config->n_models; m++) {
        if (!config->models[m].forward) gc_fatal("cache: model %d has no forward function", m);
        if (config->models[m].chunk_size < 1)
            gc_fatal("cache: model %d has chunk size %lld", m, (long long)config->models[m].chunk_size);
        if (config->auto_chunk && !config->models[m].params)
            gc_fatal("cache: auto_chunk needs the parameters of model %d", m);
    }
    if (config->ddp && !config->group) gc_fatal("cache: a bucketer (ddp) without its process group (group)");
    if ((unsigned)config->global_loss > GC_GLOBAL_LOSS_RING || !(config->ring_share >= 0))
        gc_fatal("cache: global_loss %d, ring_share %g (AUTO, GATHER or RING; a share >= 0)", (int)config->global_loss,
                 config->ring_share);
    if (config->global_loss == GC_GLOBAL_LOSS_RING && !config->loss.group_value_and_grad)
        gc_fatal("cache: global_loss RING with a loss that has no ring (group_value_and_grad is NULL)");
    gc_cache *cache = malloc(sizeof *cache);
    if (!cache) gc_fatal("cache: out of host memory");
    cache->config = *config;
    return cache;
}

void gc_cache_free(gc_cache *cache) { free(cache); }

gc_tensor *gc_cache_representation(void *model, gc_model_fn forward, const gc_batch *input,
                                   gc_representation_fn representation, void *user) {
    gc_tensor *output = forward(model, input);
    if (!output || !representation) return output;
    gc_tensor *rep = representation(output, user);
    gc_tensor_release(output);
    return rep;
}

gc_status gc_cache_backward(gc_backward_fn backward, gc_tensor *output, gc_tensor *seed, void *user) {
    if (backward) return backward(output, seed, user);
    return gc_backward(&output, seed ? &seed : NULL, 1);
}

double gc_cache_loss_scale(const gc_cache *cache) {
    const gc_loss_scaler *scaler = cache->config.scaler;
    if (!scaler) return 1;
    gc_loss_scaler_check("cache", scaler);
    return scaler->scale;
}

/* The backward of the loss `value`, seeded with the loss scale when there is a scaler. */
static gc_status loss_backward(const gc_cache *cache, gc_tensor *value) {
    const gc_cache_config *config = &cache->config;
    /* The one place the loss scale enters: the seed, a tensor like the loss (so an f32 loss
     * carries any scale up to FLT_MAX exactly, where an f16 one would overflow past 65504). */
    gc_tensor *seed = config->scaler ? gc_full(value->ndim, value->shape, value->dtype, value->device,
                                               gc_cache_loss_scale(cache))
                                     : NULL;
    if (config->scaler && !seed) return gc_last_status();
    gc_status status = gc_cache_backward(config->backward, value, seed, config->user);
    gc_tensor_release(seed);
    return status;
}

/* The loss over `leaves` and d loss / d leaf (times the loss scale) into grads[m], new
 * references: around the ring, the loss's own collectives over this rank's leaves; else the
 * loss's own value_and_grad when it has one (the tiled loss), or its forward and a backward
 * seeded with the loss scale. */
static gc_status loss_gradients(const gc_cache *cache, gc_tensor *const *leaves, bool ring, double *loss,
                                gc_tensor **grads) {
    const gc_cache_config *config = &cache->config;
    if (ring)
        return config->loss.group_value_and_grad(config->group, leaves, config->n_models, config->loss.args,
                                                 gc_cache_loss_scale(cache), loss, grads);
    if (config->loss.value_and_grad)
        return config->loss.value_and_grad(leaves, config->n_models, config->loss.args, gc_cache_loss_scale(cache),
                                           loss, grads);
    gc_tensor *value = config->loss.forward(leaves, config->n_models, config->loss.args);
    if (!value) return gc_last_status();
    *loss = gc_item(value);
    gc_status status = loss_backward(cache, value);
    gc_tensor_release(value);
    for (int m = 0; m < config->n_models; m++) {
        grads[m] = gc_grad(leaves[m]) ? gc_tensor_retain(gc_grad(leaves[m])) : NULL;
        if (status == GC_OK && !grads[m])
            gc_fatal("cache: the loss does not depend on the representations of model %d", m);
    }
    return status;
}

gc_status gc_cache_loss(const gc_cache *cache, gc_tensor *const *leaves, double *loss, gc_tensor **grads, bool *ring) {
    int n = cache->config.n_models;
    gc_tensor *global[GC_CACHE_MAX_MODELS] = {0}, *global_grads[GC_CACHE_MAX_MODELS] = {0};
    /* across processes the loss sees the global batch -- gathered, or around the ring from each
     * rank's own rows -- and each rank keeps its rows' gradient */
    gc_cache_exchange exchange;
    gc_status status = gc_cache_global_batch(cache, leaves, global, &exchange);
    if (status == GC_OK) status = loss_gradients(cache, global, exchange.ring, loss, global_grads);
    if (status == GC_OK) status = gc_cache_own_rows(cache, global_grads, exchange.own_start, leaves, grads);
    for (int m = 0; m < n; m++) {
        gc_tensor_release(global[m]);
        gc_tensor_release(global_grads[m]);
    }
    if (ring) *ring = exchange.ring;
    return status;
}

/* The chunks of model m's input (new references; release each with gc_batch_release). */
static int split_input(const gc_cache *cache, int m, const gc_batch *input, gc_batch **chunks) {
    const gc_cache_config *config = &cache->config;
    /* the default split's count, or one chunk per row for another split (a token budget's) */
    int64_t rows = gc_batch_rows(input);
    int capacity = config->split ? (int)(rows > 0 ? rows : 1) : gc_chunk_count(rows, config->models[m].chunk_size);
    *chunks = calloc((size_t)capacity, sizeof **chunks);
    if (!*chunks) gc_fatal("cache: out of host memory for %d chunks", capacity);
    gc_split_fn split = config->split ? config->split : gc_split_by_rows;
    return split(input, config->models[m].chunk_size, *chunks, capacity, config->user);
}

gc_tensor *gc_cache_forward_with_graph(const gc_cache *cache, int m, const gc_batch *input) {
    const gc_cache_config *config = &cache->config;
    const gc_cached_model *model = &config->models[m];
    gc_row_order order;
    if (gc_row_order_begin(input, config->sort_by, &order) != GC_OK) return NULL;
    gc_batch *chunks;
    int n_chunks = split_input(cache, m, &order.batch, &chunks);
    gc_tensor **reps = calloc((size_t)(n_chunks > 0 ? n_chunks : 1), sizeof *reps);
    if (!reps) gc_fatal("cache: out of host memory for %d chunks", n_chunks);
    bool ok = n_chunks >= 0;
    for (int c = 0; c < n_chunks && ok; c++) {
        reps[c] = gc_cache_representation(model->state, model->forward, &chunks[c], config->representation, config->user);
        ok = reps[c] != NULL;
    }
    gc_tensor *chunk_rows = ok ? gc_cat0(reps, n_chunks) : NULL;
    gc_tensor *rep = chunk_rows ? gc_row_order_to_batch(&order, chunk_rows) : NULL;
    gc_tensor_release(chunk_rows);
    for (int c = 0; c < n_chunks; c++) {
        gc_tensor_release(reps[c]);
        gc_batch_release(&chunks[c]);
    }
    free(reps);
    free(chunks);
    gc_row_order_end(&order);
    return rep;
}

/* --- one attempt at a step, with fixed chunk sizes --- */

/* Everything one model's part of a step holds, released in one place. */
typedef struct model_pass {
    int n_chunks;
    gc_row_order order;        /* the input in the order its chunks take it (sort_by) */
    gc_batch *chunks;          /* [n_chunks] parts of order.batch, both passes' */
    gc_rng_context *contexts;  /* [n_chunks] RNG state before each chunk's first forward */
    gc_tensor *kept_graph;     /* keep_last_graph: the last chunk's representation, with graph */
    gc_tensor *leaf;           /* all representations, [rows, D] in the batch's order, requiring a gradient */
    gc_tensor *cache;          /* d loss / d leaf, [rows, D] in the chunks' order */
} model_pass;

static void release_pass(model_pass *pass) {
    for (int c = 0; c < pass->n_chunks; c++) gc_batch_release(&pass->chunks[c]);
    free(pass->chunks);
    free(pass->contexts);
    gc_row_order_end(&pass->order);
    gc_tensor_release(pass->kept_graph);
    gc_tensor_release(pass->leaf);
    gc_tensor_release(pass->cache);
    *pass = (model_pass){0};
}

/* Phase bookkeeping for the report: time and peak bytes on `device`. */
typedef struct phase {
    double start;
    bool measure_memory;
    gc_device device;
} phase;

static phase phase_begin(bool measure_memory, gc_device device) {
    if (measure_memory) gc_memory_reset_peak(device);
    return (phase){gc_seconds(), measure_memory, device};
}

static void phase_end(const phase *p, double *seconds, size_t *peak) {
    *seconds = gc_seconds() - p->start;
    if (p->measure_memory) *peak = gc_memory_get_stats(p->device).peak_bytes;
}

/* Step 1 and 2 for one model: its rows' order, chunks, contexts, the graph-less forwards, the
 * leaf in the batch's order. */
static gc_status forward_without_graph(const gc_cache *cache, int m, const gc_batch *input, model_pass *pass) {
    const gc_cache_config *config = &cache->config;
    const gc_cached_model *model = &config->models[m];
    gc_status status = gc_row_order_begin(input, config->sort_by, &pass->order);
    if (status != GC_OK) return status;
    int n_chunks = split_input(cache, m, &pass->order.batch, &pass->chunks);
    status = n_chunks < 0 ? gc_last_status() : GC_OK;
    pass->n_chunks = n_chunks < 0 ? 0 : n_chunks;
    int slots = pass->n_chunks > 0 ? pass->n_chunks : 1;
    pass->contexts = calloc((size_t)slots, sizeof *pass->contexts);
    gc_tensor **reps = calloc((size_t)slots, sizeof *reps);
    if (!pass->contexts || !reps) gc_fatal("cache: out of host memory for %d chunks", slots);
    for (int c = 0; c < pass->n_chunks && status == GC_OK; c++) {
        pass->contexts[c] = gc_rng_capture();
        bool keep = config->keep_last_graph && c == pass->n_chunks - 1;
        bool previous = gc_set_grad_enabled(keep);
        gc_tensor *rep = gc_cache_representation(model->state, model->forward, &pass->chunks[c],
                                                 config->representation, config->user);
        gc_set_grad_enabled(previous);
        if (!rep) {
            status = gc_last_status();
        } else if (keep) {
            pass->kept_graph = rep;
            reps[c] = gc_detach(rep);
        } else {
            reps[c] = rep;
        }
    }
    if (status == GC_OK) {
        bool previous = gc_set_grad_enabled(false);
        gc_tensor *chunk_rows = gc_cat0(reps, pass->n_chunks);
        pass->leaf = chunk_rows ? gc_row_order_to_batch(&pass->order, chunk_rows) : NULL;
        gc_tensor_release(chunk_rows);
        gc_set_grad_enabled(previous);
        if (pass->leaf) gc_set_requires_grad(pass->leaf, true);
        else status = gc_last_status();
    }
    for (int c = 0; c < pass->n_chunks; c++) gc_tensor_release(reps[c]);
    free(reps);
    return status;
}

/* The second pass's representation of chunk c must be what the first pass cached: same
 * shape, and the same dtype (the same precision). */
static void check_second_pass(int m, int c, const gc_tensor *rep, const gc_tensor *seed) {
    char got[128], want[128];
    if (rep && (!gc_same_shape(rep, seed) || rep->dtype != seed->dtype))
        gc_fatal("cache: model %d's second pass gave %s for chunk %d, its first pass %s (both passes must compute in"
                 " one precision)", m, gc_tensor_str(rep, got, sizeof got), c, gc_tensor_str(seed, want, sizeof want));
}

/* Step 4 for one model: each chunk's forward with a graph (RNG replayed) and its backward
 * seeded with the chunk's slice of the cache; with a bucketer, the step's last backward is
 * the one synced (or every one, as many on every rank: gc_cache_sync_pad). */
static gc_status forward_backward(const gc_cache *cache, int m, model_pass *pass, const gc_cache_sync *sync) {
    const gc_cache_config *config = &cache->config;
    const gc_cached_model *model = &config->models[m];
    int64_t start = 0;
    for (int c = 0; c < pass->n_chunks; c++) {
        int64_t rows = gc_batch_rows(&pass->chunks[c]);
        gc_tensor *seed = gc_slice0(pass->cache, start, start + rows);
        start += rows;
        gc_tensor *rep;
        if (pass->kept_graph && c == pass->n_chunks - 1) {
            rep = pass->kept_graph;
            pass->kept_graph = NULL;
        } else {
            gc_rng_context saved = gc_rng_replay_begin(&pass->contexts[c]);
            rep = gc_cache_representation(model->state, model->forward, &pass->chunks[c], config->representation,
                                          config->user);
            gc_rng_replay_end(&saved);
        }
        check_second_pass(m, c, rep, seed);
        bool synced = gc_cache_sync_before(sync, m, c, model->params);
        gc_status status = rep ? gc_cache_backward(config->backward, rep, seed, config->user) : gc_last_status();
        status = gc_cache_sync_after(sync, synced, m, c, status);
        gc_tensor_release(rep);
        gc_tensor_release(seed);
        if (status != GC_OK) return gc_cache_sync_abandon(cache, sync, m, c + 1, status);
    }
    return gc_cache_sync_pad(sync, m, pass->n_chunks, model->params);
}

/* One attempt at a step with fixed chunk sizes: the algorithm of cache.h, in order. */
static gc_status attempt(gc_cache *cache, const gc_batch *inputs, double *loss, gc_cache_report *report) {
    const gc_cache_config *config = &cache->config;
    int n = config->n_models;
    model_pass passes[GC_CACHE_MAX_MODELS] = {{0}};
    gc_cache_report local = {0};
    gc_device device = inputs[0].tensors[0]->device;
    bool measure = report != NULL;
    gc_status status = GC_OK;

    /* 1-2: every chunk's representation without a graph, each chunk's RNG state captured; a
     * model's representations concatenated into a leaf */
    phase p = phase_begin(measure, device);
    for (int m = 0; m < n && status == GC_OK; m++) status = forward_without_graph(cache, m, &inputs[m], &passes[m]);
    phase_end(&p, &local.forward_seconds, &local.forward_peak_bytes);
    status = gc_cache_agree(cache, status); /* across processes: every rank goes on, or none */

    /* 3: the loss over the leaves (the global batch across processes) and the cache,
     * d loss / d leaf; the leaves themselves are not needed after it */
    if (status == GC_OK) {
        p = phase_begin(measure, device);
        gc_tensor *leaves[GC_CACHE_MAX_MODELS], *grads[GC_CACHE_MAX_MODELS] = {0};
        for (int m = 0; m < n; m++) leaves[m] = passes[m].leaf;
        status = gc_cache_loss(cache, leaves, loss, grads, &local.ring_loss);
        for (int m = 0; m < n; m++) {
            /* each chunk's seed is a slice of the cache: in the chunks' order */
            passes[m].cache = grads[m] ? gc_row_order_to_chunks(&passes[m].order, grads[m]) : NULL;
            if (status == GC_OK && !passes[m].cache) status = gc_last_status();
            gc_tensor_release(grads[m]);
            local.cache_bytes += 2 * gc_nbytes(passes[m].leaf);
            gc_tensor_release(passes[m].leaf);
            passes[m].leaf = NULL;
        }
        phase_end(&p, &local.loss_seconds, &local.loss_peak_bytes);
        /* across processes again: the loss's memory (the kept graphs, the gathered batch, its
         * temporaries) may be refused on one rank, and then every rank retries */
        status = gc_cache_agree(cache, status);
    }

    /* 4-5: every chunk again with a graph, its RNG state replayed, and back-propagated from its
     * slice of the cache; with a bucketer only the step's last backward reduces (the last model
     * with a chunk does it) */
    if (status == GC_OK) {
        p = phase_begin(measure, device);
        int64_t chunks[GC_CACHE_MAX_MODELS];
        for (int m = 0; m < n; m++) chunks[m] = passes[m].n_chunks;
        gc_cache_sync sync;
        status = gc_cache_sync_begin(cache, chunks, &sync);
        for (int m = 0; m < n && status == GC_OK; m++) status = forward_backward(cache, m, &passes[m], &sync);
        gc_cache_sync_end(&sync);
        phase_end(&p, &local.backward_seconds, &local.backward_peak_bytes);
        status = gc_cache_agree(cache, status);
    }
    for (int m = 0; m < n; m++) {
        local.chunk_sizes[m] = config->models[m].chunk_size;
        release_pass(&passes[m]);
    }
    local.loss_scale = gc_cache_loss_scale(cache);
    if (report) *report = local;
    return status;
}

gc_status gc_cache_step(gc_cache *cache, const gc_batch *inputs, double *loss, gc_cache_report *report) {
    gc_cache_config *config = &cache->config;
    /* A retry draws the same random numbers as a first attempt would have. */
    gc_rng_context start = gc_rng_capture();
    int retries = 0;
    for (;;) {
        gc_status status = attempt(cache, inputs, loss, report);
        if (report) report->retries = retries;
        bool out_of_memory = status == GC_ERR_OUT_OF_MEMORY || status == GC_ERR_MEM_LIMIT;
        if (!config->auto_chunk || !out_of_memory) return status;
        bool smaller = false;
        if (config->ddp) gc_ddp_zero_grad(config->ddp); /* the failed attempt's partial sums, shards too */
        for (int m = 0; m < config->n_models; m++) {
            if (!config->ddp) gc_param_list_zero_grad(config->models[m].params); /* the same, in one process */
            if (config->models[m].chunk_size > 1) {
                config->models[m].chunk_size -= config->models[m].chunk_size / 2; /* ceil(c / 2), no overflow */
                smaller = true;
            }
        }
        if (!smaller) return status; /* already one row per chunk: it does not fit */
        retries++;
        gc_rng_restore(&start);
        gc_clear_error();
    }
}
