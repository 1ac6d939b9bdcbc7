/* Distributed Gradient Cache against one process, for any backend and device: in a world
 * of processes each giving its own rows of a global batch, one step must give every
 * parameter the gradient one process's plain full-batch step gets over the whole global batch
 * (one forward and backward per model; norm-relative <= 1e-5 in f32, <= 1e-10 in f64), and
 * after an AdamW step the parameters must be equal on every rank, bitwise, and to the one
 * process's to the same tolerance -- and, through another backend than TCP, to those of the
 * same scenario run through the TCP ring just before (dist_versus_tcp.h); the bucketer must
 * run exactly one all-reduce per bucket per step with sync suppressed, one per bucket of the
 * model's parameters per synced backward without. The one process runs on the CPU: on a GPU this also checks the
 * CUDA backend against the CPU. No dropout: the ranks draw their own masks, which one
 * process cannot reproduce. */
#ifndef GC_TESTS_DIST_CACHE_CHECKS_H
#define GC_TESTS_DIST_CACHE_CHECKS_H

#include "check.h"
#include "dist_spawn.h"
#include "dist_versus_tcp.h"
#include "functional_step.h"
#include "mlp_encoder.h"

typedef struct dist_scenario {
    const char *name;
    gc_dtype dtype;
    int64_t counts[4];         /* queries per rank */
    int negatives;             /* hard negatives per query */
    int64_t chunk;             /* queries per chunk (passages: chunk * (1 + negatives)) */
    bool tied, keep_last_graph, sync_every_backward, full_batch;
    gc_dist_backend backend;   /* the group's; the models live on cuda:0 for NCCL, else the CPU */
    bool tiled_loss;           /* the ranks' loss: the tiled contrastive loss (tiles of 3 rows)
                                  instead of infonce; the one process keeps infonce */
    gc_global_loss global_loss; /* with the tiled loss: gathered, around the ring, or AUTO */
    double ring_share;         /* AUTO's share (0: the default, which these batches never reach) */
    bool ring;                 /* the cached step must report the ring, and gc_cache_verify must
                                  find it equal to the plain step (which runs it too) */
    const gc_loss_fn *loss;    /* NULL: as tiled_loss says; else the ranks' loss, whose forward
                                  the one process differentiates by autograd */
    int positives;             /* passages per query before its hard negatives (0: one) */
    int accumulate;            /* steps, each on a global batch of its own, accumulated into one
                                  reduction (gc_ddp_micro_batch); 0: one step */
    bool functional;           /* the ranks' step through the functional API (functional_step.h),
                                  small batches of `chunk` rows */
    const char *versus_tcp;    /* a folder: the parameters after the step written there (TCP) or
                                  compared with those written there (another backend); NULL: no */
} dist_scenario;

/* Rows [(k total + start) size, (k total + start + count) size) of x: global batch k's rows of a
 * rank whose queries start at `start`, `size` rows per query; on `device`. */
static gc_tensor *rank_rows(const gc_tensor *x, int64_t k, int64_t total, int64_t start, int64_t count, int64_t size,
                            gc_device device) {
    gc_tensor *rows = gc_slice0(x, (k * total + start) * size, (k * total + start + count) * size);
    gc_tensor *moved = gc_to_device(rows, device);
    gc_tensor_release(rows);
    REQUIRE(moved);
    return moved;
}

static void add_all(gc_param_list *into, const char *prefix, const gc_param_list *from) {
    for (int i = 0; i < from->count; i++)
        gc_param_list_add(into, prefix, from->items[i].name, from->items[i].tensor, from->items[i].no_decay);
}

/* The element-wise max and min over ranks equal each rank's own values (on any device). */
static bool equal_on_every_rank(gc_process_group *group, const gc_param_list *params) {
    bool equal = true;
    for (int i = 0; i < params->count; i++) {
        gc_tensor *t = params->items[i].tensor, *high = gc_clone(t), *low = gc_clone(t);
        REQUIRE(high && low);
        equal = equal && gc_dist_all_reduce(group, high, GC_DIST_MAX) == GC_OK &&
                gc_dist_all_reduce(group, low, GC_DIST_MIN) == GC_OK;
        int64_t n = gc_numel(t);
        double *mine = malloc((size_t)n * sizeof *mine), *most = malloc((size_t)n * sizeof *most),
               *least = malloc((size_t)n * sizeof *least);
        REQUIRE(mine && most && least);
        gc_to_host_f64(t, mine);
        gc_to_host_f64(high, most);
        gc_to_host_f64(low, least);
        equal = equal && memcmp(mine, most, (size_t)n * sizeof *mine) == 0 &&
                memcmp(mine, least, (size_t)n * sizeof *mine) == 0;
        free(mine);
        free(most);
        free(least);
        RELEASE(high, low);
    }
    return equal;
}

