/* Several datasets in one run (gc_multi_sampler of gradcache/train.h): which dataset each step
 * takes, round-robin or in proportion to the datasets' sizes, and that dataset's own batch. */
#include <stdlib.h>

#include "gradcache/rng.h"
#include "gradcache/train.h"

void gc_multi_sampler_init(gc_multi_sampler *sampler, uint64_t seed, int count, const int64_t *examples,
                           int64_t batch_size, gc_sampling sampling) {
    if (count < 1 || count > GC_MAX_DATASETS)
        gc_fatal("multi_sampler_init: %d datasets (1 to %d)", count, GC_MAX_DATASETS);
    if (sampling != GC_SAMPLING_ROUND_ROBIN && sampling != GC_SAMPLING_PROPORTIONAL)
        gc_fatal("multi_sampler_init: sampling %d is neither round-robin nor proportional", (int)sampling);
    *sampler = (gc_multi_sampler){.sampling = count == 1 ? GC_SAMPLING_ROUND_ROBIN : sampling,
                                  .count = count,
                                  .batch_size = batch_size,
                                  .order_seed = gc_derive_seed(seed, 0),
                                  .epoch = -1};
    sampler->datasets = calloc((size_t)count, sizeof *sampler->datasets);
    if (!sampler->datasets) gc_fatal("multi_sampler_init: out of host memory for %d datasets", count);
    int64_t smallest = INT64_MAX, sum = 0;
    for (int d = 0; d < count; d++) {
        gc_batch_sampler *own = &sampler->datasets[d];
        gc_batch_sampler_init(own, d == 0 ? seed : gc_derive_seed(seed, (uint64_t)d), examples[d], batch_size);
        if (own->steps_per_epoch < smallest) smallest = own->steps_per_epoch;
        sum += own->steps_per_epoch;
    }
    sampler->steps_per_epoch = sampler->sampling == GC_SAMPLING_ROUND_ROBIN ? smallest * count : sum;
}

void gc_multi_sampler_locate(const gc_multi_sampler *sampler, int64_t step, int64_t *epoch, int64_t *position) {
    *epoch = step / sampler->steps_per_epoch;
    *position = step % sampler->steps_per_epoch * sampler->batch_size;
}

/* Proportional: epoch `epoch`'s order, each dataset d at steps_per_epoch(d) of its steps, and
 * for each step how many of its dataset's came before it. */
static void draw_order(gc_multi_sampler *sampler, int64_t epoch) {
    int64_t steps = sampler->steps_per_epoch;
    if (!sampler->order) {
        sampler->order = malloc((size_t)steps * sizeof *sampler->order);
        sampler->before = malloc((size_t)steps * sizeof *sampler->before);
        if (!sampler->order || !sampler->before)
            gc_fatal("multi_sampler: out of host memory for an epoch of %lld steps", (long long)steps);
    }
    /* a permutation of the multiset's slots 0..steps-1, dataset d owning the d-th run of
     * steps_per_epoch(d) of them; `before` holds the permutation until it is replaced */
    gc_epoch_order(sampler->order_seed, epoch, steps, sampler->before);
    int64_t taken[GC_MAX_DATASETS] = {0};
    for (int64_t i = 0; i < steps; i++) {
        int d = 0;
        for (int64_t end = sampler->datasets[0].steps_per_epoch; sampler->before[i] >= end;)
            end += sampler->datasets[++d].steps_per_epoch;
        sampler->order[i] = d;
        sampler->before[i] = taken[d]++;
    }
    sampler->epoch = epoch;
}

void gc_multi_sampler_which(gc_multi_sampler *sampler, int64_t step, int *dataset, int64_t *dataset_step) {
    if (sampler->sampling == GC_SAMPLING_ROUND_ROBIN) {
        *dataset = (int)(step % sampler->count);
        *dataset_step = step / sampler->count;
        return;
    }
    int64_t epoch = step / sampler->steps_per_epoch, i = step % sampler->steps_per_epoch;
    if (epoch != sampler->epoch) draw_order(sampler, epoch);
    *dataset = sampler->order[i];
    /* each dataset's own epoch is the schedule's */
    *dataset_step = epoch * sampler->datasets[*dataset].steps_per_epoch + sampler->before[i];
}

const int64_t *gc_multi_sampler_batch(gc_multi_sampler *sampler, int64_t step, int *dataset, int64_t *epoch) {
    int64_t dataset_step, dataset_epoch, position;
    gc_multi_sampler_which(sampler, step, dataset, &dataset_step);
    gc_multi_sampler_locate(sampler, step, epoch, &position);
    return gc_batch_sampler_batch(&sampler->datasets[*dataset], dataset_step, &dataset_epoch);
}

void gc_multi_sampler_free(gc_multi_sampler *sampler) {
    for (int d = 0; d < sampler->count; d++) gc_batch_sampler_free(&sampler->datasets[d]);
    free(sampler->datasets);
    free(sampler->order);
    free(sampler->before);
    *sampler = (gc_multi_sampler){0};
}
