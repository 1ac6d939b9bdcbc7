/* The bucketer at work (include/gradcache/ddp.h): hooks mark gradients ready, buckets are
 * launched in order, gc_ddp_wait finishes the reduction. What ZeRO does differently with a
 * bucket (its reduce-scatter, its shard, its buffer's life) is ddp_zero.c's. */
#include <stdlib.h>

#include "ddp_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

gc_status gc_ddp_restore_view(gc_ddp_slot *slot) {
    gc_tensor *grad = gc_grad(slot->param);
    if (grad == slot->view) return GC_OK;
    gc_status status = GC_OK;
    if (grad) status = gc_copy_(slot->view, grad);
    else gc_fill_(slot->view, 0.0);
    if (status == GC_OK) gc_set_grad(slot->param, slot->view);
    return status;
}

/* Waits for the bucket's reduction and leaves the result where it belongs: every rank's
 * average in the buffer (the f32 copy's rounded once into it), or with ZeRO in the shard. */
static gc_status retire(gc_ddp *ddp, gc_ddp_bucket *bucket) {
    gc_status done = gc_dist_work_wait(bucket->work);
    bucket->work = NULL;
    if (gc_ddp_sharded(ddp)) return gc_ddp_zero_retire(ddp, bucket, done);
    if (bucket->wide) {
        gc_tensor *narrow = done == GC_OK ? gc_cast(bucket->wide, bucket->buffer->dtype) : NULL;
        if (done == GC_OK && !narrow) done = gc_last_status();
        if (narrow) done = gc_copy_(bucket->buffer, narrow);
        gc_tensor_release(narrow);
        gc_tensor_release(bucket->wide);
        bucket->wide = NULL;
    }
    return done;
}

/* ZeRO-2 frees a bucket's buffer once it is reduced; so that buffers are freed while backward
 * goes on (not all at its end), at most two reductions are in flight: before one more is
 * launched, the oldest is retired. */
static gc_status bound_in_flight(gc_ddp *ddp, int launching) {
    if (ddp->options.zero < GC_ZERO_2) return GC_OK;
    int in_flight = 0, oldest = -1;
    for (int b = 0; b < launching; b++)
        if (ddp->buckets[b].work && in_flight++ == 0) oldest = b;
    return in_flight >= 2 ? retire(ddp, &ddp->buckets[oldest]) : GC_OK;
}

static gc_status launch(gc_ddp *ddp, int index) {
    gc_ddp_bucket *bucket = &ddp->buckets[index];
    gc_status status = bucket->buffer ? GC_OK : gc_ddp_allocate_buffer(ddp, bucket, true); /* ZeRO-2, unreached */
    for (int s = bucket->first; s < bucket->first + bucket->count && status == GC_OK; s++)
        status = gc_ddp_restore_view(&ddp->slots[s]);
    if (status == GC_OK) status = bound_in_flight(ddp, index);
    if (status != GC_OK) return status;
    gc_tensor *reduced = bucket->buffer;
    if (ddp->options.reduce_in_f32 && gc_dtype_size(reduced->dtype) == 2) {
        bucket->wide = gc_cast(reduced, GC_F32); /* exact: f32 holds every f16 and bf16 value */
        if (!bucket->wide) return gc_last_status();
        reduced = bucket->wide;
    }
    bucket->work = gc_ddp_sharded(ddp) ? gc_ddp_zero_launch(ddp, bucket, reduced)
                                       : gc_dist_all_reduce_start(ddp->group, reduced, GC_DIST_AVG);
    ddp->stats.all_reduces++;
    ddp->stats.bytes += (int64_t)gc_nbytes(bucket->buffer);
    return GC_OK;
}

/* Launches, in bucket order, every bucket whose gradients are all ready (passing over those
 * this backward does not reach, by gc_ddp_expect_params). */
static gc_status launch_ready(gc_ddp *ddp) {
    while (ddp->next_launch < ddp->n_buckets && ddp->buckets[ddp->next_launch].pending == 0) {
        gc_status status = ddp->buckets[ddp->next_launch].skipped ? GC_OK : launch(ddp, ddp->next_launch);
        if (status != GC_OK) return status;
        ddp->next_launch++;
    }
    return GC_OK;
}

