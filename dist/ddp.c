/* The bucketer at work (include/gradcache/ddp.h): hooks mark gradients ready, buckets are
 * launched in order, gc_ddp_wait finishes the reduction. */
#include <stdlib.h>

#include "ddp_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/ops.h"

/* Makes the slot's gradient the view of its bucket again, if something replaced it (a
 * gc_zero_grad, a user's own tensor): the bucket is what gets reduced. */
static gc_status restore_view(gc_ddp_slot *slot) {
    gc_tensor *grad = gc_grad(slot->param);
    if (grad == slot->view) return GC_OK;
    gc_status status = GC_OK;
    if (grad) status = gc_copy_(slot->view, grad);
    else gc_fill_(slot->view, 0.0);
    if (status == GC_OK) gc_set_grad(slot->param, slot->view);
    return status;
}

static gc_status launch(gc_ddp *ddp, gc_ddp_bucket *bucket) {
    for (int s = bucket->first; s < bucket->first + bucket->count; s++) {
        gc_status status = restore_view(&ddp->slots[s]);
        if (status != GC_OK) return status;
    }
    gc_tensor *reduced = bucket->buffer;
    if (ddp->options.reduce_in_f32 && gc_dtype_size(reduced->dtype) == 2) {
        bucket->wide = gc_cast(reduced, GC_F32); /* exact: f32 holds every f16 and bf16 value */
        if (!bucket->wide) return gc_last_status();
        reduced = bucket->wide;
    }
    bucket->work = gc_dist_all_reduce_start(ddp->group, reduced, GC_DIST_AVG);
    ddp->stats.all_reduces++;
    ddp->stats.bytes += (int64_t)gc_nbytes(bucket->buffer);
    return GC_OK;
}

/* Launches, in bucket order, every bucket whose gradients are all ready. */
static gc_status launch_ready(gc_ddp *ddp) {
    while (ddp->next_launch < ddp->n_buckets && ddp->buckets[ddp->next_launch].pending == 0) {
        gc_status status = launch(ddp, &ddp->buckets[ddp->next_launch]);
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
    slot->used = true;
    if (!ddp->require_sync || slot->ready) return;
    slot->ready = true;
    ddp->buckets[slot->bucket].pending--;
    /* an allocation failing here (restoring a replaced gradient) is reported by gc_ddp_wait,
     * which launches whatever is left */
    launch_ready(ddp);
}

gc_ddp *gc_ddp_new(gc_process_group *group, const gc_param_list *params, const gc_ddp_options *options) {
    gc_ddp *ddp = calloc(1, sizeof *ddp);
    if (!ddp) gc_fatal("ddp: out of host memory");
    ddp->group = group;
    ddp->options = options ? *options : (gc_ddp_options){0};
    if (!ddp->options.first_bucket_bytes) ddp->options.first_bucket_bytes = 1u << 20;
    if (!ddp->options.bucket_bytes) ddp->options.bucket_bytes = 25u << 20;
    ddp->require_sync = true;
    gc_status status = gc_ddp_check_params(group, params);
    if (status == GC_OK) status = gc_ddp_build_buckets(ddp, params);
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
    }
    for (int s = 0; s < ddp->n_slots; s++) {
        gc_remove_post_accumulate_hook(ddp->slots[s].param, on_gradient, &ddp->slots[s]);
        gc_tensor_release(ddp->slots[s].view);
        gc_tensor_release(ddp->slots[s].param);
    }
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
    ddp->require_sync = index == count - 1;
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
    gc_status status = launch_ready(ddp);
    for (int b = 0; b < ddp->n_buckets; b++) { /* in launch order */
        gc_ddp_bucket *bucket = &ddp->buckets[b];
        if (!bucket->work) continue;
        gc_status done = gc_dist_work_wait(bucket->work);
        bucket->work = NULL;
        if (bucket->wide) { /* the f32 average, rounded once into the half buffer */
            gc_tensor *narrow = done == GC_OK ? gc_cast(bucket->wide, bucket->buffer->dtype) : NULL;
            if (done == GC_OK && !narrow) done = gc_last_status();
            if (narrow) done = gc_copy_(bucket->buffer, narrow);
            gc_tensor_release(narrow);
            gc_tensor_release(bucket->wide);
            bucket->wide = NULL;
        }
        if (status == GC_OK) status = done;
        bucket->pending = bucket->count;
    }
    for (int s = 0; s < ddp->n_slots; s++) {
        ddp->slots[s].ready = false;
        if (check_unused) ddp->slots[s].used = false;
    }
    ddp->next_launch = 0;
    ddp->stats.syncs++;
    return status;
}

gc_status gc_ddp_wait(gc_ddp *ddp) { return finish(ddp, true); }
gc_status gc_ddp_wait_partial(gc_ddp *ddp) { return finish(ddp, false); }

void gc_ddp_zero_grad(gc_ddp *ddp) {
    for (int b = 0; b < ddp->n_buckets; b++)
        if (ddp->buckets[b].work) gc_fatal("ddp: zero_grad while bucket %d is being reduced (call gc_ddp_wait first)", b);
    for (int s = 0; s < ddp->n_slots; s++) gc_set_grad(ddp->slots[s].param, ddp->slots[s].view);
    for (int b = 0; b < ddp->n_buckets; b++) gc_fill_(ddp->buckets[b].buffer, 0.0);
}

gc_ddp_stats gc_ddp_get_stats(const gc_ddp *ddp) { return ddp->stats; }
