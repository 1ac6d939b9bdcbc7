/* The collectives' front-end: checks the arguments (a mismatch is a programmer error),
 * stages tensors that live on a device the backend does not work on, and hands the work to
 * the backend. Every tensor is allocated and released here, on the caller's thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_internal.h"
#include "gradcache/ops.h"

static const char *collective_name(gc_collective kind) {
    static const char *const names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "shift"};
    return names[kind];
}

static gc_dist_work *new_work(gc_process_group *group, gc_collective kind, gc_dist_op op, const gc_tensor *t) {
    gc_dist_work *work = calloc(1, sizeof *work);
    if (!work) gc_fatal("%s: out of host memory", collective_name(kind));
    work->group = group;
    work->kind = kind;
    work->op = op;
    char shape[96];
    snprintf(work->what, sizeof work->what, "%s #%lld (%s)", collective_name(kind), (long long)group->sequence++,
             gc_tensor_str(t, shape, sizeof shape));
    group->stats.collectives++;
    group->stats.bytes += (int64_t)gc_nbytes(t);
    return work;
}

static bool native(const gc_process_group *group, const gc_tensor *t) {
    return gc_device_equal(t->device, group->native_device);
}

/* t on the backend's device: t itself (retained) or a copy. NULL with the work failed. */
static gc_tensor *staged_copy(gc_dist_work *work, const gc_tensor *t, bool always_copy) {
    gc_tensor *copy = !always_copy && native(work->group, t) ? gc_tensor_retain((gc_tensor *)t)
                                                            : gc_to_device(t, work->group->native_device);
    if (!copy) gc_work_fail(work, gc_last_status(), gc_last_error());
    return copy;
}

/* Where the backend writes the caller's output: the tensor itself, or a staging tensor
 * copied back at wait. */
static void set_output(gc_dist_work *work, gc_tensor *output) {
    if (native(work->group, output)) {
        work->output = gc_tensor_retain(output);
        return;
    }
    work->output = gc_empty(output->ndim, output->shape, output->dtype, work->group->native_device);
    if (!work->output) gc_work_fail(work, gc_last_status(), gc_last_error());
    else work->caller_output = gc_tensor_retain(output);
}

/* Hands the work to the backend unless staging failed. Once queued, its fields are read
 * only at wait: the TCP backend's thread may already be running it, or failing it. */
static gc_dist_work *launch(gc_dist_work *work) {
    work->queued = work->status == GC_OK && work->group->impl->start(work->group, work);
    if (!work->queued) work->done = true;
    return work;
}

gc_status gc_dist_work_wait(gc_dist_work *work) {
    if (work->queued) work->group->impl->wait(work->group, work);
    /* the backend wrote it through its raw pointer (gradcache/tensor.h: versions) */
    if (work->output) gc_tensor_mark_written(work->output);
    if (work->status == GC_OK && work->caller_output && gc_copy_(work->caller_output, work->output) != GC_OK)
        gc_work_fail(work, gc_last_status(), gc_last_error());
    gc_status status = work->status;
    if (status != GC_OK) gc_set_error(status, "%s", work->message);
    work->group->stats.sent_bytes += work->sent_bytes;
    gc_tensor_release(work->input);
    if (work->output != work->input) gc_tensor_release(work->output);
    gc_tensor_release(work->caller_output);
    free(work->counts);
    free(work);
    return status;
}

static void check_op(const char *name, const gc_tensor *t, gc_dist_op op) {
    if ((int)op < GC_DIST_SUM || op > GC_DIST_MIN) gc_fatal("%s: unknown reduce op %d", name, (int)op);
    if (op == GC_DIST_AVG && !gc_dtype_is_float(t->dtype))
        gc_fatal("%s: an average of %s values (a floating dtype is needed)", name, gc_dtype_name(t->dtype));
}

/* Checks counts[world] (>= 0, summing to rows) and copies them into the work. */
static void take_counts(const char *name, gc_dist_work *work, const int64_t *counts, int64_t rows) {
    int world = work->group->world;
    work->counts = malloc((size_t)world * sizeof *work->counts);
    if (!work->counts) gc_fatal("%s: out of host memory", name);
    int64_t sum = 0;
    for (int r = 0; r < world; r++) {
        if (counts) {
            if (counts[r] < 0) gc_fatal("%s: counts[%d] = %lld", name, r, (long long)counts[r]);
            work->counts[r] = counts[r];
        } else {
            work->counts[r] = rows / world + (r < rows % world ? 1 : 0);
        }
        sum += work->counts[r];
    }
    if (sum != rows) gc_fatal("%s: the counts sum to %lld rows, the tensor has %lld", name, (long long)sum, (long long)rows);
}

/* Whether `part` is rows [start, start + counts[rank]) of `whole` itself (the same storage):
 * an in-place reduce-scatter (part is the output) or all-gather (part is the input). */
static bool own_rows_of(const gc_tensor *whole, const gc_tensor *part, const int64_t *counts, int rank) {
    int64_t start = 0;
    for (int r = 0; r < rank; r++) start += counts[r];
    size_t row = whole->shape[0] ? (size_t)(gc_numel(whole) / whole->shape[0]) : 0;
    return part->storage == whole->storage && part->offset == whole->offset + (size_t)start * row;
}

