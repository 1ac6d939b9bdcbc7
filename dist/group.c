/* Process groups: rendezvous through the store, the agreement checks every rank makes, and
 * the choice of backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/config.h"
#include "group_internal.h"

static const char *backend_name(gc_dist_backend backend) { return backend == GC_DIST_NCCL ? "nccl" : "tcp"; }

void gc_work_fail(gc_dist_work *work, gc_status status, const char *message) {
    work->status = status;
    snprintf(work->message, sizeof work->message, "%s", message);
}

void gc_even_split(size_t total, int world, size_t *offset, size_t *count) {
    size_t start = 0;
    for (int r = 0; r < world; r++) {
        count[r] = total / (size_t)world + ((size_t)r < total % (size_t)world ? 1 : 0);
        offset[r] = start;
        start += count[r];
    }
}

/* Rank 0 publishes `value` under key; every other rank checks that its own is the same. */
static gc_status agree(gc_process_group *group, const char *key, const char *value, const char *meaning) {
    if (group->rank == 0) return gc_store_set(group->store, key, value, strlen(value));
    void *theirs;
    size_t size;
    gc_status status = gc_store_get(group->store, key, &theirs, &size);
    if (status != GC_OK) return status;
    if (strcmp(theirs, value) != 0) {
        gc_set_error(GC_ERR_FORMAT, "rank %d has %s %s but rank 0 has %s", group->rank, meaning, value,
                     (char *)theirs);
        status = GC_ERR_FORMAT;
    }
    free(theirs);
    return status;
}

/* Every rank waits here until all have arrived (through the store: the backend may not be
 * usable yet). */
static gc_status store_barrier(gc_process_group *group, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "gc/barrier/%s", name);
    int64_t arrived;
    gc_status status = gc_store_add(group->store, key, 1, &arrived);
    snprintf(key, sizeof key, "gc/barrier/%s/all", name);
    if (status == GC_OK && arrived == group->world) status = gc_store_set(group->store, key, "1", 1);
    void *value = NULL;
    size_t size;
    if (status == GC_OK) status = gc_store_get(group->store, key, &value, &size);
    free(value);
    return status;
}

gc_process_group *gc_process_group_new(const gc_dist_env *env, const gc_dist_options *options) {
    if (env->world_size < 1 || env->rank < 0 || env->rank >= env->world_size)
        gc_fatal("process_group: rank %d of a world of %d", env->rank, env->world_size);
    double timeout = options->timeout_seconds > 0 ? options->timeout_seconds : gc_dist_default_timeout();
    if (timeout < 0) return NULL;
    gc_process_group *group = calloc(1, sizeof *group);
    if (!group) gc_fatal("process_group: out of host memory");
    *group = (gc_process_group){.rank = env->rank, .world = env->world_size, .timeout = timeout, .secret = env->secret};
    gc_status status = GC_OK;
    if (group->world > 1 && env->secret.size < GC_DIST_SECRET_MIN) {
        gc_set_error(GC_ERR_FORMAT, "a group of %d processes needs the run's secret (%zu bytes given, at least %d: "
                     "GC_DIST_SECRET_FILE)", group->world, env->secret.size, GC_DIST_SECRET_MIN);
        status = GC_ERR_FORMAT;
    }
    if (status == GC_OK && group->world > 1) {
        gc_store_options store = {.host = env->master_addr, .port = env->master_port, .serve = group->rank == 0,
                                  .bind = env->bind_addr[0] ? env->bind_addr : NULL, .rank = group->rank,
                                  .world_size = group->world, .secret = &group->secret, .timeout_seconds = timeout};
        group->store = gc_store_new(&store);
        if (!group->store) status = gc_last_status();
        char text[32];
        snprintf(text, sizeof text, "%d", group->world);
        if (status == GC_OK) status = agree(group, "gc/world_size", text, "WORLD_SIZE");
        if (status == GC_OK) status = agree(group, "gc/backend", backend_name(options->backend), "backend");
    }
    if (status == GC_OK)
        status = options->backend == GC_DIST_NCCL ? gc_nccl_backend_init(group, options->device)
                                                   : gc_tcp_backend_init(group);
    if (status == GC_OK && group->world > 1) status = store_barrier(group, "ready");
    if (status != GC_OK) {
        char message[512];
        snprintf(message, sizeof message, "rank %d of %d, %s group: %s", env->rank, env->world_size,
                 backend_name(options->backend), gc_last_error());
        if (group->impl) group->impl->destroy(group);
        gc_store_free(group->store);
        free(group);
        gc_set_error(status, "%s", message);
        return NULL;
    }
    return group;
}

gc_process_group *gc_process_group_from_env(const gc_dist_options *options) {
    gc_dist_env env;
    if (gc_dist_env_read(&env) != GC_OK) return NULL;
    return gc_process_group_new(&env, options);
}

void gc_process_group_free(gc_process_group *group) {
    if (!group) return;
    group->impl->destroy(group);
    gc_store_free(group->store);
    free(group);
}

int gc_dist_rank(const gc_process_group *group) { return group->rank; }
int gc_dist_world_size(const gc_process_group *group) { return group->world; }
gc_store *gc_dist_store(gc_process_group *group) { return group->store; }
gc_dist_stats gc_dist_get_stats(const gc_process_group *group) { return group->stats; }
gc_dist_backend gc_dist_backend_of(const gc_process_group *group) {
    return group->native_device.type == GC_DEVICE_CUDA ? GC_DIST_NCCL : GC_DIST_TCP;
}

#if !GC_HAVE_NCCL
gc_status gc_nccl_backend_init(gc_process_group *group, gc_device device) {
    (void)group;
    (void)device;
    gc_set_error(GC_ERR_UNAVAILABLE, "this build has no NCCL backend (meson option nccl)");
    return GC_ERR_UNAVAILABLE;
}
#endif
