/* The NCCL backend: collectives on CUDA tensors, on a stream of their own.
 *
 * The library computes on the default stream. A work records an event there and makes the
 * communication stream wait for it, so the collective sees every kernel queued before it;
 * it then runs on the communication stream while later kernels go on, and records a "done"
 * event. Waiting polls that event and NCCL's asynchronous error on the host, until the
 * group's timeout: a peer that died or hangs makes the communicator be aborted and the work
 * fail with GC_ERR_PEER, instead of a hang. The default stream is then made to wait for the
 * done event. Unequal rows per rank (which NCCL's collectives do not take) go through padded
 * buffers, which return to the allocator only once the communication stream is known to be
 * done with them (after a failure, copies queued behind an aborted collective may still
 * run). The communicator is non-blocking (NCCL 2.14+), so that its set-up can time out
 * too. Every call that works on the group's device makes it current first: a process may
 * use several GPUs. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "group_internal.h"
#include "socket.h"
#include "tensor/cuda/check.h"
#include "tensor/cuda/runtime_cuda.h"

/* A failing NCCL call that is not a peer's failure (bad arguments, a broken install). */
#define GC_NCCL_CHECK(call)                                                                         \
    do {                                                                                            \
        ncclResult_t gc_nccl_status_ = (call);                                                      \
        if (gc_nccl_status_ != ncclSuccess && gc_nccl_status_ != ncclInProgress)                    \
            gc_fatal("NCCL error %s in %s at %s:%d", ncclGetErrorString(gc_nccl_status_), #call,    \
                     __FILE__, __LINE__);                                                           \
    } while (0)

typedef struct nccl_state {
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
    bool broken;       /* aborted after a failure: every later work fails with `failure` */
    char failure[512];
    gc_tensor **held;  /* [n_held]: padded buffers of failed works the stream may still write */
    int n_held;
} nccl_state;

/* What a work holds while in flight. */
typedef struct nccl_work {
    cudaEvent_t done;
    gc_tensor *padded_in, *padded_out; /* unequal rows: NCCL needs the same count per rank */
} nccl_work;

static void pause_briefly(void) {
    struct timespec pause = {0, 200 * 1000};
    nanosleep(&pause, NULL);
}

/* After a failure: the communicator is aborted (which also stops its kernels) and every
 * later work fails with this failure. */
static void abort_comm(nccl_state *state, const char *why) {
    if (state->comm) ncclCommAbort(state->comm); /* its result does not matter: it is gone */
    state->comm = NULL;
    state->broken = true;
    snprintf(state->failure, sizeof state->failure, "the group failed earlier: %.480s", why);
}

/* Waits while the (non-blocking) communicator is busy with a call; false with `why` set,
 * and the communicator aborted, when it failed or the deadline passed. */
static bool settle(nccl_state *state, double deadline, const char *what, char *why, size_t size) {
    for (;;) {
        ncclResult_t result;
        GC_NCCL_CHECK(ncclCommGetAsyncError(state->comm, &result));
        if (result == ncclSuccess) return true;
        if (result != ncclInProgress) {
            snprintf(why, size, "%s: NCCL %s: %s (a peer failed?)", what, ncclGetErrorString(result),
                     ncclGetLastError(state->comm));
            break;
        }
        if (gc_ms_until(deadline) == 0) {
            snprintf(why, size, "%s: no progress within the timeout (is a peer stuck or dead?)", what);
            break;
        }
        pause_briefly();
    }
    abort_comm(state, why);
    return false;
}

static ncclDataType_t nccl_type(gc_dtype dtype) {
    switch (dtype) {
    case GC_F32: return ncclFloat32;
    case GC_F64: return ncclFloat64;
    case GC_F16: return ncclFloat16;
    case GC_BF16: return ncclBfloat16;
    case GC_I32: return ncclInt32;
    default: gc_fatal("nccl: unknown dtype %d", (int)dtype);
    }
}

