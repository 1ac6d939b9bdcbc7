/* ZeRO against the unsharded run (dist_zero_model.h), for any backend, in worlds of 2 and 4
 * processes (test_dist_zero.c: TCP; test_dist_nccl.c: NCCL on GPUs): over
 * several Gradient Cache steps (and plain full-batch ones), ZeRO-1, ZeRO-2 reducing once per
 * step (2a) and ZeRO-2 reducing after every backward (2b) must leave the parameters the
 * reference leaves, in f32, f16 with the loss scaler and bf16, with tied encoders and with
 * clipping:
 *   - bitwise where the reduction order is the same: one reduce-scatter per step of the TCP
 *     ring, whose shard is bitwise its all-reduce's there (test_dist_collectives), and no
 *     clipping;
 *   - to a tolerance where it is not (see zero_tolerance);
 *   - equal on every rank, bitwise, always;
 *   - with the collectives counted: a reduce-scatter per bucket per step (at 2b, per bucket
 *     of the backward's model per backward), an all-gather per bucket per step taken, one
 *     small all-reduce for the loss scaler's verdict and one for the clipping norm, nothing
 *     else beyond the reference's;
 *   - after the reduction and between steps, the gradient memory is the shards (and at ZeRO-1
 *     the local gradient), exactly, by the allocator's count of gradient bytes;
 *   - a step one rank finds an inf in (a poisoned element of rank 0's shard) is skipped by
 *     every rank, as the reference (whose all-reduce spreads the inf) skips it;
 *   - with K batches accumulated per update (gc_ddp_micro_batch), all of the above against the
 *     reference accumulating the same K: the reductions counted per update, the scaler's verdict
 *     and the gradient memory after the update's last batch;
 *   - through another backend than TCP, the parameters' change over the steps that of the same
 *     case run through the TCP ring just before, to the tolerance (dist_versus_tcp.h);
 *   - in a world of 2 whose ranks hold shares of unequal chunk counts, reducing every backward:
 *     as many reductions on either rank (rank 0's count). */
#ifndef GC_TESTS_DIST_ZERO_CHECKS_H
#define GC_TESTS_DIST_ZERO_CHECKS_H

#include "dist_versus_tcp.h"
#include "dist_zero_model.h"

#define STEPS 3
#define POISONED_STEP 1

/* Norm-relative error allowed of the parameters' change over the steps, where sharding adds
 * in another order: 2b sums the ranks' averages of each backward where the reference averages
 * their sums (a rounding per backward in the gradients: 2^-24 in f32, 2^-11 in f16, 2^-8 in
 * bf16), and clipping adds the shards' sums of squares in another order (2^-24 in the norm).
 * AdamW's first steps move each element by about lr g / |g|, so a relative error in a gradient
 * passes into its update as it is -- except where two backwards' contributions nearly cancel,
 * and a rounding flips the sign: an error of 2 lr in that element. In bf16 a few elements in a
 * thousand do (measured: up to 0.09 over these steps), in f16 and f32 next to none. */
static inline double zero_tolerance(const zero_case *c) {
    bool other_order = c->zero == GC_ZERO_2_EVERY_BACKWARD || c->sync_every_backward || c->backend == GC_DIST_NCCL;
    if (!other_order) return 1e-6; /* clipping alone */
    return c->dtype == GC_F32 ? 1e-5 : c->dtype == GC_F16 ? 1e-2 : 0.2;
}

/* An inf in element 0 of bucket 0, after the reduction: in the reference's gradient on every
 * rank (what its all-reduce spreads), in ZeRO's shard on rank 0 alone (element 0 is rank 0's). */
static inline void zero_poison(zero_model *m, int rank) {
    if (m->opt && rank != 0) return;
    gc_tensor *element = gc_slice0(gc_ddp_get_bucket(m->ddp, 0).shard_grad, 0, 1); /* the buffer at ZeRO-0 */
    gc_fill_(element, INFINITY);
    RELEASE(element);
}

