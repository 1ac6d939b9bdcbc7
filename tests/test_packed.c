/* A weight's packed panels (tensor/packed.c): kept from the second product at one version,
 * used by the forward and the input gradient, invalidated by every kind of write, counted in
 * the memory statistics and freed with the weight; and training gives the same bits with and
 * without them.
 *
 * Tolerance: none anywhere. Kept panels are the very panels a product packs for itself, so a
 * product with them must equal one without them bit for bit; a stale panel (a write that did
 * not count) gives the old weight's product, which differs from the new one's in every
 * element the write changed. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tensor/cpu/gemm_kernel.h"

static const gc_device cpu = {GC_DEVICE_CPU, 0};

static size_t packed_bytes(void) { return gc_memory_get_stats(cpu).packed_bytes; }

/* The bytes of op(b) [k, n] packed for the selected CPU kernel: k rows of whole panels. */
static size_t form_bytes(int64_t k, int64_t n) {
    const gc_gemm_kernel *kernel = gc_gemm_kernel_for(GC_F32, gc_cpu_isa_selected());
    return (size_t)(k * ((n + kernel->nr - 1) / kernel->nr) * kernel->nr) * sizeof(float);
}

static bool same_bits(const gc_tensor *x, const gc_tensor *y) {
    return x && y && gc_same_shape(x, y) && memcmp(gc_data(x), gc_data(y), gc_nbytes(x)) == 0;
}

/* x @ w^T with a fresh copy of w marked as a weight: the panels packed by the product itself. */
static gc_tensor *reference(const gc_tensor *x, const gc_tensor *w) {
    gc_tensor *copy = gc_clone(w);
    REQUIRE(copy);
    gc_tensor_set_weight(copy);
    gc_tensor *y = gc_matmul(x, copy, false, true);
    gc_tensor_release(copy);
    return y;
}

/* Two products with w at its current version, both equal to the reference bit for bit (the
 * first repacks kept panels when w has them, the second uses them). */
static void expect_fresh(const char *after, const gc_tensor *x, const gc_tensor *w) {
    gc_tensor *want = reference(x, w), *first = gc_matmul(x, w, false, true), *second = gc_matmul(x, w, false, true);
    CHECK_MSG(same_bits(first, want) && same_bits(second, want), "after %s: a product used stale panels", after);
    gc_tensor_release(want);
    gc_tensor_release(first);
    gc_tensor_release(second);
}

/* Kept from the second product of a version on, one form per transpose, counted in packed
 * bytes (not live bytes), freed with the weight; under a limit, live and packed bytes together. */
static void test_kept_and_counted(void) {
    const int64_t out = 40, in = 70, rows = 9;
    size_t start = gc_memory_get_stats(cpu).live_bytes;
    gc_tensor *w = gc_normal(GC_SHAPE(out, in), GC_F32, cpu, 0, 1, 1, 0); /* [out, in] */
    gc_tensor *x = gc_normal(GC_SHAPE(rows, in), GC_F32, cpu, 0, 1, 2, 0), *g = gc_normal(GC_SHAPE(rows, out), GC_F32, cpu, 0, 1, 3, 0);
    REQUIRE(w && x && g);
    gc_tensor_set_weight(w);
    CHECK(gc_tensor_is_weight(w) && !gc_tensor_is_weight(x));
    size_t live = gc_memory_get_stats(cpu).live_bytes;
    gc_tensor *y1 = gc_matmul(x, w, false, true); /* [rows, out]: the first product keeps nothing */
    CHECK(packed_bytes() == 0);
    gc_tensor *y2 = gc_matmul(x, w, false, true);
    size_t forward = form_bytes(in, out); /* op(b) = w^T [in, out] */
    CHECK_MSG(packed_bytes() == forward, "packed %zu bytes, want %zu", packed_bytes(), forward);
    CHECK(same_bits(y1, y2));
    gc_tensor *dx1 = gc_matmul(g, w, false, false), *dx2 = gc_matmul(g, w, false, false); /* [rows, in] */
    size_t both = forward + form_bytes(out, in);
    CHECK_MSG(packed_bytes() == both, "packed %zu bytes, want %zu", packed_bytes(), both);
    CHECK(same_bits(dx1, dx2));
    gc_tensor *y3 = gc_matmul(x, w, false, true); /* kept panels: no more memory */
    CHECK(same_bits(y1, y3) && packed_bytes() == both);
    /* the panels are packed bytes, not live bytes (a step's peak does not depend on them) */
    CHECK(gc_memory_get_stats(cpu).live_bytes == live + 3 * gc_nbytes(y1) + 2 * gc_nbytes(dx1));
    gc_tensor_release(w); /* its last reference: the panels go with it */
    CHECK(packed_bytes() == 0);
    /* the peak of packed bytes outlives the panels until the next reset, like peak_bytes */
    CHECK_MSG(gc_memory_get_stats(cpu).peak_packed_bytes >= both, "peak packed %zu bytes, want at least %zu",
              gc_memory_get_stats(cpu).peak_packed_bytes, both);
    gc_memory_reset_peak(cpu);
    CHECK(gc_memory_get_stats(cpu).peak_packed_bytes == 0);
    RELEASE(x, g, y1, y2, y3, dx1, dx2);
    CHECK(gc_memory_get_stats(cpu).live_bytes == start);
}