static ncclRedOp_t nccl_op(gc_dist_op op) {
    switch (op) {
    case GC_DIST_SUM: return ncclSum;
    case GC_DIST_AVG: return ncclAvg;
    case GC_DIST_MAX: return ncclMax;
    case GC_DIST_MIN: return ncclMin;
    }
    gc_fatal("nccl: unknown reduce op %d", (int)op);
}

static bool equal_counts(const gc_dist_work *work, int world, int64_t *largest) {
    bool equal = true;
    *largest = 0;
    for (int r = 0; r < world; r++) {
        if (work->counts[r] > *largest) *largest = work->counts[r];
        equal = equal && work->counts[r] == work->counts[0];
    }
    return equal;
}

/* Copies `rows` rows between two row-major buffers on the communication stream. */
static void copy_rows(nccl_state *state, void *to, const void *from, int64_t rows, size_t row_bytes) {
    if (rows > 0)
        GC_CUDA_CHECK(cudaMemcpyAsync(to, from, (size_t)rows * row_bytes, cudaMemcpyDeviceToDevice, state->stream));
}

/* Reduce-scatter and all-gather, through padded buffers when the counts differ. */
static bool gather_or_scatter(gc_process_group *group, gc_dist_work *work, nccl_work *nw, const int64_t *starts,
                              int64_t largest, bool equal, size_t row, char *why, size_t size) {
    nccl_state *state = group->state;
    int world = group->world, rank = group->rank;
    gc_tensor *out = work->output;
    ncclDataType_t type = nccl_type(out->dtype);
    size_t row_bytes = row * gc_dtype_size(out->dtype);
    double deadline = gc_deadline_after(group->timeout);
    if (work->kind == GC_COLLECTIVE_REDUCE_SCATTER) {
        const void *send = gc_data(work->input);
        void *receive = gc_data(out);
        if (!equal) {
            /* padding rows are reduced and gathered too, then dropped: they need no zeros (and
             * a fill kernel on the compute stream would race with this stream) */
            nw->padded_in = gc_empty(GC_SHAPE(world * largest * (int64_t)row), out->dtype, out->device);
            nw->padded_out = gc_empty(GC_SHAPE(largest * (int64_t)row), out->dtype, out->device);
            if (!nw->padded_in || !nw->padded_out) {
                snprintf(why, size, "%s: %s", work->what, gc_last_error());
                return false;
            }
            for (int r = 0; r < world; r++)
                copy_rows(state, (char *)gc_data(nw->padded_in) + (size_t)(r * largest) * row_bytes,
                          (const char *)send + (size_t)starts[r] * row_bytes, work->counts[r], row_bytes);
            send = gc_data(nw->padded_in);
            receive = gc_data(nw->padded_out);
        }
        GC_NCCL_CHECK(ncclReduceScatter(send, receive, (size_t)largest * row, type, nccl_op(work->op), state->comm,
                                        state->stream));
        if (!settle(state, deadline, work->what, why, size)) return false;
        if (!equal) copy_rows(state, gc_data(out), receive, work->counts[rank], row_bytes);
        return true;
    }
    void *receive = gc_data(out);
    if (!equal) {
        nw->padded_in = gc_empty(GC_SHAPE(largest * (int64_t)row), out->dtype, out->device);
        nw->padded_out = gc_empty(GC_SHAPE(world * largest * (int64_t)row), out->dtype, out->device);
        if (!nw->padded_in || !nw->padded_out) {
            snprintf(why, size, "%s: %s", work->what, gc_last_error());
            return false;
        }
        copy_rows(state, gc_data(nw->padded_in), gc_data(work->input), work->counts[rank], row_bytes);
        receive = gc_data(nw->padded_out);
    }
    GC_NCCL_CHECK(ncclAllGather(equal ? gc_data(work->input) : gc_data(nw->padded_in), receive, (size_t)largest * row,
                                type, state->comm, state->stream));
    if (!settle(state, deadline, work->what, why, size)) return false;
    if (!equal)
        for (int r = 0; r < world; r++)
            copy_rows(state, (char *)gc_data(out) + (size_t)starts[r] * row_bytes,
                      (const char *)receive + (size_t)(r * largest) * row_bytes, work->counts[r], row_bytes);
    return true;
}

