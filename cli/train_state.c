/* The training checkpoint (see train_state.h). */
#include <stdio.h>
#include <string.h>

#include "model_file.h"
#include "train_state.h"

#define OPTIMIZER_PREFIX "optimizer"

/* "cpu" for slot 0 of a gc_rng_context, "cuda:N" for slot 1 + N. */
static const char *slot_name(int slot, char *buf, int size) {
    return gc_device_str(slot == 0 ? gc_cpu() : gc_cuda(slot - 1), buf, size);
}

/* The metadata prefix of rank `rank`'s random-number state: "rng." for rank 0 (as in a
 * world of one), "rng.rank<R>." for the others. */
static const char *rng_prefix(int rank, char *buf, int size) {
    if (rank == 0) snprintf(buf, (size_t)size, "rng.");
    else snprintf(buf, (size_t)size, "rng.rank%d.", rank);
    return buf;
}

gc_status gc_train_state_save(const char *path, const gc_dual_encoder *model, const gc_adamw *optimizer,
                              const gc_train_progress *progress, const gc_metadata *settings,
                              const gc_rng_context *ranks, int world) {
    gc_metadata metadata = {0};
    for (int i = 0; i < settings->count; i += 2)
        gc_metadata_set(&metadata, settings->entries[i], "%s", settings->entries[i + 1]);
    gc_model_describe(model, &metadata);
    gc_metadata_set(&metadata, "train.step", "%lld", (long long)progress->step);
    gc_metadata_set(&metadata, "train.epoch", "%lld", (long long)progress->epoch);
    gc_metadata_set(&metadata, "train.position", "%lld", (long long)progress->position);
    gc_metadata_set(&metadata, "train.query_chunk_size", "%lld", (long long)progress->chunk_sizes[0]);
    gc_metadata_set(&metadata, "train.passage_chunk_size", "%lld", (long long)progress->chunk_sizes[1]);
    gc_metadata_set(&metadata, "optimizer.step", "%lld", (long long)optimizer->step);
    if (world > 1) gc_metadata_set(&metadata, "dist.world_size", "%d", world);
    for (int rank = 0; rank < world; rank++) {
        const gc_rng_context *rng = world > 1 ? &ranks[rank] : &progress->rng;
        for (int slot = 0; slot < 1 + GC_MAX_CUDA_DEVICES; slot++) {
            char prefix[32], device[16], key[64];
            rng_prefix(rank, prefix, sizeof prefix);
            slot_name(slot, device, sizeof device);
            snprintf(key, sizeof key, "%s%s.seed", prefix, device);
            gc_metadata_set(&metadata, key, "%llu", (unsigned long long)rng->devices[slot].seed);
            snprintf(key, sizeof key, "%s%s.offset", prefix, device);
            gc_metadata_set(&metadata, key, "%llu", (unsigned long long)rng->devices[slot].offset);
        }
    }
    gc_param_list tensors = {0};
    for (int i = 0; i < model->params.count; i++)
        gc_param_list_add(&tensors, "", model->params.items[i].name, model->params.items[i].tensor, false);
    gc_adamw_state(optimizer, OPTIMIZER_PREFIX, &tensors);
    gc_status status = gc_safetensors_save(path, &tensors, gc_metadata_entries(&metadata));
    gc_param_list_free(&tensors);
    gc_metadata_free(&metadata);
    return status;
}

/* GC_ERR_FORMAT naming the first setting whose value in the file is not the run's. */
static gc_status check_settings(const gc_safetensors *file, const char *path, const gc_metadata *settings) {
    for (int i = 0; i < settings->count; i += 2) {
        const char *key = settings->entries[i], *wanted = settings->entries[i + 1];
        const char *found = gc_safetensors_metadata(file, key);
        const char *flag = strncmp(key, "flag.", 5) == 0 ? key + 5 : key;
        if (!found) {
            gc_set_error(GC_ERR_FORMAT, "%s has no setting for --%s (not a checkpoint of gradcache train)", path, flag);
            return GC_ERR_FORMAT;
        }
        if (strcmp(found, wanted) != 0) {
            gc_set_error(GC_ERR_FORMAT, "%s was written with --%s %s, this run has --%s %s (resume with the flags of"
                         " the run that wrote it)", path, flag, found, flag, wanted);
            return GC_ERR_FORMAT;
        }
    }
    return GC_OK;
}