/* input and output have the same dtype, device and dims after the first. */
static void check_rows_alike(const char *name, const gc_tensor *a, const gc_tensor *b) {
    char ta[96], tb[96];
    bool alike = a->ndim == b->ndim && a->ndim >= 1 && a->dtype == b->dtype && gc_device_equal(a->device, b->device);
    for (int d = 1; alike && d < a->ndim; d++) alike = a->shape[d] == b->shape[d];
    if (!alike)
        gc_fatal("%s: input %s and output %s differ beyond their rows", name, gc_tensor_str(a, ta, sizeof ta),
                 gc_tensor_str(b, tb, sizeof tb));
}

gc_dist_work *gc_dist_all_reduce_start(gc_process_group *group, gc_tensor *t, gc_dist_op op) {
    check_op("all_reduce", t, op);
    gc_dist_work *work = new_work(group, GC_COLLECTIVE_ALL_REDUCE, op, t);
    work->input = work->output = staged_copy(work, t, false);
    if (work->input && !native(group, t)) work->caller_output = gc_tensor_retain(t);
    return launch(work);
}

gc_dist_work *gc_dist_reduce_scatter_start(gc_process_group *group, const gc_tensor *input, gc_tensor *output,
                                      const int64_t *counts, gc_dist_op op) {
    check_op("reduce_scatter", input, op);
    check_rows_alike("reduce_scatter", input, output);
    gc_dist_work *work = new_work(group, GC_COLLECTIVE_REDUCE_SCATTER, op, input);
    take_counts("reduce_scatter", work, counts, input->shape[0]);
    if (output->shape[0] != work->counts[group->rank])
        gc_fatal("reduce_scatter: rank %d's output has %lld rows, its count is %lld", group->rank,
                 (long long)output->shape[0], (long long)work->counts[group->rank]);
    /* the ring adds into its input: a copy, unless the caller gave it up (output its own rows) */
    bool in_place = own_rows_of(input, output, work->counts, group->rank);
    work->input = staged_copy(work, input, !in_place);
    if (work->input) set_output(work, output);
    return launch(work);
}

gc_dist_work *gc_dist_all_gather_start(gc_process_group *group, const gc_tensor *input, gc_tensor *output,
                                  const int64_t *counts) {
    if (!counts) gc_fatal("all_gather: the counts of every rank are needed (gc_dist_all_gather exchanges them)");
    check_rows_alike("all_gather", input, output);
    gc_dist_work *work = new_work(group, GC_COLLECTIVE_ALL_GATHER, GC_DIST_SUM, input);
    take_counts("all_gather", work, counts, output->shape[0]);
    if (input->shape[0] != work->counts[group->rank])
        gc_fatal("all_gather: rank %d's input has %lld rows, its count is %lld", group->rank,
                 (long long)input->shape[0], (long long)work->counts[group->rank]);
    work->input = staged_copy(work, input, false);
    if (work->input) set_output(work, output);
    return launch(work);
}

gc_dist_work *gc_dist_broadcast_start(gc_process_group *group, gc_tensor *t, int root) {
    if (root < 0 || root >= group->world) gc_fatal("broadcast: root %d in a world of %d", root, group->world);
    gc_dist_work *work = new_work(group, GC_COLLECTIVE_BROADCAST, GC_DIST_SUM, t);
    work->root = root;
    work->input = work->output = staged_copy(work, t, false);
    if (work->input && !native(group, t)) work->caller_output = gc_tensor_retain(t);
    return launch(work);
}

gc_dist_work *gc_dist_shift_start(gc_process_group *group, const gc_tensor *send, gc_tensor *receive) {
    char ts[96], tr[96];
    if (send->dtype != receive->dtype || !gc_device_equal(send->device, receive->device) ||
        (group->world == 1 && gc_nbytes(send) != gc_nbytes(receive)))
        gc_fatal("shift: rank %d sends %s and receives %s (one dtype and device; in a world of one, one size)",
                 group->rank, gc_tensor_str(send, ts, sizeof ts), gc_tensor_str(receive, tr, sizeof tr));
    gc_dist_work *work = new_work(group, GC_COLLECTIVE_SHIFT, GC_DIST_SUM, send);
    work->input = staged_copy(work, send, false);
    if (work->input) set_output(work, receive);
    return launch(work);
}

gc_status gc_dist_shift(gc_process_group *group, const gc_tensor *send, gc_tensor *receive) {
    return gc_dist_work_wait(gc_dist_shift_start(group, send, receive));
}

gc_status gc_dist_all_reduce(gc_process_group *group, gc_tensor *t, gc_dist_op op) {
    return gc_dist_work_wait(gc_dist_all_reduce_start(group, t, op));
}

gc_status gc_dist_reduce_scatter(gc_process_group *group, const gc_tensor *input, gc_tensor *output,
                            const int64_t *counts, gc_dist_op op) {
    return gc_dist_work_wait(gc_dist_reduce_scatter_start(group, input, output, counts, op));
}