/* One step of a ring: the send to rank + 1 and the receive from rank - 1 in one NCCL group, so
 * that neither waits for the other (a world of one copies). Bytes, whatever the dtype. */
static bool shift(gc_process_group *group, gc_dist_work *work, double deadline, char *why, size_t size) {
    nccl_state *state = group->state;
    int world = group->world, rank = group->rank;
    if (world == 1) {
        copy_rows(state, gc_data(work->output), gc_data(work->input), 1, gc_nbytes(work->input));
        return true;
    }
    GC_NCCL_CHECK(ncclGroupStart());
    GC_NCCL_CHECK(ncclSend(gc_data(work->input), gc_nbytes(work->input), ncclUint8, (rank + 1) % world, state->comm,
                           state->stream));
    GC_NCCL_CHECK(ncclRecv(gc_data(work->output), gc_nbytes(work->output), ncclUint8, (rank + world - 1) % world,
                           state->comm, state->stream));
    GC_NCCL_CHECK(ncclGroupEnd());
    return settle(state, deadline, work->what, why, size);
}

/* Enqueues the collective itself; false when NCCL refused it (the message is in why). */
static bool enqueue(gc_process_group *group, gc_dist_work *work, nccl_work *nw, char *why, size_t size) {
    nccl_state *state = group->state;
    int world = group->world;
    gc_tensor *out = work->output;
    ncclDataType_t type = nccl_type(out->dtype);
    double deadline = gc_deadline_after(group->timeout);
    if (work->kind == GC_COLLECTIVE_ALL_REDUCE) {
        GC_NCCL_CHECK(ncclAllReduce(gc_data(out), gc_data(out), (size_t)gc_numel(out), type, nccl_op(work->op),
                                    state->comm, state->stream));
        return settle(state, deadline, work->what, why, size);
    }
    if (work->kind == GC_COLLECTIVE_BROADCAST) {
        GC_NCCL_CHECK(ncclBroadcast(gc_data(out), gc_data(out), (size_t)gc_numel(out), type, work->root, state->comm,
                                    state->stream));
        return settle(state, deadline, work->what, why, size);
    }
    if (work->kind == GC_COLLECTIVE_SHIFT) return shift(group, work, deadline, why, size);
    /* reduce-scatter and all-gather: rows per rank, padded to the largest count if unequal */
    const gc_tensor *rows_of = work->kind == GC_COLLECTIVE_ALL_GATHER ? out : work->input;
    size_t row = rows_of->shape[0] ? (size_t)(gc_numel(rows_of) / rows_of->shape[0]) : 0;
    int64_t largest;
    bool equal = equal_counts(work, world, &largest);
    int64_t start = 0, *starts = malloc((size_t)world * sizeof *starts);
    if (!starts) gc_fatal("%s: out of host memory", work->what);
    for (int r = 0; r < world; r++) {
        starts[r] = start;
        start += work->counts[r];
    }
    bool ok = gather_or_scatter(group, work, nw, starts, largest, equal, row, why, size);
    free(starts);
    return ok;
}

/* Whether the communication stream has finished everything queued on it, asked until the
 * deadline. */
static bool stream_idle(nccl_state *state, double deadline) {
    for (;;) {
        cudaError_t query = cudaStreamQuery(state->stream);
        if (query == cudaSuccess) return true;
        if (query != cudaErrorNotReady) GC_CUDA_CHECK(query);
        if (gc_ms_until(deadline) == 0) return false;
        pause_briefly();
    }
}

/* A padded buffer back to the allocator, once nothing queued on the communication stream can
 * write it: at once after a work that succeeded (its done event came after its copies), else
 * when the stream drains within the group's timeout, else it is held until the group is
 * destroyed. */