static double *param_values(const gc_param_list *params, int64_t *n) {
    *n = gc_param_list_numel(params);
    double *values = malloc((size_t)*n * sizeof *values);
    REQUIRE(values);
    int64_t at = 0;
    for (int i = 0; i < params->count; i++) {
        gc_to_host_f64(params->items[i].tensor, values + at);
        at += gc_numel(params->items[i].tensor);
    }
    return values;
}

static double *param_grads(const gc_param_list *params, int64_t *n) {
    *n = gc_param_list_numel(params);
    double *values = malloc((size_t)*n * sizeof *values);
    REQUIRE(values);
    int64_t at = 0;
    for (int i = 0; i < params->count; i++) {
        REQUIRE(gc_grad(params->items[i].tensor));
        gc_to_host_f64(gc_grad(params->items[i].tensor), values + at);
        at += gc_numel(params->items[i].tensor);
    }
    return values;
}

/* The step (cached or plain) of `config` on `inputs`; a cached step's report says whether
 * the loss ran around the ring. */
static gc_status step(const dist_scenario *s, gc_cache_config *config, gc_batch *inputs, double *loss, bool *ring) {
    *ring = false;
    if (s->functional) return functional_step(config, inputs, loss);
    gc_cache *cache = gc_cache_new(config);
    gc_cache_report report = {0};
    gc_status status = s->full_batch ? gc_cache_full_batch_step(cache, inputs, loss)
                                     : gc_cache_step(cache, inputs, loss, &report);
    *ring = report.ring_loss;
    gc_cache_free(cache);
    return status;
}

/* gc_cache_verify with the ring: the cached step's parameter gradients equal the plain
 * step's (both through the ring) to the tolerance of the one-process comparison. */
static void verify_ring(const dist_scenario *s, gc_cache_config *config, gc_batch *inputs, double tolerance) {
    gc_cache *cache = gc_cache_new(config);
    double relative;
    CHECK_MSG(gc_cache_verify(cache, inputs, 1e-6, &relative, NULL, 0) == GC_OK, "%s: %s", s->name, gc_last_error());
    CHECK_MSG(relative <= tolerance, "%s: gc_cache_verify through the ring: relative difference %.3g", s->name,
              relative);
    gc_cache_free(cache);
}

