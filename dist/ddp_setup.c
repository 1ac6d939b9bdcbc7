/* Setting up the bucketer: every rank must hold the same parameters (checked through the
 * group, so every rank reaches the same verdict), start from rank 0's values, and have its
 * gradients laid out in the same buckets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_internal.h"
#include "gradcache/autograd.h"
#include "gradcache/memory.h"
#include "gradcache/ops.h"

/* What must agree across ranks about a parameter, as exact f64 values (the group gathers
 * tensors): a 52-bit hash of its name, ndim, four dims, dtype and device type. */
#define SIGNATURE 8

static double name_hash(const char *name) {
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 0x100000001b3u;
    return (double)(h >> 12); /* 52 bits: exact in an f64 */
}

static void signature_of(const gc_param *param, double *row) {
    const gc_tensor *t = param->tensor;
    row[0] = name_hash(param->name);
    row[1] = t->ndim;
    for (int d = 0; d < GC_MAX_DIMS; d++) row[2 + d] = d < t->ndim ? (double)t->shape[d] : 0;
    row[6] = t->dtype;
    row[7] = t->device.type;
}

/* Whether v is a whole number in [low, high]: checked before a peer's value becomes an int. */
static bool whole_in(double v, double low, double high) { return v >= low && v <= high && v == (double)(int64_t)v; }

/* A row as text. Another rank's row is outside input: its ndim may be past GC_MAX_DIMS, its
 * sizes no sizes, its dtype no dtype, so each is checked before it is converted or named. */
static const char *describe(const double *row, char *text, size_t size) {
    int64_t shape[GC_MAX_DIMS];
    bool shaped = whole_in(row[1], 0, GC_MAX_DIMS);
    for (int d = 0; d < GC_MAX_DIMS && shaped; d++) {
        shaped = whole_in(row[2 + d], 0, 9007199254740992.0); /* 2^53: exact in an f64 */
        shape[d] = shaped ? (int64_t)row[2 + d] : 0;
    }
    char dims[96], dtype[48];
    if (shaped) gc_shape_str((int)row[1], shape, dims, sizeof dims);
    else snprintf(dims, sizeof dims, "ndim %.17g [%g, %g, %g, %g]", row[1], row[2], row[3], row[4], row[5]);
    const char *device = row[7] == GC_DEVICE_CUDA ? "cuda" : row[7] == GC_DEVICE_CPU ? "cpu" : "an unknown device";
    snprintf(text, size, "%s %s %s", dims, gc_dtype_describe(row[6], dtype, sizeof dtype), device);
    return text;
}

gc_status gc_ddp_check_params(gc_process_group *group, const gc_param_list *params) {
    int world = gc_dist_world_size(group), count = params->count;
    gc_tensor *mine = gc_empty(GC_SHAPE(count > 0 ? count : 1, SIGNATURE), GC_F64, gc_cpu());
    if (!mine) return gc_last_status();
    for (int i = 0; i < count; i++) signature_of(&params->items[i], (double *)gc_data(mine) + i * SIGNATURE);
    gc_tensor *rows = count > 0 ? gc_slice0(mine, 0, count) : gc_slice0(mine, 0, 0);
    int64_t *counts = malloc((size_t)world * sizeof *counts);
    if (!counts) gc_fatal("ddp: out of host memory");
    gc_tensor *all = gc_dist_all_gather(group, rows, counts);
    gc_status status = all ? GC_OK : gc_last_status();
    for (int r = 0; r < world && status == GC_OK; r++)
        if (counts[r] != counts[0]) {
            gc_set_error(GC_ERR_FORMAT, "ddp: rank %d has %lld parameters but rank 0 has %lld", r, (long long)counts[r],
                         (long long)counts[0]);
            status = GC_ERR_FORMAT;
        }
    const double *table = status == GC_OK ? gc_data(all) : NULL;
    for (int r = 1; r < world && status == GC_OK; r++)
        for (int i = 0; i < count && status == GC_OK; i++) {
            const double *first = table + (size_t)i * SIGNATURE, *theirs = table + ((size_t)r * count + i) * SIGNATURE;
            if (memcmp(first, theirs, SIGNATURE * sizeof *first) == 0) continue;
            char a[192], b[192];
            gc_set_error(GC_ERR_FORMAT, "ddp: parameter %d ('%s' on rank %d) is %s%s on rank 0 but %s%s on rank %d", i,
                         params->items[i].name, gc_dist_rank(group), describe(first, a, sizeof a),
                         first[0] != theirs[0] ? " (another name)" : "", describe(theirs, b, sizeof b),
                         first[0] != theirs[0] ? " (another name)" : "", r);
            status = GC_ERR_FORMAT;
        }
    gc_tensor_release(mine);
    gc_tensor_release(rows);
    gc_tensor_release(all);
    free(counts);
    return status;
}

