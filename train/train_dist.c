/* The trainer's data-parallel mode (see train_dist.h). */
#include "train_dist.h"

gc_status gc_train_dist_begin(gc_train_dist *dist, int64_t batch_size, gc_device *device) {
    *dist = (gc_train_dist){0};
    if (gc_dist_env_read(&dist->env) != GC_OK) {
        /* the launcher's settings, as the run's own are: the caller's to change */
        gc_set_error(GC_ERR_CONFIG, "%s", gc_last_error());
        return GC_ERR_CONFIG;
    }
    if (dist->env.world_size == 1) return GC_OK;
    if (batch_size < dist->env.world_size) {
        gc_set_error(GC_ERR_CONFIG, "--batch-size %lld: every one of the %d processes needs at least one example",
                     (long long)batch_size, dist->env.world_size);
        return GC_ERR_CONFIG;
    }
    gc_dist_backend backend = GC_DIST_TCP;
    if (device->type == GC_DEVICE_CUDA) {
        backend = GC_DIST_NCCL;
        *device = gc_cuda(dist->env.local_rank % gc_cuda_device_count());
    }
    dist->group = gc_process_group_new(&dist->env, &(gc_dist_options){backend, 0, *device});
    return dist->group ? GC_OK : gc_last_status();
}

gc_status gc_train_dist_attach(gc_train_dist *dist, const gc_param_list *params, bool reduce_in_f32, gc_zero zero) {
    if (!dist->group) return GC_OK;
    dist->ddp = gc_ddp_new(dist->group, params, &(gc_ddp_options){.reduce_in_f32 = reduce_in_f32, .zero = zero});
    return dist->ddp ? GC_OK : gc_last_status();
}

void gc_train_dist_end(gc_train_dist *dist) {
    gc_ddp_free(dist->ddp);
    gc_process_group_free(dist->group);
    *dist = (gc_train_dist){0};
}

int gc_train_dist_rank(const gc_train_dist *dist) { return dist->env.rank; }
int gc_train_dist_world(const gc_train_dist *dist) { return dist->env.world_size; }

void gc_train_dist_share(const gc_train_dist *dist, int64_t batch, int64_t *start, int64_t *count) {
    int64_t world = dist->env.world_size, rank = dist->env.rank;
    *count = batch / world + (rank < batch % world ? 1 : 0);
    *start = rank * (batch / world) + (rank < batch % world ? rank : batch % world);
}

uint64_t gc_train_dist_dropout_seed(const gc_train_dist *dist, uint64_t run_seed) {
    return dist->env.rank == 0 ? run_seed : gc_derive_seed(run_seed, (uint64_t)dist->env.rank);
}

gc_status gc_train_dist_gather_rng(gc_train_dist *dist, const gc_rng_context *mine, gc_rng_context *all) {
    if (!dist->group) {
        all[0] = *mine;
        return GC_OK;
    }
    return gc_dist_all_gather_host(dist->group, mine, sizeof *mine, all);
}

void gc_train_dist_zero_grad(gc_train_dist *dist, const gc_param_list *params) {
    if (dist->ddp) gc_ddp_zero_grad(dist->ddp);
    else gc_param_list_zero_grad(params);
}