static int dist_cache_body(int rank, int world, void *arg) {
    const dist_scenario *s = arg;
    gc_device device = s->backend == GC_DIST_NCCL ? gc_cuda(0) : gc_cpu();
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){s->backend, 60, device});
    REQUIRE(group);
    int64_t group_size = (s->positives > 1 ? s->positives : 1) + s->negatives, total = 0, start = 0;
    for (int r = 0; r < world; r++) total += s->counts[r];
    for (int r = 0; r < rank; r++) start += s->counts[r];
    int steps = s->accumulate > 1 ? s->accumulate : 1;
    gc_tensor *xq = gc_uniform(GC_SHAPE(steps * total, IN), s->dtype, gc_cpu(), -1, 1, 30, 0);
    gc_tensor *xp = gc_uniform(GC_SHAPE(steps * total * group_size, IN), s->dtype, gc_cpu(), -1, 1, 31, 0);
    gc_tensor *my_q = NULL, *my_p = NULL; /* the last step's rows of this rank */
    REQUIRE(xq && xp);

    /* this rank's models start elsewhere: the bucketer must broadcast rank 0's values */
    mlp_encoder q = make_encoder_on(device, s->dtype, 10 + 100 * (uint64_t)rank, 0);
    mlp_encoder p = make_encoder_on(device, s->dtype, 20 + 100 * (uint64_t)rank, 0);
    mlp_encoder ref_q = make_encoder(s->dtype, 10, 0), ref_p = make_encoder(s->dtype, 20, 0);
    mlp_encoder *second = s->tied ? &q : &p, *ref_second = s->tied ? &ref_q : &ref_p;
    gc_param_list params = {0}, ref_params = {0};
    add_all(&params, "query", &q.params);
    add_all(&ref_params, "query", &ref_q.params);
    if (!s->tied) {
        add_all(&params, "passage", &p.params);
        add_all(&ref_params, "passage", &ref_p.params);
    }
    gc_ddp_options small_buckets = {.first_bucket_bytes = 256, .bucket_bytes = 1024};
    gc_ddp *ddp = gc_ddp_new(group, &params, &small_buckets);
    REQUIRE(ddp);
    int64_t n;
    double *mine = param_values(&params, &n), *theirs = param_values(&ref_params, &n);
    CHECK_MSG(memcmp(mine, theirs, (size_t)n * sizeof *mine) == 0, "%s: rank %d did not start from rank 0's values",
              s->name, rank);
    free(mine);
    free(theirs);

    gc_batch inputs[2] = {{1, {"x"}, {NULL}}, {1, {"x"}, {NULL}}};
    /* infonce's loss: dot products at temperature 0.5, query i's positive passage i (Np / Nq) */
    gc_contrastive_options tiled = {.similarity = GC_SIMILARITY_DOT, .temperature = 0.5,
                                    .method = GC_CONTRASTIVE_TILED, .tile_size = 3};
    gc_cache_config config = {
        .n_models = 2,
        .models = {{&q, encoder_forward, s->chunk, &q.params}, {second, encoder_forward, s->chunk * group_size, &second->params}},
        .loss = {.forward = infonce},
        .keep_last_graph = s->keep_last_graph,
        .group = group,
        .ddp = ddp,
        .sync_every_backward = s->sync_every_backward,
    };
    if (s->tiled_loss) config.loss = gc_contrastive_loss_fn(&tiled);
    if (s->loss) config.loss = *s->loss;
    config.global_loss = s->global_loss;
    config.ring_share = s->ring_share;
    gc_ddp_stats before = gc_ddp_get_stats(ddp);
    double loss = 0, ref_loss = 0;
    bool ring = false;
    for (int k = 0; k < steps; k++) {
        RELEASE(my_q, my_p);
        inputs[0].tensors[0] = my_q = rank_rows(xq, k, total, start, s->counts[rank], 1, device);
        inputs[1].tensors[0] = my_p = rank_rows(xp, k, total, start, s->counts[rank], group_size, device);
        if (steps > 1) gc_ddp_micro_batch(ddp, k, steps);
        CHECK_MSG(step(s, &config, inputs, &loss, &ring) == GC_OK, "%s: %s", s->name, gc_last_error());
    }
    CHECK_MSG(s->full_batch || ring == s->ring, "%s: the step %s the ring", s->name, ring ? "took" : "did not take");
    gc_ddp_stats after = gc_ddp_get_stats(ddp);
    /* reducing every backward, a model's backward reduces the buckets of its own parameters */
    int64_t chunks = s->full_batch ? 1 : (s->counts[rank] + s->chunk - 1) / s->chunk; /* per model, both alike */
    int64_t reductions = s->sync_every_backward
                             ? chunks * (dist_buckets_holding(ddp, &q.params) + dist_buckets_holding(ddp, &second->params))
                             : after.buckets;
    CHECK_MSG(after.all_reduces - before.all_reduces == reductions,
              "%s: %lld all-reduces for %d buckets, want %lld", s->name,
              (long long)(after.all_reduces - before.all_reduces), after.buckets, (long long)reductions);
    CHECK_MSG(after.buckets >= (s->tied ? 2 : 3), "%d buckets", after.buckets); /* small buckets split them */

    gc_cache_config ref_config = config;
    ref_config.models[0].state = &ref_q;
    ref_config.models[0].params = &ref_q.params;
    ref_config.models[1].state = ref_second;
    ref_config.models[1].params = &ref_second->params;
    ref_config.loss = s->loss ? (gc_loss_fn){.forward = s->loss->forward, .args = s->loss->args}
                              : (gc_loss_fn){.forward = infonce};
    ref_config.group = NULL;
    ref_config.ddp = NULL;
    ref_config.global_loss = GC_GLOBAL_LOSS_AUTO;
    ref_config.models[0].chunk_size = total; /* the whole global batch in one forward */
    ref_config.models[1].chunk_size = total * group_size;
    for (int k = 0; k < steps; k++) { /* the steps' gradients add up in the parameters' */
        gc_tensor *q_rows = rank_rows(xq, k, total, 0, total, 1, gc_cpu());
        gc_tensor *p_rows = rank_rows(xp, k, total, 0, total, group_size, gc_cpu());
        gc_batch ref_inputs[2] = {{1, {"x"}, {q_rows}}, {1, {"x"}, {p_rows}}};
        gc_cache *full_batch = gc_cache_new(&ref_config);
        REQUIRE(gc_cache_full_batch_step(full_batch, ref_inputs, &ref_loss) == GC_OK);
        gc_cache_free(full_batch);
        RELEASE(q_rows, p_rows);
    }

    /* f32: the steps add the same terms in other orders (the ring's sum over ranks, chunked
     * matmuls): ~1e-7 per rounding, under 1e-5 after the few ops here. f64: ~1e-16 each. */
    double tolerance = s->dtype == GC_F64 ? 1e-10 : 1e-5;
    double *got = param_grads(&params, &n), *want = param_grads(&ref_params, &n);
    double error = relative_error(got, want, n);
    CHECK_MSG(error <= tolerance, "%s, world %d, rank %d: gradient relative error %.3g", s->name, world, rank, error);
    CHECK_MSG(fabs(loss - ref_loss) <= tolerance * fabs(ref_loss), "%s: loss %.10g, one process %.10g", s->name, loss,
              ref_loss);
    free(got);
    free(want);
    if (s->ring) verify_ring(s, &config, inputs, tolerance);

    gc_adamw opt, ref_opt;
    REQUIRE(gc_adamw_init(&opt, &params, 1e-2, 0.9, 0.999, 1e-8, 0.01) == GC_OK);
    REQUIRE(gc_adamw_init(&ref_opt, &ref_params, 1e-2, 0.9, 0.999, 1e-8, 0.01) == GC_OK);
    REQUIRE(gc_adamw_step(&opt) == GC_OK && gc_adamw_step(&ref_opt) == GC_OK);
    CHECK_MSG(equal_on_every_rank(group, &params), "%s: the parameters differ between ranks", s->name);
    got = param_values(&params, &n);
    want = param_values(&ref_params, &n);
    error = relative_error(got, want, n);
    CHECK_MSG(error <= tolerance, "%s: parameters after AdamW: relative error %.3g", s->name, error);
    if (s->versus_tcp) dist_versus_tcp(s->versus_tcp, s->backend, rank, got, n, tolerance, s->name);
    free(got);
    free(want);

    gc_adamw_free(&opt);
    gc_adamw_free(&ref_opt);
    gc_ddp_free(ddp);
    gc_param_list_free(&params);
    gc_param_list_free(&ref_params);
    free_encoder(&q);
    free_encoder(&p);
    free_encoder(&ref_q);
    free_encoder(&ref_p);
    RELEASE(xq, xp, my_q, my_p);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Every scenario in a world of 2, and (worlds > 2) of 4, through `backend` (those with the ring
 * loss when `ring`), each run given `seconds` in all; through another backend than TCP, each
 * scenario runs through the TCP ring first, whose parameters the other backend's must reach. */
