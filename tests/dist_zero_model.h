/* The ZeRO tests' training run (test_dist_zero.c, test_dist_zero_state.c): a dual encoder of
 * two small MLPs (or one, tied) trained contrastively over the process group, each step a
 * Gradient Cache step (or the plain full-batch step) on this rank's rows of the step's global
 * batch, then AdamW with the loss scaler and clipping as asked. Two recipes:
 *   - the reference, the unsharded run: a ZeRO-0 bucketer and gc_adamw on every rank, with
 *     gc_loss_scaler_check_grads + gc_dist_any and gc_clip_grad_scale on the parameters;
 *   - ZeRO: the bucketer at the stage asked for and gc_zero_adamw (check_grads, clipping and
 *     the step through it).
 * Both start from rank 0's weights (the bucketer broadcasts them) and see the same data. */
#ifndef GC_TESTS_DIST_ZERO_MODEL_H
#define GC_TESTS_DIST_ZERO_MODEL_H

#include "dist_spawn.h"
#include "mlp_encoder.h"

#define ZERO_GLOBAL_ROWS 8 /* queries (and passages) per step, split evenly over the ranks */
#define ZERO_CHUNK 2        /* rows per Gradient Cache chunk */

typedef struct zero_case {
    const char *name;
    gc_dtype dtype;
    gc_zero zero;       /* the ZeRO run's stage (the reference is always GC_ZERO_0) */
    bool tied, full_batch, clip, scaler;
    bool sync_every_backward; /* Gradient Cache's: a reduction after every backward at any stage */
    gc_dist_backend backend;  /* the group's; the models live on a GPU for NCCL, else the CPU */
    int accumulate;           /* micro-batches per update (gc_ddp_micro_batch); 0 or 1: one */
    bool uneven;              /* rank 0 has ZERO_CHUNK rows more, rank 1 as many fewer (a world of 2):
                                 shares of unequal chunk counts */
    const char *versus_tcp;   /* a folder: the parameters' change written there (TCP) or compared
                                 with the one written there (another backend); NULL: no */
} zero_case;

static inline int zero_micro_batches(const zero_case *c) { return c->accumulate > 1 ? c->accumulate : 1; }

/* Where rank `rank`'s models live: its own GPU when there are enough, else cuda:0 (NCCL), or
 * the CPU. */
static inline gc_device zero_device(const zero_case *c, int rank) {
    return c->backend == GC_DIST_NCCL ? gc_cuda(rank % gc_cuda_device_count()) : gc_cpu();
}

/* Rank `rank`'s group: the case's backend, on its device. */
static inline gc_process_group *zero_group(const zero_case *c, int rank) {
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){c->backend, 60, zero_device(c, rank)});
    if (!group) {
        fprintf(stderr, "rank %d: %s\n", rank, gc_last_error());
        exit(GC_TEST_SETUP_ERROR);
    }
    return group;
}

typedef struct zero_model {
    mlp_encoder q, p;
    gc_param_list params;
    gc_ddp *ddp;
    gc_adamw adamw;     /* the reference's */
    gc_zero_adamw *opt; /* ZeRO's; NULL for the reference */
    gc_loss_scaler scaler;
} zero_model;

static inline void zero_add_all(gc_param_list *into, const char *prefix, const gc_param_list *from) {
    for (int i = 0; i < from->count; i++) /* the biases without weight decay, as a trainer's lists have them */
        gc_param_list_add(into, prefix, from->items[i].name, from->items[i].tensor, strcmp(from->items[i].name, "b1") == 0);
}

/* A model whose weights start from `seed` (rank 0's are broadcast), with the bucketer at
 * `zero` (small buckets: several per model) and the ZeRO optimizer unless `reference`. */
static inline zero_model zero_model_new(gc_process_group *group, const zero_case *c, gc_zero zero, bool reference,
                                 uint64_t seed) {
    gc_device device = zero_device(c, gc_dist_rank(group));
    zero_model m = {.q = make_encoder_on(device, c->dtype, seed, 0), .p = make_encoder_on(device, c->dtype, seed + 10, 0)};
    zero_add_all(&m.params, "query", &m.q.params);
    if (!c->tied) zero_add_all(&m.params, "passage", &m.p.params);
    gc_ddp_options options = {.first_bucket_bytes = 256, .bucket_bytes = 700, .reduce_in_f32 = true, .zero = zero};
    m.ddp = gc_ddp_new(group, &m.params, &options);
    REQUIRE(m.ddp);
    if (reference) REQUIRE(gc_adamw_init(&m.adamw, &m.params, 1e-2, 0.9, 0.999, 1e-8, 0.01) == GC_OK);
    else m.opt = gc_zero_adamw_new(m.ddp, 1e-2, 0.9, 0.999, 1e-8, 0.01);
    gc_loss_scaler_init(&m.scaler);
    m.scaler.scale = 1024; /* the tiny model's gradients overflow f16 at 2^16 */
    return m;
}

static inline void zero_model_free(zero_model *m) {
    if (m->opt) gc_zero_adamw_free(m->opt);
    else gc_adamw_free(&m->adamw);
    gc_ddp_free(m->ddp);
    gc_param_list_free(&m->params);
    free_encoder(&m->q);
    free_encoder(&m->p);
}

/* Where rank `rank`'s rows of the global batch begin (rank `world`: the end). */
static inline int64_t zero_first_row(const zero_case *c, int rank, int world) {
    return rank * (ZERO_GLOBAL_ROWS / world) + (c->uneven && rank > 0 && rank < world ? ZERO_CHUNK : 0);
}