/* Every kind of write through the library counts: the optimizer, the in-place ops, copies and
 * loads, a write through a view, and a raw write marked by its writer. */
static void test_invalidation(void) {
    const int64_t out = 24, in = 33, rows = 7;
    gc_tensor *x = gc_normal(GC_SHAPE(rows, in), GC_F32, cpu, 0, 1, 4, 0);
    gc_tensor *w = gc_normal(GC_SHAPE(out, in), GC_F32, cpu, 0, 1, 5, 0);
    gc_tensor *other = gc_normal(GC_SHAPE(out, in), GC_F32, cpu, 0, 1, 6, 0);
    REQUIRE(x && w && other);
    gc_set_requires_grad(w, true);
    gc_tensor_set_weight(w);
    expect_fresh("the first products", x, w);
    REQUIRE(packed_bytes() > 0);

    uint64_t version = gc_tensor_version(w);
    gc_add_inplace(w, other);
    CHECK(gc_tensor_version(w) > version);
    expect_fresh("add_inplace", x, w);
    gc_scale_inplace(w, 0.5);
    expect_fresh("scale_inplace", x, w);
    gc_copy_(w, other);
    expect_fresh("copy_", x, w);
    gc_tensor *rows_view = gc_slice0(w, 3, 5);
    gc_fill_(rows_view, 0.25); /* through a view: the storage's version is shared */
    gc_tensor_release(rows_view);
    expect_fresh("fill_ of a view", x, w);
    ((float *)gc_data(w))[5] += 1.0f;
    gc_tensor_mark_written(w);
    expect_fresh("a raw write marked written", x, w);

    gc_param_list params = {0};
    gc_param_list_add(&params, "", "weight", w, false);
    gc_tensor *y = gc_matmul(x, w, false, true), *loss = gc_sum_all(y), *one = gc_scalar(1, GC_F32, cpu);
    REQUIRE(loss && gc_backward(&loss, &one, 1) == GC_OK && gc_grad(w)); /* a gradient to step with */
    RELEASE(y, loss, one);
    gc_adamw adamw;
    REQUIRE(gc_adamw_init(&adamw, &params, 0.1, 0.9, 0.999, 1e-8, 0.01) == GC_OK);
    REQUIRE(gc_adamw_step(&adamw) == GC_OK);
    expect_fresh("an AdamW step", x, w);
    gc_sgd sgd;
    REQUIRE(gc_sgd_init(&sgd, &params, 0.1, 0.9, 0.0) == GC_OK);
    REQUIRE(gc_sgd_step(&sgd) == GC_OK);
    expect_fresh("an SGD step", x, w);

    char path[] = "/tmp/gc_test_packed_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(gc_safetensors_save(path, &params, NULL) == GC_OK);
    gc_add_inplace(w, other);
    expect_fresh("the write before the load", x, w);
    REQUIRE(gc_safetensors_load_into(path, &params) == GC_OK);
    expect_fresh("a safetensors load", x, w);
    unlink(path);

    gc_adamw_free(&adamw);
    gc_sgd_free(&sgd);
    gc_param_list_free(&params);
    RELEASE(x, w, other);
}

/* Turned off, no product keeps panels, and those kept before go at the weight's next product. */
static void test_switch(void) {
    gc_tensor *w = gc_normal(GC_SHAPE(16, 20), GC_F32, cpu, 0, 1, 8, 0), *x = gc_normal(GC_SHAPE(5, 20), GC_F32, cpu, 0, 1, 9, 0);
    REQUIRE(w && x);
    gc_tensor_set_weight(w);
    expect_fresh("the first products", x, w);
    CHECK(packed_bytes() > 0);
    gc_set_weight_packing(false);
    expect_fresh("packing turned off", x, w);
    CHECK(packed_bytes() == 0);
    gc_set_weight_packing(true);
    RELEASE(w, x);
}

/* Under a memory limit the panels count with the live bytes: refused, the products pack their
 * own, the same bits, and no error is left behind. */
