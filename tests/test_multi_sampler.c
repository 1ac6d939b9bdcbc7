/* Several datasets' schedule (gc_multi_sampler of gradcache/train.h): round-robin takes the
 * datasets in turn and its epoch ends with the smallest's steps; proportional takes every
 * dataset's steps per epoch exactly once an epoch, in an order that changes with the epoch;
 * every batch is one dataset's, and each dataset visits its examples once per its own epoch;
 * any step's batch follows from (seed, step) alone; one dataset is gc_batch_sampler's run. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcache/train.h"

enum { BATCH = 5, DATASETS = 3 };
/* 2, 5 and 8 batches per epoch (the 3 examples left over of the last are skipped) */
static const int64_t SIZES[DATASETS] = {10, 25, 43};
static const uint64_t SEED = 1234;

static void test_round_robin_order(void) {
    gc_multi_sampler s;
    gc_multi_sampler_init(&s, SEED, DATASETS, SIZES, BATCH, GC_SAMPLING_ROUND_ROBIN);
    CHECK(s.steps_per_epoch == DATASETS * 2); /* ends when the smallest (2 batches) is used up */
    for (int64_t step = 0; step < 40; step++) {
        int dataset;
        int64_t own_step, epoch, position;
        gc_multi_sampler_which(&s, step, &dataset, &own_step);
        CHECK(dataset == step % DATASETS && own_step == step / DATASETS);
        gc_multi_sampler_locate(&s, step, &epoch, &position);
        CHECK(epoch == step / 6 && position == step % 6 * BATCH);
    }
    gc_multi_sampler_free(&s);
}

/* Steps [epoch S, (epoch + 1) S) of a proportional schedule: each dataset d exactly its
 * steps_per_epoch times, the k-th of them its own step epoch * steps_per_epoch(d) + k. */
static void check_proportional_epoch(gc_multi_sampler *s, int64_t epoch, int *order) {
    int64_t seen[DATASETS] = {0};
    for (int64_t i = 0; i < s->steps_per_epoch; i++) {
        int dataset;
        int64_t own_step;
        gc_multi_sampler_which(s, epoch * s->steps_per_epoch + i, &dataset, &own_step);
        REQUIRE(dataset >= 0 && dataset < DATASETS);
        CHECK(own_step == epoch * s->datasets[dataset].steps_per_epoch + seen[dataset]);
        seen[dataset]++;
        order[i] = dataset;
    }
    for (int d = 0; d < DATASETS; d++) CHECK(seen[d] == s->datasets[d].steps_per_epoch);
}

static void test_proportional_frequencies(void) {
    gc_multi_sampler s;
    gc_multi_sampler_init(&s, SEED, DATASETS, SIZES, BATCH, GC_SAMPLING_PROPORTIONAL);
    CHECK(s.steps_per_epoch == 2 + 5 + 8);
    int orders[4][15];
    for (int64_t epoch = 0; epoch < 4; epoch++) check_proportional_epoch(&s, epoch, orders[epoch]);
    /* a shuffled order: the epochs' orders are not all the same, nor the datasets in blocks */
    bool differ = false;
    for (int e = 1; e < 4; e++) differ = differ || memcmp(orders[0], orders[e], sizeof orders[0]) != 0;
    CHECK(differ);
    gc_multi_sampler_free(&s);
}

/* Each dataset's batches over `epochs` of its own epochs, taken through the schedule: within
 * the dataset, and each of its own epochs holding distinct examples, B per step. */