gc_status gc_dist_broadcast(gc_process_group *group, gc_tensor *t, int root) {
    return gc_dist_work_wait(gc_dist_broadcast_start(group, t, root));
}

gc_status gc_dist_barrier(gc_process_group *group) {
    gc_tensor *token = gc_zeros(GC_SHAPE(1), GC_F32, group->native_device);
    gc_status status = token ? gc_dist_all_reduce(group, token, GC_DIST_SUM) : gc_last_status();
    gc_tensor_release(token);
    return status;
}

/* 2^53: the row counts travel as f64, exact up to here */
#define MAX_GATHERED_ROWS 9007199254740992.0

gc_tensor *gc_dist_all_gather(gc_process_group *group, const gc_tensor *input, int64_t *counts) {
    int world = group->world;
    if (input->ndim < 1) gc_fatal("all_gather: a 0-dim input (rows are gathered)");
    /* every rank's row count, as f64 (exact up to 2^53 rows) */
    gc_tensor *mine = gc_scalar((double)input->shape[0], GC_F64, gc_cpu());
    gc_tensor *one = mine ? gc_reshape(mine, GC_SHAPE(1)) : NULL;
    gc_tensor *all = gc_empty(GC_SHAPE(world), GC_F64, gc_cpu());
    int64_t *ones = malloc((size_t)world * sizeof *ones), *rows = malloc((size_t)world * sizeof *rows);
    if (!ones || !rows) gc_fatal("all_gather: out of host memory");
    for (int r = 0; r < world; r++) ones[r] = 1;
    gc_status status = one && all ? gc_dist_work_wait(gc_dist_all_gather_start(group, one, all, ones)) : gc_last_status();
    gc_tensor *output = NULL;
    int64_t total = 0;
    for (int r = 0; r < world && status == GC_OK; r++) {
        /* a peer's count is outside input: a whole number of rows the total can hold */
        double count = ((const double *)gc_data(all))[r];
        if (!(count >= 0 && count <= MAX_GATHERED_ROWS - (double)total && count == (double)(int64_t)count)) {
            gc_set_error(GC_ERR_FORMAT, "all_gather: rank %d says it has %.17g rows (at most %.17g in all)", r, count,
                         MAX_GATHERED_ROWS);
            status = GC_ERR_FORMAT;
        } else {
            total += rows[r] = (int64_t)count;
        }
    }
    if (status == GC_OK) {
        int64_t shape[GC_MAX_DIMS];
        memcpy(shape, input->shape, sizeof shape);
        shape[0] = total;
        output = gc_empty(input->ndim, shape, input->dtype, input->device);
        if (output && gc_dist_work_wait(gc_dist_all_gather_start(group, input, output, rows)) != GC_OK) {
            gc_tensor_release(output);
            output = NULL;
        }
    }
    if (output && counts) memcpy(counts, rows, (size_t)world * sizeof *counts);
    gc_tensor_release(mine);
    gc_tensor_release(one);
    gc_tensor_release(all);
    free(ones);
    free(rows);
    return output;
}

gc_status gc_dist_all_gather_host(gc_process_group *group, const void *mine, size_t size, void *all) {
    int world = group->world;
    int64_t words = (int64_t)((size + 3) / 4); /* gathered as i32 words: no arithmetic touches them */
    gc_tensor *input = gc_zeros(GC_SHAPE(words), GC_I32, gc_cpu());
    gc_tensor *output = gc_empty(GC_SHAPE(world * words), GC_I32, gc_cpu());
    gc_status status = input && output ? GC_OK : gc_last_status();
    if (status == GC_OK) {
        memcpy(gc_data(input), mine, size);
        gc_tensor *rows_in = gc_reshape(input, GC_SHAPE(1, words)), *rows_out = gc_reshape(output, GC_SHAPE(world, words));
        int64_t *ones = malloc((size_t)world * sizeof *ones);
        if (!ones) gc_fatal("all_gather_host: out of host memory");
        for (int r = 0; r < world; r++) ones[r] = 1;
        status = gc_dist_work_wait(gc_dist_all_gather_start(group, rows_in, rows_out, ones));
        free(ones);
        gc_tensor_release(rows_in);
        gc_tensor_release(rows_out);
    }
    for (int r = 0; r < world && status == GC_OK; r++)
        memcpy((char *)all + (size_t)r * size, (const int32_t *)gc_data(output) + (size_t)r * words, size);
    gc_tensor_release(input);
    gc_tensor_release(output);
    return status;
}

gc_status gc_dist_any(gc_process_group *group, bool *flag) {
    int32_t mine = *flag ? 1 : 0;
    gc_tensor *t = gc_from_host(&mine, GC_SHAPE(1), GC_I32, gc_cpu());
    gc_status status = t ? gc_dist_all_reduce(group, t, GC_DIST_MAX) : gc_last_status();
    *flag = status != GC_OK || *(const int32_t *)gc_data(t) != 0;
    gc_tensor_release(t);
    return status;
}