/* Autograd's post-accumulate hook: the slot's gradient is complete for this backward. */
static void on_gradient(gc_tensor *param, void *data) {
    (void)param;
    gc_ddp_slot *slot = data;
    gc_ddp *ddp = slot->ddp;
    if (ddp->buckets[slot->bucket].work)
        gc_fatal("ddp: a backward reached '%s' while its bucket was being reduced: call gc_ddp_wait after a synced "
                 "backward, before the next one",
                 slot->name);
    if (!slot->expected)
        gc_fatal("ddp: a backward reached '%s', which gc_ddp_expect_params said it would not", slot->name);
    slot->used = true;
    gc_ddp_bucket *bucket = &ddp->buckets[slot->bucket];
    /* ZeRO-2: the first gradient of a bucket since its reduction (autograd's own tensor so far)
     * gets the bucket's buffer, into which the next ones accumulate */
    gc_status status = bucket->buffer ? GC_OK : gc_ddp_allocate_buffer(ddp, bucket, true);
    if (status == GC_OK && ddp->require_sync && !slot->ready) {
        slot->ready = true;
        bucket->pending--;
        status = launch_ready(ddp);
    }
    /* a hook returns nothing: gc_ddp_wait reports the failure (and launches what is left) */
    if (status != GC_OK && ddp->failure == GC_OK) ddp->failure = status;
}

gc_ddp *gc_ddp_new(gc_process_group *group, const gc_param_list *params, const gc_ddp_options *options) {
    if (options && ((int)options->zero < GC_ZERO_0 || options->zero > GC_ZERO_2_EVERY_BACKWARD))
        gc_fatal("ddp: no ZeRO stage %d", (int)options->zero);
    gc_ddp *ddp = calloc(1, sizeof *ddp);
    if (!ddp) gc_fatal("ddp: out of host memory");
    ddp->group = group;
    ddp->options = options ? *options : (gc_ddp_options){0};
    if (!ddp->options.first_bucket_bytes) ddp->options.first_bucket_bytes = 1u << 20;
    if (!ddp->options.bucket_bytes) ddp->options.bucket_bytes = 25u << 20;
    ddp->require_sync = true;
    gc_status status = gc_ddp_check_params(group, params);
    if (status == GC_OK) status = gc_ddp_build_buckets(ddp, params);
    if (status == GC_OK) status = gc_ddp_zero_allocate_shards(ddp);
    if (status == GC_OK) status = gc_ddp_broadcast_params(group, ddp->slots, ddp->n_slots);
    if (status != GC_OK) {
        gc_ddp_free(ddp);
        return NULL;
    }
    for (int s = 0; s < ddp->n_slots; s++) gc_add_post_accumulate_hook(ddp->slots[s].param, on_gradient, &ddp->slots[s]);
    return ddp;
}

void gc_ddp_free(gc_ddp *ddp) {
    if (!ddp) return;
    for (int b = 0; b < ddp->n_buckets; b++) {
        if (ddp->buckets[b].work) gc_dist_work_wait(ddp->buckets[b].work);
        gc_tensor_release(ddp->buckets[b].wide);
        gc_tensor_release(ddp->buckets[b].buffer);
        gc_tensor_release(ddp->buckets[b].shard);
    }
    for (int s = 0; s < ddp->n_slots; s++) {
        gc_remove_post_accumulate_hook(ddp->slots[s].param, on_gradient, &ddp->slots[s]);
        gc_tensor_release(ddp->slots[s].view);
        gc_tensor_release(ddp->slots[s].param);
    }
    gc_param_list_free(&ddp->params);
    free(ddp->slots);
    free(ddp->buckets);
    free(ddp);
}

bool gc_ddp_set_require_sync(gc_ddp *ddp, bool require_sync) {
    bool previous = ddp->require_sync;
    ddp->require_sync = require_sync;
    return previous;
}

