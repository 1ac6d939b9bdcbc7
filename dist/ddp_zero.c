/* ZeRO's part of the bucketer (include/gradcache/ddp.h): each bucket's shard of the reduced
 * gradient, its reduction as an in-place reduce-scatter, what becomes of the local gradient
 * after it (stage 1 zeroes it, stage 2 frees it), and the layout a ZeRO optimizer reads.
 *
 * The shard of rank r is the even split's chunk r of the bucket, which is also chunk r of the
 * TCP ring's all-reduce: its reduce-scatter adds every element in the order the all-reduce
 * does, so the shard is bitwise the all-reduce's result there. */
#include "ddp_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/memory.h"
#include "gradcache/ops.h"

bool gc_ddp_sharded(const gc_ddp *ddp) { return ddp->options.zero >= GC_ZERO_1; }

gc_status gc_ddp_zero_allocate_shards(gc_ddp *ddp) {
    int world = gc_dist_world_size(ddp->group), rank = gc_dist_rank(ddp->group);
    for (int b = 0; b < ddp->n_buckets; b++) {
        gc_ddp_bucket *bucket = &ddp->buckets[b];
        if (!gc_ddp_sharded(ddp)) { /* every rank's shard is the whole bucket */
            bucket->shard_count = bucket->numel;
            continue;
        }
        int64_t each = bucket->numel / world, extra = bucket->numel % world; /* the first `extra` get one more */
        bucket->shard_offset = rank * each + (rank < extra ? rank : extra);
        bucket->shard_count = each + (rank < extra);
        const gc_tensor *first = ddp->slots[bucket->first].param;
        gc_memory_role role = gc_memory_set_role(GC_MEMORY_GRADIENTS);
        bucket->shard = gc_zeros(GC_SHAPE(bucket->shard_count), first->dtype, first->device);
        gc_memory_set_role(role);
        if (!bucket->shard) return gc_last_status();
        bucket->shard_fresh = true;
    }
    return GC_OK;
}

gc_dist_work *gc_ddp_zero_launch(gc_ddp *ddp, gc_ddp_bucket *bucket, gc_tensor *reduced) {
    gc_tensor *mine = gc_slice0(reduced, bucket->shard_offset, bucket->shard_offset + bucket->shard_count);
    gc_dist_work *work = gc_dist_reduce_scatter_start(ddp->group, reduced, mine, NULL, GC_DIST_AVG);
    gc_tensor_release(mine); /* the work holds what it needs */
    return work;
}

void gc_ddp_zero_free_buffer(gc_ddp *ddp, gc_ddp_bucket *bucket) {
    for (int s = bucket->first; s < bucket->first + bucket->count; s++) {
        gc_ddp_slot *slot = &ddp->slots[s];
        if (slot->view && gc_grad(slot->param) == slot->view) gc_set_grad(slot->param, NULL);
        gc_tensor_release(slot->view);
        slot->view = NULL;
    }
    gc_tensor_release(bucket->buffer);
    bucket->buffer = NULL;
}

gc_status gc_ddp_zero_retire(gc_ddp *ddp, gc_ddp_bucket *bucket, gc_status done) {
    gc_tensor *reduced = bucket->wide ? bucket->wide : bucket->buffer;
    gc_tensor *mine = gc_slice0(reduced, bucket->shard_offset, bucket->shard_offset + bucket->shard_count);
    /* the f32 average rounded once to the parameters' dtype, as ZeRO-0 rounds its buffer */
    gc_tensor *rounded = done != GC_OK ? NULL : bucket->wide ? gc_cast(mine, bucket->shard->dtype) : gc_tensor_retain(mine);
    if (done == GC_OK && !rounded) done = gc_last_status();
    if (done == GC_OK) done = bucket->shard_fresh ? gc_copy_(bucket->shard, rounded) : gc_add_inplace(bucket->shard, rounded);
    if (done == GC_OK) bucket->shard_fresh = false;
    gc_tensor_release(mine);
    gc_tensor_release(rounded);
    gc_tensor_release(bucket->wide);
    bucket->wide = NULL;
    /* the local gradient is spent: the next backward accumulates what comes after it */
    if (ddp->options.zero >= GC_ZERO_2) gc_ddp_zero_free_buffer(ddp, bucket);
    else gc_fill_(bucket->buffer, 0.0);
    return done;
}

void gc_ddp_zero_reset(gc_ddp *ddp) {
    for (int b = 0; b < ddp->n_buckets && gc_ddp_sharded(ddp); b++) {
        gc_fill_(ddp->buckets[b].shard, 0.0);
        ddp->buckets[b].shard_fresh = true;
    }
}

gc_zero gc_ddp_zero(const gc_ddp *ddp) { return ddp->options.zero; }

bool gc_ddp_reduces_every_backward(const gc_ddp *ddp) { return ddp->options.zero == GC_ZERO_2_EVERY_BACKWARD; }

gc_process_group *gc_ddp_group(const gc_ddp *ddp) { return ddp->group; }

int gc_ddp_bucket_count(const gc_ddp *ddp) { return ddp->n_buckets; }

static const gc_ddp_bucket *bucket_at(const gc_ddp *ddp, int bucket) {
    if (bucket < 0 || bucket >= ddp->n_buckets) gc_fatal("ddp: bucket %d of %d", bucket, ddp->n_buckets);
    return &ddp->buckets[bucket];
}

gc_ddp_bucket_info gc_ddp_get_bucket(const gc_ddp *ddp, int bucket) {
    const gc_ddp_bucket *b = bucket_at(ddp, bucket);
    return (gc_ddp_bucket_info){.numel = b->numel, .shard_offset = b->shard_offset, .shard_count = b->shard_count,
                                .n_params = b->count, .shard_grad = b->shard ? b->shard : b->buffer};
}

const gc_param *gc_ddp_bucket_param(const gc_ddp *ddp, int bucket, int index, int64_t *offset) {
    const gc_ddp_bucket *b = bucket_at(ddp, bucket);
    if (index < 0 || index >= b->count) gc_fatal("ddp: parameter %d of bucket %d, which has %d", index, bucket, b->count);
    *offset = ddp->slots[b->first + index].offset;
    return &ddp->params.items[b->first + index];
}