gc_status gc_ddp_broadcast_params(gc_process_group *group, const gc_ddp_slot *slots, int n_slots) {
    gc_dist_work **works = malloc((size_t)(n_slots > 0 ? n_slots : 1) * sizeof *works);
    if (!works) gc_fatal("ddp: out of host memory");
    for (int i = 0; i < n_slots; i++) works[i] = gc_dist_broadcast_start(group, slots[i].param, 0);
    gc_status status = GC_OK;
    for (int i = 0; i < n_slots; i++) {
        gc_status done = gc_dist_work_wait(works[i]);
        if (status == GC_OK) status = done;
    }
    free(works);
    return status;
}

/* Whether param joins the bucket under way: same dtype and device, and the bucket is not
 * full yet (a bucket closes once it reaches its size). */
static bool joins(const gc_ddp *ddp, const gc_tensor *param, const gc_tensor *first, size_t bytes) {
    size_t cap = ddp->n_buckets == 1 ? ddp->options.first_bucket_bytes : ddp->options.bucket_bytes;
    return first && param->dtype == first->dtype && gc_device_equal(param->device, first->device) && bytes < cap;
}

gc_status gc_ddp_allocate_buffer(gc_ddp *ddp, gc_ddp_bucket *bucket, bool keep_gradients) {
    const gc_tensor *first = ddp->slots[bucket->first].param;
    gc_memory_role role = gc_memory_set_role(GC_MEMORY_GRADIENTS);
    bucket->buffer = gc_zeros(GC_SHAPE(bucket->numel), first->dtype, first->device);
    gc_memory_set_role(role);
    if (!bucket->buffer) return gc_last_status();
    gc_status status = GC_OK;
    for (int s = bucket->first; s < bucket->first + bucket->count; s++) {
        gc_ddp_slot *slot = &ddp->slots[s];
        gc_tensor *flat = gc_slice0(bucket->buffer, slot->offset, slot->offset + gc_numel(slot->param));
        slot->view = gc_reshape(flat, slot->param->ndim, slot->param->shape);
        gc_tensor_release(flat);
        if (!keep_gradients) gc_set_grad(slot->param, slot->view);
        else if (status == GC_OK) status = gc_ddp_restore_view(slot);
    }
    return status;
}

gc_status gc_ddp_build_buckets(gc_ddp *ddp, const gc_param_list *params) {
    ddp->slots = calloc((size_t)(params->count > 0 ? params->count : 1), sizeof *ddp->slots);
    ddp->buckets = calloc((size_t)(params->count > 0 ? params->count : 1), sizeof *ddp->buckets);
    if (!ddp->slots || !ddp->buckets) gc_fatal("ddp: out of host memory");
    /* slots in reverse registration order, each tensor once; a bucket per run of slots */
    size_t bucket_bytes = 0;
    for (int i = params->count - 1; i >= 0; i--) {
        gc_tensor *param = params->items[i].tensor;
        bool seen = false;
        for (int j = 0; j < ddp->n_slots && !seen; j++) seen = ddp->slots[j].param == param;
        if (seen) continue;
        if (!gc_requires_grad(param)) gc_fatal("ddp: parameter '%s' does not require a gradient", params->items[i].name);
        gc_ddp_bucket *open = ddp->n_buckets ? &ddp->buckets[ddp->n_buckets - 1] : NULL;
        if (!open || !joins(ddp, param, ddp->slots[open->first].param, bucket_bytes)) {
            ddp->buckets[ddp->n_buckets++] = (gc_ddp_bucket){.first = ddp->n_slots};
            open = &ddp->buckets[ddp->n_buckets - 1];
            bucket_bytes = 0;
        }
        ddp->slots[ddp->n_slots++] = (gc_ddp_slot){
            .ddp = ddp, .param = gc_tensor_retain(param), .offset = open->numel, .bucket = ddp->n_buckets - 1,
            .expected = true};
        gc_param_list_add(&ddp->params, "", params->items[i].name, param, params->items[i].no_decay);
        open->count++;
        open->numel += gc_numel(param);
        bucket_bytes += gc_nbytes(param);
    }
    for (int s = 0; s < ddp->n_slots; s++) ddp->slots[s].name = ddp->params.items[s].name; /* the list is complete */
    /* the buffers, and each gradient a view into its bucket (ZeRO-2: when a backward first
     * reaches the bucket) */
    for (int b = 0; b < ddp->n_buckets; b++) {
        gc_ddp_bucket *bucket = &ddp->buckets[b];
        bucket->pending = bucket->count;
        if (ddp->options.zero < GC_ZERO_2) {
            gc_status status = gc_ddp_allocate_buffer(ddp, bucket, false);
            if (status != GC_OK) return status;
        } else {
            for (int s = bucket->first; s < bucket->first + bucket->count; s++) gc_set_grad(ddp->slots[s].param, NULL);
        }
    }
    ddp->stats.buckets = ddp->n_buckets;
    return GC_OK;
}
