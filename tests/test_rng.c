/* Generators and RNG contexts (gradcache/rng.h): the default generator of each device, seeding,
 * advancing by exactly the words a draw uses, and capture/replay (the replayed ops draw
 * bitwise the same numbers; ending a replay puts every generator back where it was, without
 * rewinding it), also nested across two contexts. */
#include "check.h"
#include "same_bytes.h"

/* Elements per draw. Two different draws of 64 elements at p = 1/2 share their mask with
 * probability 2^-64, so a test expecting them to differ cannot pass by chance. */
#define DRAW 64

static const double p_drop = 0.5;

static gc_generator *cpu_generator(void) { return gc_default_generator(gc_cpu()); }

static gc_tensor *ones(void) {
    gc_tensor *x = gc_full(GC_SHAPE(DRAW), GC_F32, gc_cpu(), 1.0);
    REQUIRE(x);
    return x;
}

/* A dropout mask (0 or 2 per element) from the CPU's default generator. */
static gc_tensor *draw_mask(void) {
    gc_tensor *x = ones();
    gc_tensor *y = gc_nn_dropout(x, p_drop, true);
    REQUIRE(y);
    gc_tensor_release(x);
    return y;
}

/* The mask a draw at (seed, offset) gives, without touching any generator. */
static gc_tensor *mask_at(uint64_t seed, uint64_t offset) {
    gc_tensor *x = ones();
    gc_tensor *y = gc_dropout(x, p_drop, seed, offset);
    REQUIRE(y);
    gc_tensor_release(x);
    return y;
}

/* Uniform numbers drawn from the CPU's default generator, as an initialiser draws them. */
static gc_tensor *draw_uniform(void) {
    gc_generator *g = cpu_generator();
    uint64_t offset = gc_generator_take(g, gc_uniform_words(DRAW));
    gc_tensor *u = gc_uniform(GC_SHAPE(DRAW), GC_F32, gc_cpu(), 0.0, 1.0, g->seed, offset);
    REQUIRE(u);
    return u;
}

static bool same_generator(gc_generator a, gc_generator b) { return a.seed == b.seed && a.offset == b.offset; }

/* Every device's default generator is the one in `want`. */
static void expect_generators(const gc_rng_context *want, const char *what) {
    for (int i = 0; i < 1 + GC_MAX_CUDA_DEVICES; i++) {
        gc_device device = i == 0 ? gc_cpu() : gc_cuda(i - 1);
        gc_generator got = *gc_default_generator(device);
        CHECK_MSG(same_generator(got, want->devices[i]), "%s: device %d at (%llu, %llu), want (%llu, %llu)", what, i,
                  (unsigned long long)got.seed, (unsigned long long)got.offset,
                  (unsigned long long)want->devices[i].seed, (unsigned long long)want->devices[i].offset);
    }
}

static void release_all(gc_tensor **tensors, int count) {
    for (int i = 0; i < count; i++) gc_tensor_release(tensors[i]);
}

/* Runs first: nothing has drawn yet. */
static void test_default_generators(void) {
    gc_rng_context start = {0};
    expect_generators(&start, "at start");
    gc_generator *cpu = cpu_generator(), *cuda0 = gc_default_generator(gc_cuda(0));
    gc_generator *last = gc_default_generator(gc_cuda(GC_MAX_CUDA_DEVICES - 1));
    CHECK(cpu == cpu_generator()); /* one generator per device, the same on every call */
    CHECK(cpu != cuda0 && cuda0 != last && cpu != last);
    CHECK(gc_default_generator(gc_cuda(1)) != cuda0);
}

static void test_manual_seed(void) {
    gc_generator_take(cpu_generator(), 10);
    gc_generator_take(gc_default_generator(gc_cuda(2)), 3);
    gc_manual_seed(123);
    gc_rng_context want;
    for (int i = 0; i < 1 + GC_MAX_CUDA_DEVICES; i++) want.devices[i] = (gc_generator){123, 0};
    expect_generators(&want, "after gc_manual_seed(123)");
}

static void test_take(void) {
    gc_generator g = {5, 10};
    CHECK(gc_generator_take(&g, 7) == 10);
    CHECK(g.seed == 5 && g.offset == 17);
    CHECK(gc_generator_take(&g, 0) == 17);
    CHECK(g.offset == 17);
    gc_generator near_end = {1, UINT64_MAX - 3};
    CHECK(gc_generator_take(&near_end, 3) == UINT64_MAX - 3);
    CHECK(near_end.offset == UINT64_MAX);
}

/* A dropout of n elements takes n words from its device's generator, and draws its mask
 * from where the generator was; evaluation and p = 0 take none. */