static void release_padded(gc_process_group *group, gc_dist_work *work, gc_tensor *padded) {
    nccl_state *state = group->state;
    if (!padded) return;
    if (work->status == GC_OK || stream_idle(state, gc_deadline_after(group->timeout))) {
        gc_tensor_release(padded);
        return;
    }
    gc_tensor **held = realloc(state->held, (size_t)(state->n_held + 1) * sizeof *held);
    if (!held) gc_fatal("%s: out of host memory", work->what);
    held[state->n_held++] = padded;
    state->held = held;
}

static void release_work(gc_process_group *group, gc_dist_work *work) {
    nccl_work *nw = work->backend_data;
    if (!nw) return;
    if (nw->done) GC_CUDA_CHECK(cudaEventDestroy(nw->done));
    release_padded(group, work, nw->padded_in);
    release_padded(group, work, nw->padded_out);
    free(nw);
    work->backend_data = NULL;
}

/* What a ring algorithm sends per rank for the work (gc_dist_stats.sent_bytes): NCCL does not
 * say which algorithm it picked, so this is the ring's count, the one the TCP backend measures. */
static int64_t ring_bytes(const gc_process_group *group, const gc_dist_work *work) {
    int64_t world = group->world, bytes = (int64_t)gc_nbytes(work->output);
    switch (work->kind) {
    case GC_COLLECTIVE_ALL_REDUCE: return 2 * (world - 1) * bytes / world;
    case GC_COLLECTIVE_REDUCE_SCATTER: return (world - 1) * (int64_t)gc_nbytes(work->input) / world;
    case GC_COLLECTIVE_ALL_GATHER: return (world - 1) * bytes / world;
    case GC_COLLECTIVE_BROADCAST: return world > 1 ? bytes : 0;
    case GC_COLLECTIVE_SHIFT: return world > 1 ? (int64_t)gc_nbytes(work->input) : 0;
    }
    return 0;
}

static bool nccl_start(gc_process_group *group, gc_dist_work *work) {
    nccl_state *state = group->state;
    if (state->broken) {
        gc_work_fail(work, GC_ERR_PEER, state->failure);
        return false;
    }
    gc_cuda_activate(state->device);
    nccl_work *nw = calloc(1, sizeof *nw);
    if (!nw) gc_fatal("%s: out of host memory", work->what);
    work->backend_data = nw;
    /* the collective starts after every kernel queued so far on the compute stream */
    cudaEvent_t ready;
    GC_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    GC_CUDA_CHECK(cudaEventRecord(ready, 0));
    GC_CUDA_CHECK(cudaStreamWaitEvent(state->stream, ready, 0));
    GC_CUDA_CHECK(cudaEventDestroy(ready));
    char why[512];
    if (!enqueue(group, work, nw, why, sizeof why)) {
        gc_work_fail(work, GC_ERR_PEER, why);
        release_work(group, work);
        return false;
    }
    GC_CUDA_CHECK(cudaEventCreateWithFlags(&nw->done, cudaEventDisableTiming));
    GC_CUDA_CHECK(cudaEventRecord(nw->done, state->stream));
    work->sent_bytes = ring_bytes(group, work);
    return true;
}

static void nccl_wait(gc_process_group *group, gc_dist_work *work) {
    nccl_state *state = group->state;
    nccl_work *nw = work->backend_data;
    double deadline = gc_deadline_after(group->timeout);
    gc_cuda_activate(state->device); /* the default stream that waits below is this device's */
    char why[512];
    for (;;) {
        cudaError_t query = cudaEventQuery(nw->done);
        if (query == cudaSuccess) break;
        if (query != cudaErrorNotReady) GC_CUDA_CHECK(query);
        if (state->broken) {
            gc_work_fail(work, GC_ERR_PEER, state->failure);
            break;
        }
        if (!settle(state, deadline, work->what, why, sizeof why)) {
            gc_work_fail(work, GC_ERR_PEER, why);
            break;
        }
        if (gc_ms_until(deadline) == 0) {
            snprintf(why, sizeof why, "%s: not done within %g s (is a peer stuck or dead?)", work->what, group->timeout);
            abort_comm(state, why);
            gc_work_fail(work, GC_ERR_PEER, why);
            break;
        }
        pause_briefly();
    }
    /* later kernels on the compute stream come after the collective */
    if (work->status == GC_OK) GC_CUDA_CHECK(cudaStreamWaitEvent(0, nw->done, 0));
    work->done = true;
    release_work(group, work);
}