static inline void dist_cache_run_all(gc_dist_backend backend, int worlds, bool ring, double seconds) {
    const dist_scenario two[] = {
        {"f32, equal rows", GC_F32, {8, 8}, 0, 2, false, false, false, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f64, unequal rows, 1 hard negative", GC_F64, {5, 11}, 1, 3, false, false, false, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f32, tied, unequal rows", GC_F32, {7, 3}, 0, 2, true, false, false, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f32, kept last graph", GC_F32, {6, 6}, 1, 4, false, true, false, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f32, sync every backward", GC_F32, {8, 8}, 0, 2, false, false, true, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f64, plain step, unequal rows", GC_F64, {9, 4}, 1, 4, false, false, false, true,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f64, tiled loss, unequal rows, 1 hard negative", GC_F64, {5, 8}, 1, 3, false, false, false, false,
         GC_DIST_TCP, true, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f32, tiled loss, tied", GC_F32, {7, 7}, 0, 2, true, false, false, false,
         GC_DIST_TCP, true, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
    };
    const dist_scenario two_ring[] = {
        {"f64, ring loss, unequal rows, 1 hard negative", GC_F64, {5, 8}, 1, 3, false, false, false, false, GC_DIST_TCP,
         true, GC_GLOBAL_LOSS_RING, 0, true, NULL, 0, 0, false, NULL},
        {"f32, ring loss, tied, kept last graph", GC_F32, {7, 7}, 0, 2, true, true, false, false, GC_DIST_TCP, true,
         GC_GLOBAL_LOSS_RING, 0, true, NULL, 0, 0, false, NULL},
        {"f64, ring loss, plain step", GC_F64, {6, 3}, 1, 4, false, false, false, true, GC_DIST_TCP, true,
         GC_GLOBAL_LOSS_RING, 0, false, NULL, 0, 0, false, NULL},
        /* a share of the memory limit so small that the gathered batch passes it */
        {"f64, auto takes the ring", GC_F64, {4, 5}, 0, 2, false, false, false, false, GC_DIST_TCP, true,
         GC_GLOBAL_LOSS_AUTO, 1e-15, true, NULL, 0, 0, false, NULL},
        {"f64, gather forced, auto would ring", GC_F64, {4, 5}, 0, 2, false, false, false, false, GC_DIST_TCP, true,
         GC_GLOBAL_LOSS_GATHER, 1e-15, false, NULL, 0, 0, false, NULL},
    };
    const dist_scenario four[] = {
        {"f32, equal rows", GC_F32, {4, 4, 4, 4}, 0, 2, false, false, false, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f64, unequal rows, 2 hard negatives", GC_F64, {3, 1, 6, 4}, 2, 2, false, false, false, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f64, tied, unequal rows", GC_F64, {2, 5, 1, 3}, 0, 2, true, true, false, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f32, sync every backward", GC_F32, {4, 4, 4, 4}, 1, 1, true, false, true, false,
         GC_DIST_TCP, false, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
        {"f64, tiled loss, unequal rows", GC_F64, {3, 1, 6, 4}, 1, 2, false, false, false, false,
         GC_DIST_TCP, true, GC_GLOBAL_LOSS_AUTO, 0, false, NULL, 0, 0, false, NULL},
    };
    const dist_scenario four_ring[] = {
        {"f64, ring loss, unequal rows, 2 hard negatives", GC_F64, {3, 1, 6, 4}, 2, 2, false, false, false, false,
         GC_DIST_TCP, true, GC_GLOBAL_LOSS_RING, 0, true, NULL, 0, 0, false, NULL},
        {"f32, ring loss, tied, sync every backward", GC_F32, {4, 4, 4, 4}, 1, 1, true, false, true, false,
         GC_DIST_TCP, true, GC_GLOBAL_LOSS_RING, 0, true, NULL, 0, 0, false, NULL},
    };
    struct {
        const dist_scenario *scenarios;
        size_t count;
        int world;
    } runs[] = {{two, sizeof two / sizeof *two, 2},
                {two_ring, ring ? sizeof two_ring / sizeof *two_ring : 0, 2},
                {four, worlds > 2 ? sizeof four / sizeof *four : 0, 4},
                {four_ring, worlds > 2 && ring ? sizeof four_ring / sizeof *four_ring : 0, 4}};
    char folder[64];
    dist_versus_folder(folder);
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++)
        for (size_t i = 0; i < runs[k].count; i++) {
            dist_scenario s = runs[k].scenarios[i];
            if (backend != GC_DIST_TCP) {
                s.backend = GC_DIST_TCP;
                s.versus_tcp = folder;
                CHECK_MSG(dist_all_pass(runs[k].world, dist_cache_body, &s, seconds), "world %d, TCP: %s",
                          runs[k].world, s.name);
            }
            s.backend = backend;
            CHECK_MSG(dist_all_pass(runs[k].world, dist_cache_body, &s, seconds), "world %d: %s", runs[k].world, s.name);
        }
    dist_versus_folder_free(folder, worlds > 2 ? 4 : 2);
}

#endif
