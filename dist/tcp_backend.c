/* The TCP backend: a ring of connections (ring.h) and one communication thread that runs
 * the works in the order they were started, so that the caller's thread computes while
 * bytes move. When a collective fails, the ring is closed: the neighbours see the failure at
 * once and pass it on, and every later work fails with the first failure's message. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_internal.h"
#include "ring.h"
#include "socket.h"

#define SEGMENT_BYTES (256u << 10)

typedef struct tcp_state {
    gc_ring ring;
    size_t *offset, *count_of; /* [world]: the chunks of the work being run, in elements */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;    /* a work was queued or finished, or the thread must stop */
    gc_dist_work **queue;      /* FIFO of started works */
    size_t head, count, capacity;
    bool stopping;
    bool broken;               /* a collective failed: the ring is closed */
    char failure[512];
} tcp_state;

/* --- running one work on host buffers (the communication thread) --- */

static gc_status run_work(tcp_state *state, gc_dist_work *work) {
    gc_ring *ring = &state->ring;
    int world = ring->world;
    size_t *offset = state->offset, *count = state->count_of;
    gc_tensor *out = work->output;
    gc_ring_buffer buffer = {.element_size = gc_dtype_size(out->dtype), .dtype = out->dtype, .offset = offset,
                             .count = count};
    switch (work->kind) {
    case GC_COLLECTIVE_ALL_REDUCE:
        gc_even_split((size_t)gc_numel(out), world, offset, count);
        buffer.data = gc_data(out);
        return gc_ring_run(ring, &buffer, GC_RING_ALL_REDUCE, work->op, work->what);
    case GC_COLLECTIVE_BROADCAST:
        return gc_ring_broadcast(ring, gc_data(out), gc_nbytes(out), work->root, work->what);
    case GC_COLLECTIVE_SHIFT:
        return gc_ring_shift(ring, gc_data(work->input), gc_nbytes(work->input), gc_data(out), gc_nbytes(out),
                             work->what);
    case GC_COLLECTIVE_REDUCE_SCATTER:
    case GC_COLLECTIVE_ALL_GATHER: {
        gc_tensor *rows = work->kind == GC_COLLECTIVE_ALL_GATHER ? out : work->input;
        size_t row = rows->shape[0] ? (size_t)(gc_numel(rows) / rows->shape[0]) : 0, start = 0;
        for (int r = 0; r < world; r++) {
            offset[r] = start;
            count[r] = (size_t)work->counts[r] * row;
            start += count[r];
        }
        size_t mine = count[ring->rank] * buffer.element_size;
        if (work->kind == GC_COLLECTIVE_ALL_GATHER) {
            buffer.data = gc_data(out);
            uint8_t *place = buffer.data + offset[ring->rank] * buffer.element_size;
            if (mine && place != gc_data(work->input)) memcpy(place, gc_data(work->input), mine); /* else in place */
            return gc_ring_run(ring, &buffer, GC_RING_ALL_GATHER, work->op, work->what);
        }
        buffer.data = gc_data(work->input);
        gc_status status = gc_ring_run(ring, &buffer, GC_RING_REDUCE_SCATTER, work->op, work->what);
        uint8_t *reduced = buffer.data + offset[ring->rank] * buffer.element_size;
        if (status == GC_OK && mine && reduced != gc_data(out)) memcpy(gc_data(out), reduced, mine); /* else in place */
        return status;
    }
    }
    return GC_OK;
}

static void close_ring(gc_ring *ring) {
    gc_socket_close(ring->next_fd);
    gc_socket_close(ring->prev_fd);
    ring->next_fd = ring->prev_fd = -1;
}

