/* Duplicate-free batches (gc_batch_order_distinct, gc_batch_sampler_distinct of
 * gradcache/train.h): every batch holds distinct keys where the data allows it, the greedy
 * order is the documented one, an unavoidable repeat is counted, the order stays a permutation,
 * and the sampler's batches follow from (seed, epoch) alone. */
#include "check.h"
#include "gradcache/train.h"

static bool is_permutation(const int64_t *order, int64_t count) {
    bool seen[64] = {false};
    for (int64_t i = 0; i < count; i++) {
        if (order[i] < 0 || order[i] >= count || seen[order[i]]) return false;
        seen[order[i]] = true;
    }
    return true;
}

/* How many of the count / batch batches of `order` hold a key twice (one key per example). */
static int64_t batches_with_repeats(const int64_t *order, int64_t count, int64_t batch, const int64_t *keys) {
    int64_t repeats = 0;
    for (int64_t b = 0; b < count / batch; b++) {
        bool repeat = false;
        for (int64_t i = 0; i < batch; i++)
            for (int64_t j = 0; j < i; j++) repeat = repeat || keys[order[b * batch + i]] == keys[order[b * batch + j]];
        repeats += repeat;
    }
    return repeats;
}

static void test_greedy_order(void) {
    /* key 0 three times, key 1 twice: three batches of 4 can keep them apart */
    const int64_t keys[12] = {0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8};
    const int64_t want[12] = {0, 3, 5, 6, 1, 4, 7, 8, 2, 9, 10, 11};
    int64_t order[12];
    for (int64_t i = 0; i < 12; i++) order[i] = i;
    CHECK(gc_batch_order_distinct(order, 12, 4, keys, 1, 9) == 0);
    CHECK(memcmp(order, want, sizeof want) == 0);
    CHECK(batches_with_repeats(order, 12, 4, keys) == 0);
}

static void test_unavoidable_repeat(void) {
    /* key 0 four times among three batches of 3 (and one example left over) */
    const int64_t keys[10] = {0, 0, 0, 0, 1, 2, 3, 4, 5, 6};
    int64_t order[10];
    for (int64_t i = 0; i < 10; i++) order[i] = 9 - i;
    CHECK(gc_batch_order_distinct(order, 10, 3, keys, 1, 7) == 1);
    CHECK(is_permutation(order, 10));
    CHECK(batches_with_repeats(order, 10, 3, keys) <= 1);
}

/* Two keys per example (4 keys of the first kind and 2 of the second twice among 42 examples,
 * 2 of them left over by 5 batches of 8), both kept apart; the sampler's epochs from
 * (seed, epoch) alone. */
static void test_sampler(void) {
    enum { COUNT = 42, BATCH = 8 };
    int64_t keys[2 * COUNT];
    for (int64_t e = 0; e < COUNT; e++) keys[2 * e] = e % 36, keys[2 * e + 1] = 36 + e % 40;
    gc_batch_sampler a, b;
    gc_batch_sampler_init(&a, 5, COUNT, BATCH);
    gc_batch_sampler_init(&b, 5, COUNT, BATCH);
    gc_batch_sampler_distinct(&a, keys, 2, 76);
    gc_batch_sampler_distinct(&b, keys, 2, 76);
    int64_t epoch, first[BATCH];
    memcpy(first, gc_batch_sampler_batch(&b, 5, &epoch), sizeof first); /* epoch 1 first, as a resumed run */
    for (int64_t step = 0; step < 10; step++) {
        const int64_t *batch = gc_batch_sampler_batch(&a, step, &epoch);
        if (step == 5) CHECK(memcmp(batch, first, sizeof first) == 0);
        bool repeat = false;
        for (int i = 0; i < BATCH; i++)
            for (int j = 0; j < i; j++)
                for (int k = 0; k < 2; k++) repeat = repeat || keys[2 * batch[i] + k] == keys[2 * batch[j] + k];
        CHECK_MSG(!repeat && a.repeated == 0, "step %lld: a key twice", (long long)step);
    }
    gc_batch_sampler_free(&a);
    gc_batch_sampler_free(&b);
}

static void bad_key(void *arg) {
    (void)arg;
    gc_batch_sampler sampler;
    gc_batch_sampler_init(&sampler, 1, 2, 1);
    const int64_t keys[2] = {0, 3};
    gc_batch_sampler_distinct(&sampler, keys, 1, 3);
}

int main(void) {
    GC_TEST_CASE(test_greedy_order);
    GC_TEST_CASE(test_unavoidable_repeat);
    GC_TEST_CASE(test_sampler);
    gc_test_expect_fatal(bad_key, NULL, "batch_sampler_distinct: key 3 of entry 1 is outside [0, 3)");
    return gc_test_result();
}