static void test_limit(void) {
    /* w's 33 outputs are zero-padded to whole panels of 8, 16 or 32 lanes (the portable, AVX2
     * and AVX-512 GEMMs), so its panels outgrow its own bytes plus a product on every CPU; kept,
     * larger, has panels that exceed the room below. (With 48 outputs both held only where the
     * panels are 32 wide: the test failed on AVX2 machines.) */
    gc_tensor *kept = gc_normal(GC_SHAPE(96, 64), GC_F32, cpu, 0, 1, 10, 0); /* [out, in] */
    gc_tensor *w = gc_normal(GC_SHAPE(33, 64), GC_F32, cpu, 0, 1, 12, 0), *x = gc_normal(GC_SHAPE(5, 64), GC_F32, cpu, 0, 1, 11, 0);
    REQUIRE(kept && w && x);
    gc_tensor_set_weight(kept);
    gc_tensor_set_weight(w);
    expect_fresh("the first weight's products", x, kept);
    size_t panels = packed_bytes(), product = 5 * 33 * sizeof(float);
    size_t w_panels = form_bytes(64, 33);
    REQUIRE(panels == form_bytes(64, 96) && w_panels <= panels);
    /* room for the products, the reference's copy of w and as many bytes as the first weight's
     * panels, which already hold them: live bytes alone would leave room for w's */
    size_t room = 3 * product + gc_nbytes(w) + 64;
    REQUIRE(room < panels);
    gc_memory_set_limit(cpu, gc_memory_get_stats(cpu).live_bytes + panels + room);
    gc_clear_error();
    expect_fresh("a refused packing", x, w);
    CHECK_MSG(packed_bytes() == panels && gc_last_status() == GC_OK, "packed %zu bytes under the limit, error %s",
              packed_bytes(), gc_status_name(gc_last_status()));
    gc_memory_set_limit(cpu, 0);
    expect_fresh("the limit lifted", x, w);
    CHECK(packed_bytes() == panels + w_panels);
    RELEASE(kept, w, x);
}

/* Training a dual encoder with GradCache (chunks: many products per version) and AdamW, with
 * and without kept panels: the same parameters bit for bit. */
static void train(bool packing, int steps, gc_param_list *result, size_t *kept) {
    gc_set_weight_packing(packing);
    gc_text_encoder_config config = gc_model_preset(0, 16);
    gc_bench_setup setup;
    REQUIRE(gc_bench_setup_init(&setup, &config, false, 31, cpu) == GC_OK);
    gc_bench_batch batch;
    REQUIRE(gc_bench_batch_make(&setup, 24, &batch) == GC_OK);
    gc_cache_config cache_config = gc_bench_cache_config(&setup, 8);
    gc_cache *cache = gc_cache_new(&cache_config);
    gc_adamw adamw;
    REQUIRE(cache && gc_adamw_init(&adamw, &setup.model.params, 1e-3, 0.9, 0.999, 1e-8, 0.01) == GC_OK);
    *kept = 0;
    for (int step = 0; step < steps; step++) {
        gc_param_list_zero_grad(&setup.model.params);
        double loss;
        REQUIRE(gc_cache_step(cache, batch.inputs, &loss, NULL) == GC_OK);
        REQUIRE(gc_adamw_step(&adamw) == GC_OK);
        if (packed_bytes() > *kept) *kept = packed_bytes();
    }
    for (int i = 0; i < setup.model.params.count; i++)
        gc_param_list_add(result, "", setup.model.params.items[i].name, gc_clone(setup.model.params.items[i].tensor),
                          false);
    gc_adamw_free(&adamw);
    gc_cache_free(cache);
    gc_bench_batch_free(&batch);
    gc_bench_setup_free(&setup);
    CHECK(packed_bytes() == 0); /* freed with the model */
    gc_set_weight_packing(true);
}

static void test_training_unchanged(void) {
    gc_param_list with = {0}, without = {0};
    size_t kept_with, kept_without;
    train(true, 3, &with, &kept_with);
    train(false, 3, &without, &kept_without);
    CHECK_MSG(kept_with > 0 && kept_without == 0, "kept %zu bytes packing, %zu not", kept_with, kept_without);
    REQUIRE(with.count == without.count && with.count > 0);
    int differ = 0;
    for (int i = 0; i < with.count; i++) {
        bool same = same_bits(with.items[i].tensor, without.items[i].tensor);
        differ += !same;
        CHECK_MSG(same, "%s differs after 3 steps with and without packed weights", with.items[i].name);
    }
    fprintf(stderr, "%d parameters compared bitwise after 3 GradCache steps, %zu bytes of panels kept\n", with.count,
            kept_with);
    for (int i = 0; i < with.count; i++) {
        gc_tensor_release(with.items[i].tensor);
        gc_tensor_release(without.items[i].tensor);
    }
    gc_param_list_free(&with);
    gc_param_list_free(&without);
}

int main(void) {
    test_kept_and_counted();
    test_invalidation();
    test_switch();
    test_limit();
    test_training_unchanged();
    CHECK(gc_memory_get_stats(cpu).live_bytes == 0);
    return gc_test_result();
}
