/* The GIST loss on a device (on CUDA: the score-tile kernels' bias, the mask's ops) against
 * the CPU, for test_loss_tiled_cuda.c: the PyTorch fixture's cases untiled and tiled by 2 and 3
 * (f64, to the fixture's 1e-12), and a larger batch (300 queries, 600 passages: several tiles,
 * blocks of threads per row) tiled by 37 and by the CUDA default against the CPU's f64 tiled
 * loss, the student in f64 and f32. */
#ifndef GC_TESTS_GIST_CUDA_CHECKS_H
#define GC_TESTS_GIST_CUDA_CHECKS_H

#include "loss_checks.h"

/* The loss's value and gradients through gc_gist_value_and_grad. */
typedef struct gist_outcome {
    double value;
    gc_tensor *grads[2];
} gist_outcome;

static gist_outcome gist_run(const gc_tensor *q, const gc_tensor *p, const gc_gist_options *options) {
    gist_outcome o = {0};
    CHECK_MSG(gc_gist_value_and_grad(q, p, options, 1, &o.value, &o.grads[0], &o.grads[1]) == GC_OK, "%s",
              gc_last_error());
    return o;
}

static gc_tensor *gist_on(const gc_tensor *x, gc_device device, gc_dtype dtype) {
    gc_tensor *moved = gc_to_device(x, device), *cast = moved ? gc_cast(moved, dtype) : NULL;
    gc_tensor_release(moved);
    REQUIRE(cast);
    return cast;
}

static void check_gist_fixture(gc_device device) {
    gc_param_list fixture = gc_fixture_load(LOSS_FIXTURE);
    const char *cases[] = {"gist_absolute", "gist_relative"};
    const int64_t tiles[] = {0, 2, 3}; /* 0: untiled (AUTO, under one tile) */
    for (size_t c = 0; c < 2; c++)
        for (size_t t = 0; t < 3; t++) {
            bool absolute = c == 0;
            gc_tensor *q = gist_on(fixture_entry(&fixture, cases[c], "q"), device, GC_F64);
            gc_tensor *p = gist_on(fixture_entry(&fixture, cases[c], "p"), device, GC_F64);
            gc_tensor *gq = gist_on(fixture_entry(&fixture, cases[c], "gq"), device, GC_F64);
            gc_tensor *gp = gist_on(fixture_entry(&fixture, cases[c], "gp"), device, GC_F64);
            gc_gist_options options = {
                .contrastive = {.similarity = absolute ? GC_SIMILARITY_COSINE : GC_SIMILARITY_DOT,
                                .temperature = absolute ? 0.05 : 0.5,
                                .reduction = absolute ? GC_LOSS_MEAN : GC_LOSS_SUM,
                                .method = tiles[t] ? GC_CONTRASTIVE_TILED : GC_CONTRASTIVE_AUTO,
                                .tile_size = tiles[t]},
                .guide_queries = gq, .guide_passages = gp,
                .margin_strategy = absolute ? GC_GIST_ABSOLUTE : GC_GIST_RELATIVE,
                .margin = absolute ? 0.1 : 0.2};
            gist_outcome got = gist_run(q, p, &options);
            double want = gc_item(fixture_entry(&fixture, cases[c], "loss"));
            CHECK_MSG(fabs(got.value - want) <= LOSS_FIXTURE_TOLERANCE * fabs(want), "%s, tile %lld: %.17g, PyTorch %.17g",
                      cases[c], (long long)tiles[t], got.value, want);
            const char *fields[2] = {"grad_q", "grad_p"};
            for (int s = 0; s < 2; s++)
                gc_test_expect_close(fixture_entry(&fixture, cases[c], fields[s]), got.grads[s], LOSS_FIXTURE_TOLERANCE,
                                     LOSS_FIXTURE_TOLERANCE, cases[c]);
            RELEASE(q, p, gq, gp, got.grads[0], got.grads[1]);
        }
    gc_param_list_free(&fixture);
}

/* The guide stays f64 on both devices, so the masks agree but where the two f64 scores of a
 * candidate fall on either side of its threshold (1e-16 apart: no such candidate among these
 * random ones). f64 student: the sums differ in order only, 1e-12 holds; f32: ~1e-7 per
 * rounding over a few hundred terms, 1e-4. */
static void check_gist_large(gc_device device) {
    gc_tensor *q = gc_uniform(GC_SHAPE(300, 32), GC_F64, gc_cpu(), -1, 1, 1, 0);
    gc_tensor *p = gc_uniform(GC_SHAPE(600, 32), GC_F64, gc_cpu(), -1, 1, 2, 0);
    gc_tensor *gq = gc_normal(GC_SHAPE(300, 16), GC_F64, gc_cpu(), 0, 1, 3, 0);
    gc_tensor *gp = gc_normal(GC_SHAPE(600, 16), GC_F64, gc_cpu(), 0, 1, 4, 0);
    REQUIRE(q && p && gq && gp);
    gc_gist_options options = {.contrastive = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05,
                                               .method = GC_CONTRASTIVE_TILED, .tile_size = 64},
                               .guide_queries = gq, .guide_passages = gp, .margin = 0.05};
    gist_outcome want = gist_run(q, p, &options);
    const int64_t tiles[] = {37, 0}; /* 0: the CUDA default, larger than the batch */
    const gc_dtype dtypes[] = {GC_F64, GC_F32};
    for (size_t t = 0; t < 2; t++)
        for (size_t d = 0; d < 2; d++) {
            double tolerance = dtypes[d] == GC_F64 ? 1e-12 : 1e-4;
            gc_tensor *dq = gist_on(q, device, dtypes[d]), *dp = gist_on(p, device, dtypes[d]);
            gc_gist_options there = options;
            there.guide_queries = gist_on(gq, device, GC_F64);
            there.guide_passages = gist_on(gp, device, GC_F64);
            there.contrastive.tile_size = tiles[t];
            gist_outcome got = gist_run(dq, dp, &there);
            CHECK_MSG(fabs(got.value - want.value) <= tolerance * fabs(want.value),
                      "300 x 600, tile %lld, %s: %.17g, the CPU %.17g", (long long)tiles[t], gc_dtype_name(dtypes[d]),
                      got.value, want.value);
            for (int s = 0; s < 2; s++)
                gc_test_expect_close(want.grads[s], got.grads[s], tolerance, tolerance, "300 x 600: a gradient");
            RELEASE(dq, dp, (gc_tensor *)there.guide_queries, (gc_tensor *)there.guide_passages, got.grads[0],
                    got.grads[1]);
        }
    RELEASE(q, p, gq, gp, want.grads[0], want.grads[1]);
}

#endif