typedef struct zero_counts {
    gc_dist_stats group;
    gc_ddp_stats ddp;
    gc_zero_stats zero;
} zero_counts;

static inline zero_counts zero_counts_of(gc_process_group *group, const zero_model *m) {
    return (zero_counts){gc_dist_get_stats(group), gc_ddp_get_stats(m->ddp), m->opt ? gc_zero_adamw_get_stats(m->opt) : (gc_zero_stats){0}};
}

/* One step of a model; true when it was taken. With `want_grads`, the bytes of gradients live
 * after the reduction must be those. */
static inline bool zero_step_of(zero_model *m, gc_process_group *group, const zero_case *c, int step, size_t want_grads) {
    zero_backward(m, group, c, step);
    size_t grads = gc_memory_get_stats(zero_device(c, gc_dist_rank(group))).role_live_bytes[GC_MEMORY_GRADIENTS];
    CHECK_MSG(!want_grads || grads == want_grads, "%s: %zu bytes of gradients live after the reduction, want %zu",
              c->name, grads, want_grads);
    if (c->scaler && step == POISONED_STEP) zero_poison(m, gc_dist_rank(group));
    return zero_update(m, group, c);
}

static int dist_zero_body(int rank, int world, void *arg) {
    const zero_case *c = arg;
    gc_process_group *group = zero_group(c, rank);
    zero_model ref = zero_model_new(group, c, GC_ZERO_0, true, 10 + 100 * (uint64_t)rank);
    zero_model z = zero_model_new(group, c, c->zero, false, 10 + 100 * (uint64_t)rank);
    int64_t n, buckets = gc_ddp_get_stats(z.ddp).buckets;
    double *start = zero_values(&ref, &n);
    /* the reference holds its whole gradient, ZeRO its shards and, at stage 1, its whole local
     * gradient (zeroed after the reduction); stage 2 has freed its buckets once reduced */
    size_t element = gc_dtype_size(c->dtype), shards = 0;
    for (int b = 0; b < buckets; b++) shards += (size_t)gc_ddp_get_bucket(z.ddp, (int)b).shard_count * element;
    size_t want_grads = (size_t)n * element * (c->zero == GC_ZERO_1 ? 2 : 1) + shards;
    bool every = c->zero == GC_ZERO_2_EVERY_BACKWARD || c->sync_every_backward;
    bool bitwise = !c->clip && !every && c->backend == GC_DIST_TCP; /* NCCL's algorithms differ by collective */
    /* reductions per step: one per bucket, or when every backward is reduced one per bucket of
     * the backward's model, each model's chunks after another */
    int64_t chunks = c->full_batch ? 1 : (zero_first_row(c, 1, world) - zero_first_row(c, 0, world)) / ZERO_CHUNK;
    int64_t by_model = chunks * (dist_buckets_holding(z.ddp, &z.q.params) +
                                 dist_buckets_holding(z.ddp, c->tied ? &z.q.params : &z.p.params));
    /* with accumulation, only the last micro-batch syncs -- except at 2b, whose every micro-batch
     * reduces every backward into the shards (each a check that every rank runs as many) */
    int64_t syncing = c->zero == GC_ZERO_2_EVERY_BACKWARD ? zero_micro_batches(c) : 1;
    int64_t reductions = every ? syncing * by_model : buckets, ref_reductions = c->sync_every_backward ? by_model : buckets;
    for (int step = 0; step < STEPS; step++) {
        zero_counts a = zero_counts_of(group, &ref);
        bool ref_took = zero_step_of(&ref, group, c, step, 0);
        zero_counts b = zero_counts_of(group, &ref), d = zero_counts_of(group, &z);
        bool took = zero_step_of(&z, group, c, step, want_grads);
        zero_counts e = zero_counts_of(group, &z);
        CHECK_MSG(took == ref_took && took == !(c->scaler && step == POISONED_STEP), "%s, step %d: taken %d, reference %d",
                  c->name, step, took, ref_took);
        /* beyond the reference's: the reductions, the gathers, the verdict and the norm */
        int64_t extra = reductions - ref_reductions + (took ? buckets : 0) + (took && c->clip) +
                        (every ? syncing : 0) - c->sync_every_backward; /* the checks that every rank runs as many */
        CHECK_MSG(e.group.collectives - d.group.collectives == b.group.collectives - a.group.collectives + extra,
                  "%s, step %d: %lld collectives, the reference %lld", c->name, step,
                  (long long)(e.group.collectives - d.group.collectives), (long long)(b.group.collectives - a.group.collectives));
        CHECK_MSG(e.ddp.all_reduces - d.ddp.all_reduces == reductions, "%s, step %d: %lld reductions, want %lld", c->name,
                  step, (long long)(e.ddp.all_reduces - d.ddp.all_reduces), (long long)reductions);
        CHECK(e.zero.all_gathers - d.zero.all_gathers == (took ? buckets : 0));
        CHECK(e.zero.agreements - d.zero.agreements == c->scaler + (took && c->clip));
        CHECK_MSG(zero_same_on_every_rank(group, &z), "%s, step %d: the ranks' parameters differ", c->name, step);
        double *want = zero_values(&ref, &n), *got = zero_values(&z, &n);
        if (bitwise)
            CHECK_MSG(memcmp(got, want, (size_t)n * sizeof *got) == 0, "%s, world %d, step %d: not the reference's bits",
                      c->name, world, step);
        for (int64_t i = 0; i < n; i++) got[i] -= start[i], want[i] -= start[i]; /* the changes over the steps */
        double error = relative_error(got, want, n);
        CHECK_MSG(bitwise || error <= zero_tolerance(c), "%s, world %d, step %d: change %.3g from the reference's",
                  c->name, world, step, error);
        if (c->versus_tcp && step == STEPS - 1)
            dist_versus_tcp(c->versus_tcp, c->backend, rank, got, n, zero_tolerance(c), c->name);
        free(want);
        free(got);
    }
    /* the shards hold 1/world of the state (one element more per bucket at most) */
    size_t per_element = c->dtype == GC_F32 ? 8 : 12, whole = (size_t)n * per_element;
    size_t held = gc_zero_adamw_get_stats(z.opt).state_bytes;
    CHECK_MSG(held * world <= whole + (size_t)(world * buckets) * per_element && held * world >= whole - (size_t)(world * buckets) * per_element,
              "%s: %zu bytes of state on rank %d, %zu in all", c->name, held, rank, whole);
    size_t grads = gc_memory_get_stats(zero_device(c, rank)).role_live_bytes[GC_MEMORY_GRADIENTS];
    CHECK_MSG(grads == want_grads, "%s: %zu bytes of gradients live between steps, want %zu", c->name, grads, want_grads);
    free(start);
    zero_model_free(&z);
    zero_model_free(&ref);
    gc_process_group_free(group);
    return gc_test_result();
}

