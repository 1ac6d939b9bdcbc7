/* The training checkpoint (see train_state.h). */
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model_file.h"
#include "numbers.h"
#include "train_state.h"

#define OPTIMIZER_PREFIX GC_TRAIN_OPTIMIZER_PREFIX

static const char *const CHUNK_SIZE_KEYS[2] = {"train.query_chunk_size", "train.passage_chunk_size"};

/* "cpu" for slot 0 of a gc_rng_context, "cuda:N" for slot 1 + N. */
static const char *slot_name(int slot, char *buf, int size) {
    return gc_device_str(slot == 0 ? gc_cpu() : gc_cuda(slot - 1), buf, size);
}

/* The metadata key of `field` ("seed" or "offset") of rank `rank`'s generator of slot `slot`:
 * "rng.<device>.<field>" for rank 0 (as in a world of one), "rng.rank<R>.<device>.<field>"
 * for the others. */
static void rng_key(int rank, int slot, const char *field, char *key, int size) {
    char device[16];
    slot_name(slot, device, sizeof device);
    if (rank == 0) snprintf(key, (size_t)size, "rng.%s.%s", device, field);
    else snprintf(key, (size_t)size, "rng.rank%d.%s.%s", rank, device, field);
}

/* The metadata of a checkpoint (ranks[plan->world] the generators of every rank; NULL: those
 * of progress->rng for each, when only the keys matter). */
static void describe(gc_metadata *metadata, const gc_dual_encoder *model, int64_t optimizer_step,
                     const gc_train_progress *progress, const gc_metadata *settings, const gc_train_plan *plan,
                     const gc_rng_context *ranks) {
    for (int i = 0; i < settings->count; i += 2)
        gc_metadata_set(metadata, settings->entries[i], "%s", settings->entries[i + 1]);
    gc_model_describe(model, metadata);
    gc_metadata_set(metadata, "train.step", "%lld", (long long)progress->step);
    gc_metadata_set(metadata, "train.epoch", "%lld", (long long)progress->epoch);
    gc_metadata_set(metadata, "train.position", "%lld", (long long)progress->position);
    if (plan->gc) {
        gc_metadata_set(metadata, CHUNK_SIZE_KEYS[0], "%lld", (long long)progress->chunk_sizes[0]);
        gc_metadata_set(metadata, CHUNK_SIZE_KEYS[1], "%lld", (long long)progress->chunk_sizes[1]);
    }
    gc_metadata_set(metadata, "optimizer.step", "%lld", (long long)optimizer_step);
    const gc_dataset_losses *losses = &progress->dataset_losses;
    for (int d = 0; d < losses->count && losses->count > 1; d++) {
        char key[64], sum[32];
        snprintf(key, sizeof key, "train.dataset%d.loss_sum", d);
        gc_metadata_set(metadata, key, "%s", gc_format_exact(losses->sums[d], sum, sizeof sum));
        snprintf(key, sizeof key, "train.dataset%d.loss_steps", d);
        gc_metadata_set(metadata, key, "%lld", (long long)losses->steps[d]);
    }
    if (progress->scaled) {
        char scale[32];
        gc_metadata_set(metadata, "scaler.scale", "%s", gc_format_exact(progress->scaler.scale, scale, sizeof scale));
        gc_metadata_set(metadata, "scaler.growth_tracker", "%lld", (long long)progress->scaler.growth_tracker);
        gc_metadata_set(metadata, "scaler.skipped_steps", "%lld", (long long)progress->scaler.skipped_steps);
    }
    if (progress->eval.on) gc_train_eval_describe(&progress->eval, metadata);
    if (plan->world > 1) gc_metadata_set(metadata, "dist.world_size", "%d", plan->world);
    for (int rank = 0; rank < plan->world; rank++) {
        const gc_rng_context *rng = ranks ? &ranks[rank] : &progress->rng;
        for (int slot = 0; slot < 1 + GC_MAX_CUDA_DEVICES; slot++) {
            char key[64];
            rng_key(rank, slot, "seed", key, sizeof key);
            gc_metadata_set(metadata, key, "%llu", (unsigned long long)rng->devices[slot].seed);
            rng_key(rank, slot, "offset", key, sizeof key);
            gc_metadata_set(metadata, key, "%llu", (unsigned long long)rng->devices[slot].offset);
        }
    }
}

