/* gradcache train: a dual (or tied) text encoder trained on query/positive pairs with the
 * in-batch contrastive loss (cosine InfoNCE), each step either a Gradient Cache step (--gc)
 * or a plain full-batch step, then gradient clipping and AdamW.
 *
 * Everything that decides what a step computes is a function of --seed and the step count:
 * the initial weights, the dropout masks and the data order come from three Philox streams
 * named by --seed, the data order of an epoch from (seed, epoch) alone. So a checkpoint
 * (train_state.h) holding the parameters, AdamW's state, the step count and the generators'
 * positions is all --resume needs to continue bitwise as if the run had never stopped.
 *
 * --precision f16 / bf16: the model's parameters and activations in 16 bits, AdamW keeping
 * f32 master weights (in the checkpoint too). With f16 a dynamic loss scaler (PyTorch's
 * defaults) scales the loss once per step; a step with an inf or nan gradient on any rank is
 * skipped everywhere (no update, the scale halved) and logged as such. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "gradcache/train.h"
#include "commands.h"
#include "device_flag.h"
#include "errors.h"
#include "train/metadata.h"
#include "train/model_file.h"
#include "precision.h"
#include "progress.h"
#include "run_log.h"
#include "train_flags.h"
#include "train_dist.h"
#include "train_state.h"

/* Gradient clipping and AdamW's constants: those of BERT-style fine-tuning. */
#define MAX_GRAD_NORM 1.0
#define WEIGHT_DECAY 0.01

/* Everything a run holds. */
typedef struct trainer {
    gc_train_flags flags;
    gc_device device;
    gc_mem_limit limit;     /* on the device: --mem-limit, GC_MEM_LIMIT's or the default */
    gc_train_dist dist;     /* data-parallel: this rank's part of a launched run */
    char *data_path, *checkpoint_path, *model_path;
    gc_pairs pairs;
    gc_train_plan plan;     /* the steps, the epochs, the batch: what a checkpoint must fit */
    int64_t stop_step;      /* the last step this run takes: plan.total_steps, or --stop-after */
    uint64_t data_seed;
    int64_t *order;         /* [pairs.count]: the data order of epoch order_epoch */
    int64_t order_epoch;
    gc_dual_encoder model;
    gc_adamw optimizer;
    bool optimizer_ready;
    gc_lr_schedule schedule;
    gc_contrastive_options loss_options; /* the loss keeps a pointer to it */
    gc_cache *cache;
    gc_metadata settings;   /* the flags a resumed run must share (train_state.h) */
    gc_train_progress progress;
    gc_run_log log;
    gc_progress bar;
} trainer;

/* One line "gradcache train: ..." on stderr; returns exit_status. */
#define fail(...) gc_cli_fail("train", __VA_ARGS__)

/* The run's three uses of randomness draw from independent Philox streams, all named by
 * --seed (gc_derive_seed), so nearby seeds give unrelated stream names. */
typedef enum random_stream { STREAM_INIT = 1, STREAM_DROPOUT, STREAM_DATA } random_stream;

static uint64_t stream_seed(uint64_t seed, random_stream stream) { return gc_derive_seed(seed, (uint64_t)stream); }