bool gc_ddp_require_sync(const gc_ddp *ddp) { return ddp->require_sync; }

void gc_ddp_micro_batch(gc_ddp *ddp, int index, int count) {
    if (count < 1 || index < 0 || index >= count) gc_fatal("ddp: micro-batch %d of %d", index, count);
    ddp->require_sync = index == count - 1 || gc_ddp_reduces_every_backward(ddp);
}

static gc_status finish(gc_ddp *ddp, bool check_unused) {
    if (!ddp->require_sync) return GC_OK;
    for (int s = 0; s < ddp->n_slots; s++) {
        gc_ddp_slot *slot = &ddp->slots[s];
        if (check_unused && !slot->used && !ddp->options.find_unused_parameters)
            gc_fatal("ddp: parameter '%s' got no gradient since the last reduction (every rank must reach every "
                     "parameter; set find_unused_parameters if some are unused on purpose)",
                     slot->name);
        if (!slot->ready) {
            slot->ready = true;
            ddp->buckets[slot->bucket].pending--;
        }
    }
    gc_status status = ddp->failure;
    ddp->failure = GC_OK;
    gc_status launched = launch_ready(ddp);
    if (status == GC_OK) status = launched;
    for (int b = 0; b < ddp->n_buckets; b++) { /* in launch order */
        gc_ddp_bucket *bucket = &ddp->buckets[b];
        gc_status done = bucket->work ? retire(ddp, bucket) : GC_OK;
        if (status == GC_OK) status = done;
        bucket->pending = bucket->count;
        bucket->skipped = false;
    }
    for (int s = 0; s < ddp->n_slots; s++) {
        ddp->slots[s].ready = false;
        ddp->slots[s].expected = true;
        if (check_unused) ddp->slots[s].used = false;
    }
    ddp->next_launch = 0;
    ddp->stats.syncs++;
    return status;
}

void gc_ddp_expect_params(gc_ddp *ddp, const gc_param_list *params) {
    if (ddp->next_launch > 0) gc_fatal("ddp: expect_params during a synced backward (call it before the backward)");
    for (int s = 0; s < ddp->n_slots; s++) {
        gc_ddp_slot *slot = &ddp->slots[s];
        slot->expected = !params;
        for (int i = 0; params && i < params->count && !slot->expected; i++)
            slot->expected = params->items[i].tensor == slot->param;
        if (!slot->expected && !slot->ready) { /* nothing to wait for */
            slot->ready = true;
            ddp->buckets[slot->bucket].pending--;
        }
    }
    for (int b = 0; b < ddp->n_buckets; b++) {
        gc_ddp_bucket *bucket = &ddp->buckets[b];
        bucket->skipped = true;
        for (int s = bucket->first; s < bucket->first + bucket->count; s++) bucket->skipped &= !ddp->slots[s].expected;
    }
}

gc_status gc_ddp_wait(gc_ddp *ddp) { return finish(ddp, true); }
gc_status gc_ddp_wait_partial(gc_ddp *ddp) { return finish(ddp, false); }

void gc_ddp_zero_grad(gc_ddp *ddp) {
    for (int b = 0; b < ddp->n_buckets; b++)
        if (ddp->buckets[b].work) gc_fatal("ddp: zero_grad while bucket %d is being reduced (call gc_ddp_wait first)", b);
    for (int b = 0; b < ddp->n_buckets && ddp->options.zero >= GC_ZERO_2; b++) /* local gradients dropped */
        gc_ddp_zero_free_buffer(ddp, &ddp->buckets[b]);
    for (int s = 0; s < ddp->n_slots; s++)
        if (ddp->slots[s].view) gc_set_grad(ddp->slots[s].param, ddp->slots[s].view);
    for (int b = 0; b < ddp->n_buckets; b++)
        if (ddp->buckets[b].buffer) gc_fill_(ddp->buckets[b].buffer, 0.0);
    gc_ddp_zero_reset(ddp);
}

gc_ddp_stats gc_ddp_get_stats(const gc_ddp *ddp) { return ddp->stats; }