gc_status gc_train_state_save(const char *path, const gc_dual_encoder *model, const gc_param_list *optimizer_state,
                              int64_t optimizer_step, const gc_train_progress *progress, const gc_metadata *settings,
                              const gc_train_plan *plan, const gc_rng_context *ranks) {
    gc_metadata metadata = {0};
    describe(&metadata, model, optimizer_step, progress, settings, plan, ranks);
    gc_param_list tensors = {0};
    for (int i = 0; i < model->params.count; i++)
        gc_param_list_add(&tensors, "", model->params.items[i].name, model->params.items[i].tensor, false);
    for (int i = 0; i < optimizer_state->count; i++)
        gc_param_list_add(&tensors, "", optimizer_state->items[i].name, optimizer_state->items[i].tensor, false);
    gc_status status = gc_safetensors_save(path, &tensors, gc_metadata_entries(&metadata));
    gc_param_list_free(&tensors);
    gc_metadata_free(&metadata);
    return status;
}

/* GC_ERR_FORMAT naming the first entry of `expected` whose value in the file is not the
 * run's: a setting ("flag.<name>": resume with the flags of the run that wrote it), or an
 * entry of the model's description ("format", "model.*"), compared with the model this run
 * built from those flags. With the flags the same, a description that differs is an edited
 * file, which loading the parameters into this run's model would otherwise ignore. */
static gc_status check_values(const gc_safetensors *file, const char *path, const gc_metadata *expected) {
    for (int i = 0; i < expected->count; i += 2) {
        const char *key = expected->entries[i], *wanted = expected->entries[i + 1];
        const char *found = gc_safetensors_metadata(file, key);
        bool setting = strncmp(key, "flag.", 5) == 0;
        if (!found && setting) {
            gc_set_error(GC_ERR_FORMAT, "%s has no setting for --%s (not a checkpoint of gradcache train)", path,
                         key + 5);
            return GC_ERR_FORMAT;
        }
        if (!found) {
            gc_set_error(GC_ERR_FORMAT, "%s has no metadata '%s' (not a checkpoint of gradcache train)", path, key);
            return GC_ERR_FORMAT;
        }
        if (strcmp(found, wanted) == 0) continue;
        if (setting)
            gc_set_error(GC_ERR_FORMAT, "%s was written with --%s %s, this run has --%s %s (resume with the flags of"
                         " the run that wrote it)", path, key + 5, found, key + 5, wanted);
        else
            gc_set_error(GC_ERR_FORMAT, "%s: metadata '%s' is '%.80s', but the model these flags build has '%s'", path,
                         key, found, wanted);
        return GC_ERR_FORMAT;
    }
    return GC_OK;
}

/* check_values for the description of `model`. */
static gc_status check_description(const gc_safetensors *file, const char *path, const gc_dual_encoder *model) {
    gc_metadata description = {0};
    gc_model_describe(model, &description);
    gc_status status = check_values(file, path, &description);
    gc_metadata_free(&description);
    return status;
}

/* How many processes wrote the checkpoint (absent: 1). Any number resumes: see
 * read_generators for the dropout masks. */
static gc_status read_world(const gc_safetensors *file, const char *path, int *world) {
    int64_t written = 1;
    if (gc_safetensors_metadata(file, "dist.world_size") &&
        gc_metadata_read_int(file, path, "dist.world_size", 2, 1 << 20, &written) != GC_OK)
        return GC_ERR_FORMAT;
    *world = (int)written;
    return GC_OK;
}