/* The device, the data and the sizes the flags imply; 0 or the exit status. */
static int load_data(trainer *t) {
    const gc_train_flags *f = &t->flags;
    int status = gc_device_from_flag("train", f->device, &t->device);
    if (!status) status = gc_train_dist_begin(&t->dist, f->batch_size, &t->device);
    if (!status) status = gc_precision_check_device("train", f->precision, t->device);
    if (status) return status;
    t->limit = gc_mem_limit_apply(t->device, f->mem_limit, t->dist.env.local_world_size);
    t->data_path = gc_data_path(f->data, "train");
    if (gc_pairs_read(t->data_path, &t->pairs) != GC_OK) return fail(1, "--data: %s", gc_last_error());
    if (f->hard_negatives > t->pairs.negatives)
        return fail(2, "--hard-negatives %lld: %s has %d negative column%s", (long long)f->hard_negatives,
                    t->data_path, t->pairs.negatives, t->pairs.negatives == 1 ? "" : "s");
    if (f->batch_size > t->pairs.count)
        return fail(2, "--batch-size %lld: %s has only %lld examples", (long long)f->batch_size, t->data_path,
                    (long long)t->pairs.count);
    gc_train_plan *plan = &t->plan;
    plan->steps_per_epoch = t->pairs.count / f->batch_size;
    plan->total_steps = f->steps ? f->steps : (f->epochs ? f->epochs : 1) * plan->steps_per_epoch;
    plan->batch_size = f->batch_size;
    plan->gc = f->gc;
    plan->rank = gc_train_dist_rank(&t->dist);
    plan->world = gc_train_dist_world(&t->dist);
    t->stop_step = f->stop_after && f->stop_after < plan->total_steps ? f->stop_after : plan->total_steps;
    t->data_seed = stream_seed((uint64_t)f->seed, STREAM_DATA);
    t->order = malloc((size_t)t->pairs.count * sizeof *t->order);
    if (!t->order) gc_fatal("train: out of host memory for the data order");
    t->order_epoch = -1;
    return 0;
}

/* Data-parallel: the gradient bucketer, which also makes every rank start from rank 0's
 * parameters. */
static int attach_bucketer(trainer *t) {
    if (gc_train_dist_attach(&t->dist, &t->model.params, !t->flags.reduce_half) != GC_OK)
        return fail(1, "cannot set up data-parallel training: %s", gc_last_error());
    return 0;
}

/* The model, the optimizer and the state a fresh run starts from, or the checkpoint's. */
static int build_model(trainer *t) {
    const gc_train_flags *f = &t->flags;
    if (f->init) {
        if (gc_dual_encoder_from_folder(&t->model, f->init, f->max_length, gc_precision_dtype(f->precision),
                                        t->device) != GC_OK)
            return fail(1, "--init: %s", gc_last_error());
    } else {
        gc_text_encoder_config config = gc_model_preset(f->model_size, f->max_length);
        config.dtype = gc_precision_dtype(f->precision);
        char hint[sizeof t->limit.source + 16];
        if (gc_dual_encoder_init(&t->model, &config, f->tied, t->device,
                                 stream_seed((uint64_t)f->seed, STREAM_INIT)) != GC_OK)
            return fail(1, "cannot build the model: %s%s", gc_last_error(),
                        gc_mem_limit_hint(&t->limit, gc_last_status(), hint, sizeof hint));
    }
    if (gc_adamw_init(&t->optimizer, &t->model.params, f->lr, 0.9, 0.999, 1e-8, WEIGHT_DECAY) != GC_OK)
        return fail(1, "cannot build the optimizer: %s", gc_last_error());
    t->optimizer_ready = true;
    /* warm-up over the first 10% of the steps, then linear decay to 0 */
    t->schedule = (gc_lr_schedule){f->lr, 0, t->plan.total_steps / 10, t->plan.total_steps, GC_LR_LINEAR};
    gc_manual_seed(gc_train_dist_dropout_seed(&t->dist, stream_seed((uint64_t)f->seed, STREAM_DROPOUT)));
    int64_t passages = f->batch_size * (1 + f->hard_negatives);
    t->progress = (gc_train_progress){.chunk_sizes = {f->gc ? f->chunk_sizes[0] : f->batch_size,
                                                      f->gc ? f->chunk_sizes[1] : passages},
                                      .rng = gc_rng_capture(),
                                      .scaled = f->precision == GC_PRECISION_F16};
    gc_loss_scaler_init(&t->progress.scaler);
    if (!f->resume) return attach_bucketer(t);
    if (gc_train_state_load(t->checkpoint_path, &t->model, &t->optimizer, &t->progress, &t->settings, &t->plan) !=
        GC_OK)
        return fail(1, "--resume: %s", gc_last_error());
    gc_rng_restore(&t->progress.rng);
    return attach_bucketer(t);
}