/* GC_ERR_FORMAT unless the checkpoint was written by a run of `world` processes. */
static gc_status check_world(const gc_safetensors *file, const char *path, int world) {
    int64_t written = 1;
    if (gc_safetensors_metadata(file, "dist.world_size") &&
        gc_metadata_read_int(file, path, "dist.world_size", 2, 1 << 20, &written) != GC_OK)
        return GC_ERR_FORMAT;
    if (written == world) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "%s was written by a run of %lld process%s, this run has %d (each process draws its "
                 "own dropout masks: resume with as many)", path, (long long)written, written == 1 ? "" : "es", world);
    return GC_ERR_FORMAT;
}

static gc_status read_progress(const gc_safetensors *file, const char *path, gc_train_progress *progress,
                               int64_t *optimizer_step, int rank) {
    struct {
        const char *key;
        int64_t min, *value;
    } counters[] = {
        {"train.step", 0, &progress->step},
        {"train.epoch", 0, &progress->epoch},
        {"train.position", 0, &progress->position},
        {"train.query_chunk_size", 1, &progress->chunk_sizes[0]},
        {"train.passage_chunk_size", 1, &progress->chunk_sizes[1]},
        {"optimizer.step", 0, optimizer_step},
    };
    gc_status status = GC_OK;
    for (size_t i = 0; i < sizeof counters / sizeof *counters && status == GC_OK; i++)
        status = gc_metadata_read_int(file, path, counters[i].key, counters[i].min, INT64_MAX, counters[i].value);
    for (int slot = 0; slot < 1 + GC_MAX_CUDA_DEVICES && status == GC_OK; slot++) {
        char prefix[32], device[16], key[64];
        rng_prefix(rank, prefix, sizeof prefix);
        slot_name(slot, device, sizeof device);
        snprintf(key, sizeof key, "%s%s.seed", prefix, device);
        status = gc_metadata_read_u64(file, path, key, &progress->rng.devices[slot].seed);
        snprintf(key, sizeof key, "%s%s.offset", prefix, device);
        if (status == GC_OK) status = gc_metadata_read_u64(file, path, key, &progress->rng.devices[slot].offset);
    }
    return status;
}

/* The optimizer's entries of `file`, as CPU tensors (gc_adamw_load_state copies them). */
static gc_status read_optimizer_state(const gc_safetensors *file, gc_param_list *state) {
    for (int i = 0; i < gc_safetensors_count(file); i++) {
        const char *name = gc_safetensors_name(file, i);
        if (strncmp(name, OPTIMIZER_PREFIX ".", strlen(OPTIMIZER_PREFIX ".")) != 0) continue;
        gc_tensor *tensor = gc_safetensors_get(file, name, gc_cpu());
        if (!tensor) return gc_last_status();
        gc_param_list_add(state, "", name, tensor, false);
        gc_tensor_release(tensor);
    }
    return GC_OK;
}

gc_status gc_train_state_load(const char *path, gc_dual_encoder *model, gc_adamw *optimizer,
                              gc_train_progress *progress, const gc_metadata *settings, int rank, int world) {
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(path, &file);
    if (status != GC_OK) return status;
    int64_t optimizer_step = 0;
    gc_param_list state = {0};
    status = check_settings(file, path, settings);
    if (status == GC_OK) status = check_world(file, path, world);
    if (status == GC_OK) status = read_progress(file, path, progress, &optimizer_step, rank);
    if (status == GC_OK) status = read_optimizer_state(file, &state);
    gc_safetensors_close(file);
    if (status == GC_OK) status = gc_safetensors_load_into(path, &model->params);
    if (status == GC_OK) status = gc_adamw_load_state(optimizer, OPTIMIZER_PREFIX, &state, optimizer_step);
    gc_param_list_free(&state);
    return status;
}