static gc_status refuse(const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* GC_ERR_FORMAT "<path>: <problem>" (one line). */
static gc_status refuse(const char *path, const char *fmt, ...) {
    char problem[400];
    va_list args;
    va_start(args, fmt);
    vsnprintf(problem, sizeof problem, fmt, args);
    va_end(args);
    gc_set_error(GC_ERR_FORMAT, "%s: %s", path, problem);
    return GC_ERR_FORMAT;
}

/* Where the run is: the step within the plan, the epoch and position where it falls, and
 * the optimizer's count of steps (checked by check_optimizer_step). */
static gc_status read_counters(const gc_safetensors *file, const char *path, const gc_train_plan *plan,
                               gc_train_progress *progress, int64_t *optimizer_step) {
    gc_status status = gc_metadata_read_int(file, path, "train.step", 0, plan->total_steps, &progress->step);
    if (status == GC_OK) status = gc_metadata_read_int(file, path, "train.epoch", 0, INT64_MAX, &progress->epoch);
    if (status == GC_OK) status = gc_metadata_read_int(file, path, "train.position", 0, INT64_MAX, &progress->position);
    if (status == GC_OK) status = gc_metadata_read_int(file, path, "optimizer.step", 0, INT64_MAX, optimizer_step);
    if (status != GC_OK) return status;
    int64_t epoch, position;
    gc_multi_sampler_locate(plan->batches, progress->step, &epoch, &position);
    if (progress->epoch != epoch || progress->position != position)
        return refuse(path, "train.epoch %lld and train.position %lld are not where train.step %lld falls (epoch %lld, "
                      "position %lld with %lld steps of %lld per epoch)", (long long)progress->epoch,
                      (long long)progress->position, (long long)progress->step, (long long)epoch, (long long)position,
                      (long long)plan->batches->steps_per_epoch, (long long)plan->batches->batch_size);
    return GC_OK;
}

/* Several datasets: each one's losses since the last logging point, at most as many as the
 * steps so far, and a sum of none 0. */
static gc_status read_dataset_losses(const gc_safetensors *file, const char *path, gc_train_progress *progress) {
    gc_dataset_losses *losses = &progress->dataset_losses;
    gc_status status = GC_OK;
    for (int d = 0; d < losses->count && losses->count > 1 && status == GC_OK; d++) {
        char key[64];
        snprintf(key, sizeof key, "train.dataset%d.loss_steps", d);
        status = gc_metadata_read_int(file, path, key, 0, progress->step, &losses->steps[d]);
        snprintf(key, sizeof key, "train.dataset%d.loss_sum", d);
        if (status == GC_OK) status = gc_metadata_read_double(file, path, key, &losses->sums[d]);
        if (status == GC_OK && losses->steps[d] == 0 && losses->sums[d] != 0)
            return refuse(path, "metadata '%s' is %g, with no step counted", key, losses->sums[d]);
    }
    return status;
}

/* The optimizer's count of steps: one AdamW step per step, except the steps the loss scaler
 * skipped (f16: an overflow leaves the optimizer untouched). */
static gc_status check_optimizer_step(const char *path, const gc_train_progress *progress, int64_t optimizer_step) {
    int64_t skipped = progress->scaled ? progress->scaler.skipped_steps : 0;
    if (optimizer_step == progress->step - skipped) return GC_OK;
    if (!progress->scaled)
        return refuse(path, "optimizer.step %lld differs from train.step %lld (each step is one AdamW step)",
                      (long long)optimizer_step, (long long)progress->step);
    return refuse(path, "optimizer.step %lld differs from train.step %lld less the %lld steps the loss scaler skipped",
                  (long long)optimizer_step, (long long)progress->step, (long long)skipped);
}

/* The chunk sizes in effect: stored by GradCache runs only, each at least 1 and at most the
 * fresh run's (automatic sizing only ever lowers them). */
static gc_status read_chunk_sizes(const gc_safetensors *file, const char *path, const gc_train_plan *plan,
                                  gc_train_progress *progress) {
    gc_status status = GC_OK;
    for (int side = 0; side < 2 && status == GC_OK; side++) {
        const char *key = CHUNK_SIZE_KEYS[side];
        if (!plan->gc) {
            if (gc_safetensors_metadata(file, key))
                return refuse(path, "metadata '%s' is stored, but chunk sizes belong to --gc runs and this one has no"
                              " --gc", key);
            continue;
        }
        status = gc_metadata_read_int(file, path, key, 1, progress->chunk_sizes[side], &progress->chunk_sizes[side]);
    }
    return status;
}

/* The loss scaler's state (f16 runs), into progress->scaler (its constants already set). */
static gc_status read_scaler(const gc_safetensors *file, const char *path, gc_train_progress *progress) {
    gc_loss_scaler *scaler = &progress->scaler;
    gc_status status = gc_metadata_read_double(file, path, "scaler.scale", &scaler->scale);
    if (status == GC_OK)
        status = gc_metadata_read_int(file, path, "scaler.growth_tracker", 0, scaler->growth_interval - 1,
                                      &scaler->growth_tracker);
    if (status == GC_OK)
        status = gc_metadata_read_int(file, path, "scaler.skipped_steps", 0, progress->step, &scaler->skipped_steps);
    if (status == GC_OK && !(scaler->scale > 0 && scaler->scale <= FLT_MAX))
        return refuse(path, "scaler.scale is %g (a loss scale is in (0, %g])", scaler->scale, (double)FLT_MAX);
    return status;
}

/* The generators of the `written` ranks that wrote the checkpoint: every offset at most
 * GC_TRAIN_MAX_RNG_OFFSET along (room for the rest of the run), and this rank's of the fresh
 * run's seed (the dropout stream --seed and the rank name), loaded into progress->rng. A rank
 * the checkpoint has no state of (a run resumed with more processes) starts its own stream
 * at the largest offset any rank reached: past what earlier ranks of its name drew when they
 * kept pace with the others, so its masks are not drawn again. */
static gc_status read_generators(const gc_safetensors *file, const char *path, const gc_train_plan *plan, int written,
                                 gc_train_progress *progress) {
    gc_status status = GC_OK;
    uint64_t furthest[1 + GC_MAX_CUDA_DEVICES] = {0};
    for (int rank = 0; rank < written && status == GC_OK; rank++) {
        for (int slot = 0; slot < 1 + GC_MAX_CUDA_DEVICES && status == GC_OK; slot++) {
            char key[64];
            uint64_t seed, offset;
            rng_key(rank, slot, "seed", key, sizeof key);
            status = gc_metadata_read_u64(file, path, key, &seed);
            if (status == GC_OK && rank == plan->rank && seed != progress->rng.devices[slot].seed)
                return refuse(path, "metadata '%s' is %llu, but this run's --seed gives %llu", key,
                              (unsigned long long)seed, (unsigned long long)progress->rng.devices[slot].seed);
            rng_key(rank, slot, "offset", key, sizeof key);
            if (status == GC_OK) status = gc_metadata_read_u64(file, path, key, &offset);
            if (status == GC_OK && offset > GC_TRAIN_MAX_RNG_OFFSET)
                return refuse(path, "metadata '%s' is %llu, past the largest offset a run reaches, 2^62", key,
                              (unsigned long long)offset);
            if (status == GC_OK && rank == plan->rank) progress->rng.devices[slot].offset = offset;
            if (status == GC_OK && offset > furthest[slot]) furthest[slot] = offset;
        }
    }
    for (int slot = 0; slot < 1 + GC_MAX_CUDA_DEVICES && plan->rank >= written; slot++)
        progress->rng.devices[slot].offset = furthest[slot];
    return status;
}

/* GC_ERR_FORMAT naming the first metadata key of the file that a checkpoint of this run
 * would not hold (`expected`: the metadata such a checkpoint has). */
static gc_status check_keys(const gc_safetensors *file, const char *path, const gc_metadata *expected) {
    for (int i = 0; i < gc_safetensors_metadata_count(file); i++) {
        const char *key = gc_safetensors_metadata_key(file, i);
        if (!gc_metadata_get(expected, key))
            return refuse(path, "unexpected metadata '%.80s' (not an entry a checkpoint of this run holds)", key);
    }
    return GC_OK;
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

/* After the state was loaded (whose checks pair the moments and the masters): the file's
 * optimizer entries were exactly AdamW's state of the model's parameters, the moments of
 * every one after step 0 and none at step 0. Anything else would continue to another model
 * than the one the run would have trained. */
static gc_status check_optimizer_entries(const char *path, const gc_param_list *params, const gc_param_list *entries,
                                         int64_t step) {
    char names[GC_ADAMW_STATE_KINDS][GC_PARAM_NAME_MAX];
    int known = 0;
    for (int i = 0; i < params->count; i++) {
        gc_adamw_state_names(OPTIMIZER_PREFIX, params->items[i].name, names);
        bool has = gc_param_list_find(entries, names[0]) != NULL;
        if (has != (step > 0))
            return refuse(path, "%s AdamW moments for '%s' (%s) at step %lld", has ? "holds" : "has no",
                          params->items[i].name, names[0], (long long)step);
        for (int k = 0; k < GC_ADAMW_STATE_KINDS; k++) known += gc_param_list_find(entries, names[k]) != NULL;
    }
    for (int i = 0; i < entries->count && known < entries->count; i++) {
        const char *name = entries->items[i].name;
        bool expected = false;
        for (int p = 0; p < params->count && !expected; p++) {
            gc_adamw_state_names(OPTIMIZER_PREFIX, params->items[p].name, names);
            for (int k = 0; k < GC_ADAMW_STATE_KINDS; k++) expected |= strcmp(name, names[k]) == 0;
        }
        if (!expected)
            return refuse(path, "unexpected tensor '%s' (AdamW keeps exp_avg, exp_avg_sq and, for a 16-bit parameter, "
                          "master)", name);
    }
    return GC_OK;
}

gc_status gc_train_state_load_from(const gc_safetensors *file, const char *path, gc_dual_encoder *model,
                                   gc_train_optim *optimizer, gc_train_progress *progress, const gc_metadata *settings,
                                   const gc_train_plan *plan) {
    gc_status status;
    int64_t optimizer_step = 0;
    int written = 1;
    gc_param_list state = {0};
    static const char *const optimizer_entries[] = {OPTIMIZER_PREFIX ".", NULL};
    status = check_values(file, path, settings);
    if (status == GC_OK) status = check_description(file, path, model);
    if (status == GC_OK) status = read_world(file, path, &written);
    if (status == GC_OK) status = read_counters(file, path, plan, progress, &optimizer_step);
    if (status == GC_OK && progress->scaled) status = read_scaler(file, path, progress);
    if (status == GC_OK) status = read_dataset_losses(file, path, progress);
    if (status == GC_OK) status = check_optimizer_step(path, progress, optimizer_step);
    if (status == GC_OK && progress->eval.on) status = gc_train_eval_read(file, path, progress->step, &progress->eval);
    if (status == GC_OK) status = read_chunk_sizes(file, path, plan, progress);
    if (status == GC_OK) status = read_generators(file, path, plan, written, progress);
    if (status == GC_OK) {
        gc_metadata expected = {0};
        gc_train_plan writer = *plan; /* whose generators the file holds */
        writer.world = written;
        describe(&expected, model, 0, progress, settings, &writer, NULL);
        status = check_keys(file, path, &expected);
        gc_metadata_free(&expected);
    }
    if (status == GC_OK) status = gc_safetensors_load_exact(file, &model->params, optimizer_entries);
    if (status == GC_OK) status = read_optimizer_state(file, &state);
    if (status == GC_OK) {
        status = gc_train_optim_load_state(optimizer, OPTIMIZER_PREFIX, &state, optimizer_step);
        if (status == GC_ERR_FORMAT) status = refuse(path, "%s", gc_last_error()); /* the file's name first */
    }
    if (status == GC_OK) status = check_optimizer_entries(path, &model->params, &state, optimizer_step);
    gc_param_list_free(&state);
    return status;
}

gc_status gc_train_state_load(const char *path, gc_dual_encoder *model, gc_train_optim *optimizer,
                              gc_train_progress *progress, const gc_metadata *settings, const gc_train_plan *plan) {
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(path, &file);
    if (status != GC_OK) return status;
    status = gc_train_state_load_from(file, path, model, optimizer, progress, settings, plan);
    gc_safetensors_close(file);
    return status;
}
