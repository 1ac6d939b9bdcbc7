/* Mixed precision across processes, in worlds of 2 and 4:
 *   - gc_dist_any: one rank's true is every rank's true (the loss scaler's verdict), and a
 *     step skipped for one rank's overflow is skipped on every rank: parameters, masters
 *     and the scale stay equal across the ranks;
 *   - the bucketer's f16 reduction: with reduce_in_f32 the average is the f32 average of the
 *     ranks' f16 gradients rounded once (bitwise: the f32 sums of a few f16 values near one
 *     magnitude are exact, so it is the exact mean rounded to f16); in f16 it is within an
 *     f16 rounding per addition (2^-11 relative each, so world * 2^-10 bounds it), and a sum
 *     past 65504 is inf even though the average (40000) is not -- the case reduce_in_f32
 *     exists for. */
#include "check.h"
#include "dist_spawn.h"
#include "gradcache/loss_scaler.h"
#include "gradcache/optim.h"

#define N 64

static int any_body(int rank, int world, void *arg) {
    (void)arg;
    gc_process_group *group = dist_test_group(60);
    bool none = false, last = rank == world - 1;
    CHECK(gc_dist_any(group, &none) == GC_OK && !none);
    CHECK(gc_dist_any(group, &last) == GC_OK && last);

    /* one f16 weight with an f32 master; rank 1's gradient overflows, the others' do not */
    gc_tensor *w = gc_uniform(GC_SHAPE(N), GC_F16, gc_cpu(), -1, 1, 7, 0);
    gc_set_requires_grad(w, true);
    gc_param_list params = {0};
    gc_param_list_add(&params, "", "w", w, false);
    gc_sgd sgd;
    REQUIRE(gc_sgd_init(&sgd, &params, 0.1, 0.9, 0) == GC_OK);
    gc_loss_scaler scaler;
    gc_loss_scaler_init(&scaler);
    for (int step = 0; step < 2; step++) {
        double g[N];
        for (int i = 0; i < N; i++) g[i] = (i + 1) * 1e-3;
        if (step == 1 && rank == 1) g[5] = 1e6; /* inf in f16 */
        gc_tensor *g64 = gc_from_host(g, GC_SHAPE(N), GC_F64, gc_cpu()), *grad = gc_cast(g64, GC_F16);
        gc_set_grad(w, grad);
        RELEASE(g64, grad);
        bool found_inf;
        REQUIRE(gc_loss_scaler_check_grads(&params, &found_inf) == GC_OK);
        CHECK(found_inf == (step == 1 && rank == 1));
        REQUIRE(gc_dist_any(group, &found_inf) == GC_OK);
        CHECK_MSG(found_inf == (step == 1), "rank %d step %d: verdict %d", rank, step, found_inf);
        uint16_t before[N];
        gc_copy_to_host(w, before);
        if (!found_inf) REQUIRE(gc_sgd_step_scaled(&sgd, 1 / scaler.scale) == GC_OK);
        gc_loss_scaler_update(&scaler, found_inf);
        uint16_t after[N];
        gc_copy_to_host(w, after);
        if (step == 1) CHECK(memcmp(before, after, sizeof before) == 0 && scaler.scale == 32768);
    }
    /* every rank holds the same weight and master */
    uint16_t mine[N], all[DIST_SPAWN_MAX * N];
    gc_copy_to_host(w, mine);
    REQUIRE(gc_dist_all_gather_host(group, mine, sizeof mine, all) == GC_OK);
    for (int r = 1; r < world; r++) CHECK_MSG(memcmp(all, all + r * N, sizeof mine) == 0, "rank %d's weight differs", r);
    gc_sgd_free(&sgd);
    gc_param_list_free(&params);
    gc_tensor_release(w);
    gc_process_group_free(group);
    return gc_test_result();
}

/* Rank r's gradient: element 0 is 40000 on every rank, the others (i + 1) * (1 + r / 8) / 64. */
static void gradient_of(int rank, double *g) {
    g[0] = 40000;
    for (int i = 1; i < N; i++) g[i] = (i + 1) * (1 + rank / 8.0) / 64;
}

static int reduce_body(int rank, int world, void *arg) {
    bool in_f32 = *(const bool *)arg;
    gc_process_group *group = dist_test_group(60);
    gc_tensor *w = gc_zeros(GC_SHAPE(N), GC_F16, gc_cpu());
    gc_set_requires_grad(w, true);
    gc_param_list params = {0};
    gc_param_list_add(&params, "", "w", w, false);
    gc_ddp_options options = {.find_unused_parameters = true, .reduce_in_f32 = in_f32};
    gc_ddp *ddp = gc_ddp_new(group, &params, &options);
    REQUIRE(ddp);
    double g[N], want[N], got[N];
    gradient_of(rank, g);
    gc_tensor *g64 = gc_from_host(g, GC_SHAPE(N), GC_F64, gc_cpu()), *g16 = gc_cast(g64, GC_F16);
    REQUIRE(gc_copy_(gc_grad(w), g16) == GC_OK); /* into the bucket's view */
    REQUIRE(gc_ddp_wait(ddp) == GC_OK);
    gc_to_host_f64(gc_grad(w), got);
    /* the exact mean of the ranks' f16 values, rounded once to f16 */
    for (int i = 0; i < N; i++) want[i] = 0;
    for (int r = 0; r < world; r++) {
        double theirs[N];
        gradient_of(r, theirs);
        gc_tensor *t64 = gc_from_host(theirs, GC_SHAPE(N), GC_F64, gc_cpu()), *t16 = gc_cast(t64, GC_F16);
        gc_to_host_f64(t16, theirs);
        for (int i = 0; i < N; i++) want[i] += theirs[i] / world;
        RELEASE(t64, t16);
    }
    gc_tensor *w64 = gc_from_host(want, GC_SHAPE(N), GC_F64, gc_cpu()), *w16 = gc_cast(w64, GC_F16);
    gc_to_host_f64(w16, want);
    if (in_f32) {
        CHECK_MSG(memcmp(got, want, sizeof got) == 0, "f32 reduction: element 0 %g, want %g", got[0], want[0]);
    } else {
        CHECK_MSG(isinf(got[0]), "f16 reduction of 40000 over %d ranks gave %g, want inf (the sum overflows)", world,
                  got[0]);
        for (int i = 1; i < N; i++)
            CHECK_MSG(fabs(got[i] - want[i]) <= world * 0x1p-10 * fabs(want[i]), "f16 reduction: element %d %g, want %g",
                      i, got[i], want[i]);
    }
    RELEASE(g64, g16, w64, w16);
    gc_ddp_free(ddp);
    gc_param_list_free(&params);
    gc_tensor_release(w);
    gc_process_group_free(group);
    return gc_test_result();
}

int main(void) {
    bool in_f32 = true, in_f16 = false;
    for (int world = 2; world <= 4; world += 2) {
        CHECK_MSG(dist_all_pass(world, any_body, NULL, 60), "any, world %d", world);
        CHECK_MSG(dist_all_pass(world, reduce_body, &in_f32, 60), "f32 reduction, world %d", world);
        CHECK_MSG(dist_all_pass(world, reduce_body, &in_f16, 60), "f16 reduction, world %d", world);
    }
    return gc_test_result();
}