static void check_own_epochs(gc_sampling sampling) {
    gc_multi_sampler s;
    gc_multi_sampler_init(&s, SEED, DATASETS, SIZES, BATCH, sampling);
    int64_t *seen[DATASETS]; /* [SIZES[d]]: the own epoch that last took the example, or -1 */
    int64_t steps[DATASETS] = {0};
    for (int d = 0; d < DATASETS; d++) {
        seen[d] = malloc((size_t)SIZES[d] * sizeof *seen[d]);
        REQUIRE(seen[d]);
        for (int64_t e = 0; e < SIZES[d]; e++) seen[d][e] = -1;
    }
    /* enough steps for the largest dataset's three own epochs under either schedule */
    for (int64_t step = 0; step < 3 * 8 * DATASETS * 2; step++) {
        int dataset;
        int64_t epoch;
        const int64_t *examples = gc_multi_sampler_batch(&s, step, &dataset, &epoch);
        int64_t own_epoch = steps[dataset]++ / s.datasets[dataset].steps_per_epoch;
        for (int i = 0; i < BATCH; i++) {
            REQUIRE(examples[i] >= 0 && examples[i] < SIZES[dataset]); /* the batch is the dataset's */
            CHECK_MSG(seen[dataset][examples[i]] < own_epoch, "dataset %d: example %lld twice in its epoch %lld",
                      dataset, (long long)examples[i], (long long)own_epoch);
            seen[dataset][examples[i]] = own_epoch;
        }
    }
    for (int d = 0; d < DATASETS; d++) free(seen[d]);
    gc_multi_sampler_free(&s);
}

static void test_own_epochs(void) {
    check_own_epochs(GC_SAMPLING_ROUND_ROBIN);
    check_own_epochs(GC_SAMPLING_PROPORTIONAL);
}

/* A step's dataset and examples from (seed, step) alone: a sampler that jumps (backwards, to
 * other epochs) gives what one walking from step 0 gave, as a resumed run needs. */
static void test_any_step(void) {
    for (int mode = 0; mode < 2; mode++) {
        gc_multi_sampler walk, jump;
        gc_multi_sampler_init(&walk, SEED, DATASETS, SIZES, BATCH, (gc_sampling)mode);
        gc_multi_sampler_init(&jump, SEED, DATASETS, SIZES, BATCH, (gc_sampling)mode);
        enum { STEPS = 60 };
        int datasets[STEPS];
        int64_t batches[STEPS][BATCH];
        for (int64_t step = 0; step < STEPS; step++) {
            int64_t epoch;
            memcpy(batches[step], gc_multi_sampler_batch(&walk, step, &datasets[step], &epoch), sizeof batches[step]);
        }
        for (int64_t k = 0; k < STEPS; k++) {
            int64_t step = (k * 37 + 11) % STEPS, epoch;
            int dataset;
            const int64_t *examples = gc_multi_sampler_batch(&jump, step, &dataset, &epoch);
            CHECK(dataset == datasets[step] && memcmp(examples, batches[step], sizeof batches[step]) == 0);
        }
        gc_multi_sampler_free(&walk);
        gc_multi_sampler_free(&jump);
    }
}

/* One dataset, whichever sampling: gc_batch_sampler's epochs and batches with the same seed,
 * which is what keeps a single-dataset run what it was. */
static void test_one_dataset(void) {
    for (int mode = 0; mode < 2; mode++) {
        gc_multi_sampler multi;
        gc_batch_sampler single;
        gc_multi_sampler_init(&multi, SEED, 1, &SIZES[2], BATCH, (gc_sampling)mode);
        gc_batch_sampler_init(&single, SEED, SIZES[2], BATCH);
        CHECK(multi.steps_per_epoch == single.steps_per_epoch);
        for (int64_t step = 0; step < 30; step++) {
            int dataset;
            int64_t epoch, single_epoch, position, single_position;
            const int64_t *examples = gc_multi_sampler_batch(&multi, step, &dataset, &epoch);
            CHECK(dataset == 0);
            CHECK(memcmp(examples, gc_batch_sampler_batch(&single, step, &single_epoch), BATCH * sizeof *examples) == 0);
            gc_multi_sampler_locate(&multi, step, &epoch, &position);
            gc_batch_sampler_locate(&single, step, &single_epoch, &single_position);
            CHECK(epoch == single_epoch && position == single_position);
        }
        gc_multi_sampler_free(&multi);
        gc_batch_sampler_free(&single);
    }
}

int main(void) {
    GC_TEST_CASE(test_round_robin_order);
    GC_TEST_CASE(test_proportional_frequencies);
    GC_TEST_CASE(test_own_epochs);
    GC_TEST_CASE(test_any_step);
    GC_TEST_CASE(test_one_dataset);
    return gc_test_result();
}