static void nccl_destroy(gc_process_group *group) {
    nccl_state *state = group->state;
    if (!state) return;
    char why[512];
    gc_cuda_activate(state->device);
    /* a non-blocking communicator finalizes asynchronously; one that cannot is aborted */
    if (state->comm) GC_NCCL_CHECK(ncclCommFinalize(state->comm));
    if (state->comm && settle(state, gc_deadline_after(group->timeout), "NCCL finalize", why, sizeof why))
        GC_NCCL_CHECK(ncclCommDestroy(state->comm));
    /* held buffers are freed once the stream has drained; a stream that never does keeps them
     * (a leak, which the memory statistics show, rather than memory written behind our back) */
    if (state->n_held && stream_idle(state, gc_deadline_after(group->timeout)))
        for (int i = 0; i < state->n_held; i++) gc_tensor_release(state->held[i]);
    if (state->stream) GC_CUDA_CHECK(cudaStreamDestroy(state->stream)); /* its queued work still runs */
    free(state->held);
    free(state);
    group->state = NULL;
}

static const gc_dist_backend_impl nccl_impl = {"nccl", GC_DEVICE_CUDA, nccl_start, nccl_wait, nccl_destroy};

/* Rank 0 makes the communicator's id; every rank gets it through the store. */
static gc_status unique_id(gc_process_group *group, ncclUniqueId *id) {
    if (group->rank == 0) {
        GC_NCCL_CHECK(ncclGetUniqueId(id));
        return group->store ? gc_store_set(group->store, "gc/nccl/id", id, sizeof *id) : GC_OK;
    }
    void *value;
    size_t size;
    gc_status status = gc_store_get(group->store, "gc/nccl/id", &value, &size);
    if (status != GC_OK) return status;
    if (size != sizeof *id) {
        free(value);
        gc_set_error(GC_ERR_FORMAT, "the NCCL id from rank 0 has %zu bytes, not %zu (another NCCL version?)", size,
                     sizeof *id);
        return GC_ERR_FORMAT;
    }
    memcpy(id, value, sizeof *id);
    free(value);
    return GC_OK;
}

gc_status gc_nccl_backend_init(gc_process_group *group, gc_device device) {
    if (device.type != GC_DEVICE_CUDA || device.index >= gc_cuda_device_count()) {
        char name[32];
        gc_set_error(GC_ERR_UNAVAILABLE, "the NCCL backend needs a GPU; %s is not one here (%d GPUs)",
                     gc_device_str(device, name, sizeof name), gc_cuda_device_count());
        return GC_ERR_UNAVAILABLE;
    }
    ncclUniqueId id;
    gc_status status = unique_id(group, &id);
    if (status != GC_OK) return status;
    nccl_state *state = calloc(1, sizeof *state);
    if (!state) gc_fatal("nccl group: out of host memory");
    state->device = device.index;
    gc_cuda_activate(device.index);
    GC_CUDA_CHECK(cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* so that a rank that never arrives is a timeout, not a hang */
    GC_NCCL_CHECK(ncclCommInitRankConfig(&state->comm, group->world, id, group->rank, &config));
    group->impl = &nccl_impl;
    group->state = state;
    group->native_device = device;
    char why[512];
    if (!settle(state, gc_deadline_after(group->timeout), "NCCL set-up", why, sizeof why)) {
        gc_set_error(GC_ERR_PEER, "%s", why);
        return GC_ERR_PEER; /* the caller destroys what is left */
    }
    return GC_OK;
}