/* Global batch `step`, the same for every world size and device, and this rank's rows of it:
 * queries and passages [ZERO_GLOBAL_ROWS / world, IN] (uneven: ZERO_CHUNK more or fewer). */
static inline void zero_batch(const zero_case *c, int step, int rank, int world, gc_tensor **q, gc_tensor **p) {
    int64_t first = zero_first_row(c, rank, world), end = zero_first_row(c, rank + 1, world);
    gc_device device = zero_device(c, rank);
    gc_tensor *all_q = gc_uniform(GC_SHAPE(ZERO_GLOBAL_ROWS, IN), c->dtype, device, -1, 1, 1000 + (uint64_t)step, 0);
    gc_tensor *all_p = gc_uniform(GC_SHAPE(ZERO_GLOBAL_ROWS, IN), c->dtype, device, -1, 1, 2000 + (uint64_t)step, 0);
    REQUIRE(all_q && all_p);
    *q = gc_slice0(all_q, first, end);
    *p = gc_slice0(all_p, first, end);
    RELEASE(all_q, all_p);
}

/* Forward and backward of step `step`, through the bucketer's reductions: one batch, or with
 * c->accumulate K the global batches step K + k, k < K, their gradients summed (the bucketer
 * reducing the sum once, after the last; at 2b after every backward, into the shards). */
static inline void zero_backward(zero_model *m, gc_process_group *group, const zero_case *c, int step) {
    mlp_encoder *second = c->tied ? &m->q : &m->p;
    gc_cache_config config = {
        .n_models = 2,
        .models = {{&m->q, encoder_forward, ZERO_CHUNK, &m->q.params}, {second, encoder_forward, ZERO_CHUNK, &second->params}},
        .loss = {.forward = infonce},
        .scaler = c->scaler ? &m->scaler : NULL,
        .group = group,
        .ddp = m->ddp,
        .sync_every_backward = c->sync_every_backward,
    };
    int batches = zero_micro_batches(c);
    for (int k = 0; k < batches; k++) {
        gc_tensor *q, *p;
        zero_batch(c, step * batches + k, gc_dist_rank(group), gc_dist_world_size(group), &q, &p);
        if (batches > 1) gc_ddp_micro_batch(m->ddp, k, batches);
        gc_batch inputs[2] = {{1, {"x"}, {q}}, {1, {"x"}, {p}}};
        gc_cache *cache = gc_cache_new(&config);
        double loss;
        gc_status status = c->full_batch ? gc_cache_full_batch_step(cache, inputs, &loss) : gc_cache_step(cache, inputs, &loss, NULL);
        CHECK_MSG(status == GC_OK, "%s, step %d, batch %d: %s", c->name, step, k, gc_last_error());
        gc_cache_free(cache);
        RELEASE(q, p);
    }
}

#define ZERO_MAX_NORM 0.05 /* below the tiny model's gradient norms: clipping acts */

/* The optimizer's part of the step (the loss scaler's check, clipping, the update), the
 * reference's or ZeRO's recipe; returns whether the step was taken. */
static inline bool zero_update(zero_model *m, gc_process_group *group, const zero_case *c) {
    bool found_inf = false;
    if (c->scaler && m->opt) REQUIRE(gc_zero_adamw_check_grads(m->opt, &found_inf) == GC_OK);
    if (c->scaler && !m->opt) {
        REQUIRE(gc_loss_scaler_check_grads(&m->params, &found_inf) == GC_OK);
        REQUIRE(gc_dist_any(group, &found_inf) == GC_OK);
    }
    if (!found_inf) {
        double grad_scale = c->scaler ? 1 / m->scaler.scale : 1;
        if (c->clip && m->opt) gc_zero_adamw_clip_grad_scale(m->opt, ZERO_MAX_NORM, &grad_scale);
        if (c->clip && !m->opt) gc_clip_grad_scale(&m->params, ZERO_MAX_NORM, &grad_scale);
        gc_status status = m->opt ? gc_zero_adamw_step_scaled(m->opt, grad_scale) : gc_adamw_step_scaled(&m->adamw, grad_scale);
        CHECK_MSG(status == GC_OK, "%s: %s", c->name, gc_last_error());
    }
    if (c->scaler) gc_loss_scaler_update(&m->scaler, found_inf);
    gc_ddp_zero_grad(m->ddp);
    return !found_inf;
}

/* Every parameter as f64, one vector (free it). */
static inline double *zero_values(const zero_model *m, int64_t *n) {
    *n = gc_param_list_numel(&m->params);
    double *values = malloc((size_t)*n * sizeof *values);
    REQUIRE(values);
    for (int i = 0, at = 0; i < m->params.count; at += (int)gc_numel(m->params.items[i].tensor), i++)
        gc_to_host_f64(m->params.items[i].tensor, values + at);
    return values;
}

/* Whether every rank holds the same bytes in every parameter (a hash of them, gathered). */
static inline bool zero_same_on_every_rank(gc_process_group *group, const zero_model *m) {
    gc_xxh64 hash;
    gc_xxh64_begin(&hash);
    for (int i = 0; i < m->params.count; i++) {
        gc_tensor *t = m->params.items[i].tensor;
        void *bytes = malloc(gc_nbytes(t));
        REQUIRE(bytes);
        gc_copy_to_host(t, bytes);
        gc_xxh64_update(&hash, bytes, gc_nbytes(t));
        free(bytes);
    }
    uint64_t mine = gc_xxh64_end(&hash), all[DIST_SPAWN_MAX];
    REQUIRE(gc_dist_all_gather_host(group, &mine, sizeof mine, all) == GC_OK);
    bool same = true;
    for (int r = 0; r < gc_dist_world_size(group); r++) same = same && all[r] == mine;
    return same;
}

#endif