/* The case in a world of `world`, given `seconds`; through another backend than TCP, after the
 * same case through the TCP ring, whose change of the parameters it must reach. */
static void zero_run(int world, zero_case c, double seconds) {
    char folder[64];
    if (c.backend != GC_DIST_TCP) {
        dist_versus_folder(folder);
        zero_case tcp = c;
        tcp.backend = GC_DIST_TCP;
        tcp.versus_tcp = c.versus_tcp = folder;
        CHECK_MSG(dist_all_pass(world, dist_zero_body, &tcp, seconds), "world %d, TCP: %s", world, c.name);
    }
    CHECK_MSG(dist_all_pass(world, dist_zero_body, &c, seconds), "world %d: %s", world, c.name);
    if (c.versus_tcp) dist_versus_folder_free(folder, world);
}

/* Every stage and dtype in worlds of 2 and (max_world 4) 4, through `backend`, each run given
 * `seconds`: tied encoders, the plain step and clipping taken in turns, so that each meets every
 * stage and dtype across the worlds; and ZeRO-1 reducing after every backward, whose every
 * reduction must leave the local gradient zero for the next and whose shard adds them up. */
static void dist_zero_run_all(gc_dist_backend backend, int max_world, double seconds) {
    const gc_dtype dtypes[] = {GC_F32, GC_F16, GC_BF16};
    const gc_zero stages[] = {GC_ZERO_1, GC_ZERO_2, GC_ZERO_2_EVERY_BACKWARD};
    const char *names[] = {"1", "2a", "2b"};
    int variant = 0;
    for (int world = 2; world <= max_world; world += 2) {
        for (int d = 0; d < 3; d++)
            for (int s = 0; s < 3; s++, variant++) {
                char name[96];
                zero_case c = {name, dtypes[d], stages[s], variant % 2 == 1, variant % 5 == 2, variant % 3 != 0,
                               dtypes[d] == GC_F16, false, backend, 1, false, NULL};
                snprintf(name, sizeof name, "ZeRO-%s %s%s%s%s", names[s], gc_dtype_name(dtypes[d]), c.tied ? ", tied" : "",
                         c.full_batch ? ", plain step" : "", c.clip ? ", clipped" : "");
                zero_run(world, c, seconds);
            }
        zero_case c = {"ZeRO-1 f32, every backward reduced", GC_F32, GC_ZERO_1, .sync_every_backward = true,
                       .backend = backend};
        zero_run(world, c, seconds);
        /* shares of unequal chunk counts (3 and 1 a side): rank 1 takes part in rank 0's last
         * reductions of each model with nothing of its own */
        const zero_case uneven[] = {
            {"ZeRO-2b f32, 3 and 1 chunks", GC_F32, GC_ZERO_2_EVERY_BACKWARD, .backend = backend, .uneven = true},
            {"ZeRO-2b bf16, 3 and 1 chunks, tied, clipped", GC_BF16, GC_ZERO_2_EVERY_BACKWARD, .tied = true,
             .clip = true, .backend = backend, .uneven = true},
            {"ZeRO-1 f32, every backward reduced, 3 and 1 chunks", GC_F32, GC_ZERO_1, .sync_every_backward = true,
             .backend = backend, .uneven = true},
        };
        for (size_t i = 0; i < sizeof uneven / sizeof *uneven && world == 2; i++)
            zero_run(world, uneven[i], seconds);
        /* K batches accumulated per update against the reference accumulating them: at 1 and 2a
         * one reduction per update (bitwise on the TCP ring), at 2b every backward's added into
         * the shards; the f16 case's scaler judges the update once, after its last batch */
        const zero_case accumulated[] = {
            {"ZeRO-1 f32, 3 batches accumulated", GC_F32, GC_ZERO_1, .backend = backend, .accumulate = 3},
            {"ZeRO-2a f32, 3 batches accumulated, tied", GC_F32, GC_ZERO_2, .tied = true, .backend = backend,
             .accumulate = 3},
            {"ZeRO-2b f32, 3 batches accumulated, clipped", GC_F32, GC_ZERO_2_EVERY_BACKWARD, .clip = true,
             .backend = backend, .accumulate = 3},
            {"ZeRO-2a f16, 2 batches accumulated, plain step", GC_F16, GC_ZERO_2, .full_batch = true, .scaler = true,
             .backend = backend, .accumulate = 2},
            {"ZeRO-2b bf16, 2 batches accumulated", GC_BF16, GC_ZERO_2_EVERY_BACKWARD, .backend = backend,
             .accumulate = 2},
        };
        for (size_t i = 0; i < sizeof accumulated / sizeof *accumulated; i++)
            zero_run(world, accumulated[i], seconds);
    }
}

#endif