/* Everything before the first step; 0 or the exit status. */
static int set_up(trainer *t) {
    int status = load_data(t);
    if (status) return status;
    gc_train_flags_settings(&t->flags, &t->pairs, &t->settings);
    t->checkpoint_path = gc_path_join(t->flags.out, "checkpoint.safetensors");
    t->model_path = gc_path_join(t->flags.out, "model.safetensors");
    status = build_model(t);
    if (status) return status;
    if (gc_train_dist_rank(&t->dist) == 0) { /* rank 0 alone writes */
        if (gc_make_directories(t->flags.out) != GC_OK) return fail(1, "--out: %s", gc_last_error());
        /* what a run killed while saving left behind (gc_safetensors_save's hidden temporaries) */
        if (gc_remove_stale_temporaries(t->checkpoint_path, NULL) != GC_OK ||
            gc_remove_stale_temporaries(t->model_path, NULL) != GC_OK)
            return fail(1, "--out: %s", gc_last_error());
        char *log_path = gc_path_join(t->flags.out, "log.jsonl");
        gc_status opened = gc_run_log_open(&t->log, log_path, t->progress.step);
        free(log_path);
        if (opened != GC_OK) return fail(1, "--out: %s", gc_last_error());
    }
    gc_text_encoder *towers[2] = {gc_dual_encoder_tower(&t->model, 0), gc_dual_encoder_tower(&t->model, 1)};
    t->loss_options = (gc_contrastive_options){.similarity = GC_SIMILARITY_COSINE,
                                               .temperature = t->flags.temperature,
                                               .method = (gc_contrastive_method)t->flags.loss};
    gc_cache_config config = {
        .n_models = 2,
        .models = {{towers[0], gc_dual_encoder_forward_train, t->progress.chunk_sizes[0], &t->model.params},
                   {towers[1], gc_dual_encoder_forward_train, t->progress.chunk_sizes[1], &t->model.params}},
        .loss = gc_contrastive_loss_fn(&t->loss_options),
        .keep_last_graph = true, /* one forward fewer per side; the same numbers */
        .auto_chunk = t->flags.gc && !t->dist.group, /* ranks could not agree on a retry */
        .group = t->dist.group,
        .ddp = t->dist.ddp,
        .scaler = t->progress.scaled ? &t->progress.scaler : NULL, /* read at each step */
    };
    t->cache = gc_cache_new(&config);
    return 0;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* With loss scaling: whether any gradient of any rank is inf or nan (one fused pass here,
 * then the verdict agreed over the ranks, so that every rank skips the same steps). */
static gc_status check_overflow(trainer *t, bool *skipped) {
    *skipped = false;
    if (!t->progress.scaled) return GC_OK;
    gc_status status = gc_loss_scaler_check_grads(&t->model.params, skipped);
    if (status == GC_OK && t->dist.group) status = gc_dist_any(t->dist.group, skipped);
    return status;
}

/* Unscales (1 / loss_scale) and clips inside AdamW's f32 update: the gradients, 16-bit ones
 * included, are never rewritten in place. */
static gc_status clip_and_update(trainer *t, double loss, double loss_scale, double *grad_norm) {
    double grad_scale = 1 / loss_scale;
    gc_clear_error(); /* a nan norm with an error recorded means clipping ran out of memory */
    *grad_norm = gc_clip_grad_scale(&t->model.params, MAX_GRAD_NORM, &grad_scale);
    if (isnan(*grad_norm) && gc_last_status() != GC_OK) return gc_last_status();
    if (!isfinite(loss) || isnan(*grad_norm)) {
        /* an update would spread the nan into every parameter: stop while the last
         * checkpoint is still sound (GC_ERR_FORMAT: the run, as given, cannot go on) */
        gc_set_error(GC_ERR_FORMAT, "the loss is %g and the gradient norm %g: the run diverged (lower --lr?)", loss,
                     *grad_norm);
        return GC_ERR_FORMAT;
    }
    return gc_adamw_step_scaled(&t->optimizer, grad_scale);
}

/* Step t->progress.step + 1: the batch, the gradients, clipping and the AdamW update. */
static gc_status run_step(trainer *t, gc_step_record *record) {
    const gc_train_flags *f = &t->flags;
    int64_t step = t->progress.step, epoch, position;
    gc_train_locate(&t->plan, step, &epoch, &position);
    if (epoch != t->order_epoch) {
        gc_epoch_order(t->data_seed, epoch, t->pairs.count, t->order);
        t->order_epoch = epoch;
    }
    double start = gc_seconds();
    int64_t share_start, share;
    gc_train_dist_share(&t->dist, f->batch_size, &share_start, &share); /* this rank's examples */
    gc_training_batch batch;
    gc_status status = gc_training_batch_make(&t->pairs, t->order + position + share_start, share,
                                              (int)f->hard_negatives, t->model.tokenizer, f->max_length,
                                              gc_precision_dtype(f->precision), t->device, &batch);
    if (status != GC_OK) return status;
    gc_memory_reset_peak(t->device);
    gc_cache_report report = {0};
    double loss = NAN;
    if (f->gc) status = gc_cache_step(t->cache, batch.inputs, &loss, &report);
    else status = gc_cache_full_batch_step(t->cache, batch.inputs, &loss);
    gc_training_batch_release(&batch);
    if (status != GC_OK) return status;
    loss += 0.0; /* -0 to +0: a batch of one has the loss -log 1, which would print as -0.0000 */
    double loss_scale = t->progress.scaled ? t->progress.scaler.scale : 1, grad_norm = NAN;
    bool skipped = false;
    status = check_overflow(t, &skipped);
    t->optimizer.lr = gc_lr_at(&t->schedule, step);
    if (status == GC_OK && !skipped) status = clip_and_update(t, loss, loss_scale, &grad_norm);
    if (status == GC_OK && t->progress.scaled) gc_loss_scaler_update(&t->progress.scaler, skipped);
    gc_train_dist_zero_grad(&t->dist, &t->model.params);
    if (status != GC_OK) return status;
    gc_device_synchronize(t->device);
    double seconds = gc_seconds() - start;
    if (f->gc) memcpy(t->progress.chunk_sizes, report.chunk_sizes, sizeof t->progress.chunk_sizes);
    /* a cached step measures its phases itself, resetting the peak at each: the step's peak
     * is the largest of theirs and of what followed the last reset */
    size_t peak = max_size(max_size(report.forward_peak_bytes, report.loss_peak_bytes),
                           gc_memory_get_stats(t->device).peak_bytes);
    *record = (gc_step_record){.step = step + 1,
                               .epoch = epoch,
                               .loss = loss,
                               .lr = t->optimizer.lr,
                               .grad_norm = grad_norm,
                               .examples_per_second = (double)f->batch_size / seconds,
                               .seconds = seconds,
                               .peak_bytes = peak,
                               .chunk_sizes = {t->progress.chunk_sizes[0], t->progress.chunk_sizes[1]},
                               .loss_scale = loss_scale,
                               .skipped = skipped};
    t->progress.step = step + 1;
    return GC_OK;
}

/* The checkpoint and the model file, both written atomically by rank 0, with every rank's
 * random-number state (every rank takes part). */
static gc_status save(trainer *t) {
    gc_train_locate(&t->plan, t->progress.step, &t->progress.epoch, &t->progress.position);
    t->progress.rng = gc_rng_capture();
    int world = t->plan.world;
    gc_rng_context *every_rank = malloc((size_t)world * sizeof *every_rank);
    if (!every_rank) gc_fatal("train: out of host memory for %d random-number states", world);
    gc_status status = gc_train_dist_gather_rng(&t->dist, &t->progress.rng, every_rank);
    if (status == GC_OK && gc_train_dist_rank(&t->dist) == 0)
        status = gc_train_state_save(t->checkpoint_path, &t->model, &t->optimizer, &t->progress, &t->settings, &t->plan,
                                     every_rank);
    if (status == GC_OK && gc_train_dist_rank(&t->dist) == 0)
        status = gc_dual_encoder_save(&t->model, t->flags.out);
    free(every_rank);
    return status;
}

/* Ends the progress line, then reports the failure of step `step`. */
static int step_failed(trainer *t, int64_t step, const char *doing) {
    gc_progress_end(&t->bar);
    gc_status status = gc_last_status();
    bool memory = status == GC_ERR_OUT_OF_MEMORY || status == GC_ERR_MEM_LIMIT;
    char hint[sizeof t->limit.source + 16];
    return fail(1, "step %lld: %s: %s%s%s", (long long)step, doing, gc_last_error(),
                gc_mem_limit_hint(&t->limit, status, hint, sizeof hint),
                memory && !t->flags.gc ? " (a plain step holds the whole batch's activations: try --gc)" : "");
}

static int train(trainer *t) {
    int64_t first = t->progress.step;
    if (first >= t->stop_step) {
        if (gc_train_dist_rank(&t->dist) == 0)
            printf("nothing to do: %s is at step %lld of %lld\n", t->checkpoint_path, (long long)first,
                   (long long)t->plan.total_steps);
        return 0;
    }
    /* reported by rank 0 once everything is set up: a failure stays one line */
    if (t->model.unused.count && gc_train_dist_rank(&t->dist) == 0)
        fprintf(stderr, "gradcache train: note: %s/model.safetensors: %d weight%s unused by the encoder (%s)\n",
                t->flags.init, t->model.unused.count, t->model.unused.count == 1 ? "" : "s", t->model.unused.names);
    gc_progress_begin(&t->bar, stderr, first, t->plan.total_steps, t->flags.log_every, t->limit.bytes);
    double first_loss = NAN, last_loss = NAN, seconds = 0;
    while (t->progress.step < t->stop_step) {
        gc_step_record record;
        if (run_step(t, &record) != GC_OK) return step_failed(t, t->progress.step + 1, "training");
        bool reporter = gc_train_dist_rank(&t->dist) == 0;
        if (reporter && gc_run_log_append(&t->log, &record) != GC_OK) return step_failed(t, record.step, "logging");
        if (reporter) gc_progress_step(&t->bar, &record);
        if (record.step == first + 1) first_loss = record.loss;
        last_loss = record.loss;
        seconds += record.seconds;
        bool checkpoint = t->flags.save_every && record.step % t->flags.save_every == 0;
        if ((checkpoint || record.step == t->stop_step) && save(t) != GC_OK)
            return step_failed(t, record.step, "saving");
    }
    gc_progress_end(&t->bar);
    if (gc_train_dist_rank(&t->dist) == 0)
        printf("trained steps %lld-%lld of %lld in %.1f s, loss %.4f -> %.4f; wrote %s and %s\n", (long long)first + 1,
               (long long)t->stop_step, (long long)t->plan.total_steps, seconds, first_loss, last_loss, t->model_path,
               t->checkpoint_path);
    return 0;
}

static void tear_down(trainer *t) {
    gc_run_log_close(&t->log);
    if (t->cache) gc_cache_free(t->cache);
    gc_train_dist_end(&t->dist);
    if (t->optimizer_ready) gc_adamw_free(&t->optimizer);
    gc_dual_encoder_free(&t->model);
    gc_metadata_free(&t->settings);
    gc_pairs_free(&t->pairs);
    free(t->order);
    free(t->data_path);
    free(t->checkpoint_path);
    free(t->model_path);
}

int gc_command_train(int argc, char **argv) {
    trainer t = {0};
    int status = gc_train_flags_parse(argc, argv, &t.flags);
    if (status) return status == 1 ? 0 : status; /* 1: --help was printed */
    status = set_up(&t);
    if (!status) status = train(&t);
    tear_down(&t);
    return status;
}