static void *communicate(void *arg) {
    tcp_state *state = arg;
    pthread_mutex_lock(&state->lock);
    for (;;) {
        while (!state->stopping && state->count == 0) pthread_cond_wait(&state->changed, &state->lock);
        if (state->count == 0) break; /* stopping, and nothing left to do */
        gc_dist_work *work = state->queue[state->head];
        bool broken = state->broken;
        pthread_mutex_unlock(&state->lock);

        state->ring.sent_bytes = 0;
        if (broken) {
            gc_work_fail(work, GC_ERR_PEER, state->failure);
        } else if (run_work(state, work) != GC_OK) {
            gc_work_fail(work, gc_last_status(), gc_last_error());
            snprintf(state->failure, sizeof state->failure, "the group failed earlier: %s", gc_last_error());
            close_ring(&state->ring); /* the neighbours learn of it now, not at their timeout */
            broken = true;
        }

        pthread_mutex_lock(&state->lock);
        work->sent_bytes = state->ring.sent_bytes;
        state->broken = broken;
        state->head = (state->head + 1) % state->capacity;
        state->count--;
        work->done = true;
        pthread_cond_broadcast(&state->changed);
    }
    pthread_mutex_unlock(&state->lock);
    return NULL;
}

/* --- the backend interface (the caller's thread) --- */

static bool tcp_start(gc_process_group *group, gc_dist_work *work) {
    tcp_state *state = group->state;
    pthread_mutex_lock(&state->lock);
    if (state->count == state->capacity) { /* grow the ring buffer of the queue, keeping its order */
        size_t capacity = state->capacity ? 2 * state->capacity : 16;
        gc_dist_work **queue = malloc(capacity * sizeof *queue);
        if (!queue) gc_fatal("%s: out of host memory for the queue", work->what);
        for (size_t i = 0; i < state->count; i++) queue[i] = state->queue[(state->head + i) % state->capacity];
        free(state->queue);
        state->queue = queue;
        state->head = 0;
        state->capacity = capacity;
    }
    state->queue[(state->head + state->count++) % state->capacity] = work;
    pthread_cond_broadcast(&state->changed);
    pthread_mutex_unlock(&state->lock);
    return true; /* a broken ring fails the work on the thread, in its turn */
}

static void tcp_wait(gc_process_group *group, gc_dist_work *work) {
    tcp_state *state = group->state;
    pthread_mutex_lock(&state->lock);
    /* the thread always finishes a work: every socket operation has a deadline */
    while (!work->done) pthread_cond_wait(&state->changed, &state->lock);
    pthread_mutex_unlock(&state->lock);
}

/* Closes the ring's sockets and frees the state (its thread has stopped, or never started). */
static void free_state(tcp_state *state) {
    close_ring(&state->ring);
    pthread_mutex_destroy(&state->lock);
    pthread_cond_destroy(&state->changed);
    free(state->ring.scratch);
    free(state->offset);
    free(state->count_of);
    free(state->queue); /* NULL until a work was queued */
    free(state);
}

static void tcp_destroy(gc_process_group *group) {
    tcp_state *state = group->state;
    if (!state) return;
    pthread_mutex_lock(&state->lock);
    state->stopping = true;
    pthread_cond_broadcast(&state->changed);
    pthread_mutex_unlock(&state->lock);
    pthread_join(state->thread, NULL);
    free_state(state);
    group->state = NULL;
}

static const gc_dist_backend_impl tcp_impl = {"tcp", GC_DEVICE_CPU, tcp_start, tcp_wait, tcp_destroy};

gc_status gc_tcp_backend_init(gc_process_group *group) {
    tcp_state *state = calloc(1, sizeof *state);
    if (!state) gc_fatal("tcp group: out of host memory");
    state->ring = (gc_ring){.rank = group->rank, .world = group->world, .next_fd = -1, .prev_fd = -1,
                            .timeout = group->timeout, .segment_bytes = SEGMENT_BYTES};
    state->ring.scratch = malloc(SEGMENT_BYTES);
    state->offset = malloc((size_t)group->world * sizeof *state->offset);
    state->count_of = malloc((size_t)group->world * sizeof *state->count_of);
    if (!state->ring.scratch || !state->offset || !state->count_of) gc_fatal("tcp group: out of host memory");
    group->impl = &tcp_impl;
    group->state = state;
    group->native_device = gc_cpu();
    pthread_mutex_init(&state->lock, NULL);
    pthread_cond_init(&state->changed, NULL);
    gc_status status = GC_OK;
    if (group->world > 1) status = gc_ring_connect(group, &state->ring);
    if (status == GC_OK && pthread_create(&state->thread, NULL, communicate, state) != 0)
        gc_fatal("tcp group: cannot start the communication thread");
    if (status != GC_OK) {
        free_state(state);
        group->state = NULL;
        group->impl = NULL;
    }
    return status;
}