static void test_dropout_advances(void) {
    gc_manual_seed(9);
    gc_tensor *x = gc_full(GC_SHAPE(3, 5), GC_F32, gc_cpu(), 1.0);
    REQUIRE(x);
    gc_tensor *first = gc_nn_dropout(x, 0.5, true);
    CHECK(same_generator(*cpu_generator(), (gc_generator){9, 15}));
    gc_tensor *second = gc_nn_dropout(x, 0.5, true);
    CHECK(same_generator(*cpu_generator(), (gc_generator){9, 30}));
    gc_tensor *want_first = gc_dropout(x, 0.5, 9, 0), *want_second = gc_dropout(x, 0.5, 9, 15);
    gc_test_expect_same_bytes(want_first, first, "first dropout, words 0..14");
    gc_test_expect_same_bytes(want_second, second, "second dropout, words 15..29");
    gc_tensor *identities[] = {gc_nn_dropout(x, 0.5, false), gc_nn_dropout(x, 0.0, true)};
    CHECK(same_generator(*cpu_generator(), (gc_generator){9, 30}));
    CHECK(same_generator(*gc_default_generator(gc_cuda(0)), (gc_generator){9, 0})); /* other devices untouched */
    gc_tensor *uniform = draw_uniform();
    CHECK(same_generator(*cpu_generator(), (gc_generator){9, 30 + DRAW}));
    gc_tensor *tensors[] = {x, first, second, want_first, want_second, identities[0], identities[1], uniform};
    release_all(tensors, 8);
}

/* Inside a replay the same ops draw the same numbers; afterwards the stream goes on from
 * where it was before the replay. */
static void test_replay(void) {
    gc_manual_seed(2024);
    gc_tensor *warm_up = draw_mask();
    gc_default_generator(gc_cuda(3))->offset = 77; /* a GPU's generator is captured too */
    gc_rng_context captured = gc_rng_capture();
    gc_tensor *mask = draw_mask(), *uniform = draw_uniform();
    gc_tensor *later = draw_mask();
    gc_rng_context before = gc_rng_capture();
    gc_generator *g = cpu_generator();
    gc_tensor *want_next = mask_at(g->seed, g->offset); /* what the next draw gives with no replay */

    gc_rng_context saved = gc_rng_replay_begin(&captured);
    expect_generators(&captured, "replay begun");
    gc_tensor *replayed_mask = draw_mask(), *replayed_uniform = draw_uniform();
    gc_generator_take(gc_default_generator(gc_cuda(3)), 5);
    gc_rng_replay_end(&saved);

    gc_test_expect_same_bytes(mask, replayed_mask, "replayed dropout mask");
    gc_test_expect_same_bytes(uniform, replayed_uniform, "replayed uniform");
    expect_generators(&before, "replay ended");
    gc_tensor *next = draw_mask();
    gc_test_expect_same_bytes(want_next, next, "the draw after the replay");
    CHECK(gc_test_first_byte_difference(mask, next) >= 0); /* not rewound to the captured state */
    gc_tensor *tensors[] = {warm_up, mask, uniform, later, want_next, replayed_mask, replayed_uniform, next};
    release_all(tensors, 8);
}

/* Replay b inside replay a: ending b returns to a's replayed stream, ending a to the
 * program's. The two contexts have different seeds, so each stream is recognisable. */
static void test_nested_replay(void) {
    gc_manual_seed(5);
    gc_rng_context context_a = gc_rng_capture();
    gc_tensor *a_first = draw_mask();
    gc_manual_seed(6);
    gc_rng_context context_b = gc_rng_capture();
    gc_tensor *b_first = draw_mask();
    gc_rng_context after = gc_rng_capture();

    gc_rng_context saved_a = gc_rng_replay_begin(&context_a);
    gc_tensor *a_replayed = draw_mask();
    gc_rng_context saved_b = gc_rng_replay_begin(&context_b);
    gc_tensor *b_replayed = draw_mask();
    gc_rng_replay_end(&saved_b);
    CHECK(same_generator(*cpu_generator(), (gc_generator){5, DRAW}));
    gc_tensor *a_second = draw_mask();
    gc_rng_replay_end(&saved_a);
    expect_generators(&after, "both replays ended");
    gc_tensor *b_second = draw_mask();

    gc_test_expect_same_bytes(a_first, a_replayed, "replay a");
    gc_test_expect_same_bytes(b_first, b_replayed, "replay b inside replay a");
    gc_tensor *want_a_second = mask_at(5, DRAW), *want_b_second = mask_at(6, DRAW);
    gc_test_expect_same_bytes(want_a_second, a_second, "stream a continued after replay b");
    gc_test_expect_same_bytes(want_b_second, b_second, "stream b continued after both");
    gc_tensor *tensors[] = {a_first, b_first, a_replayed, b_replayed, a_second, b_second, want_a_second, want_b_second};
    release_all(tensors, 8);
}

static void take_past_end(void *arg) {
    (void)arg;
    gc_generator g = {1, UINT64_MAX - 3};
    gc_generator_take(&g, 4);
}
static void bad_device(void *arg) { gc_default_generator(gc_cuda(*(int *)arg)); }

static void test_errors(void) {
    gc_test_expect_fatal(take_past_end, NULL, "rng: generator of seed 1 exhausted");
    int too_big = GC_MAX_CUDA_DEVICES, negative = -1;
    gc_test_expect_fatal(bad_device, &too_big, "rng: CUDA device index 16 outside [0, 16)");
    gc_test_expect_fatal(bad_device, &negative, "rng: CUDA device index -1 outside [0, 16)");
}

int main(void) {
    test_default_generators();
    test_manual_seed();
    test_take();
    test_dropout_advances();
    test_replay();
    test_nested_replay();
    test_errors();
    return gc_test_result();
}
