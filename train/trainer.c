/* A run set up and torn down (gc_trainer_new, gc_trainer_resume, gc_trainer_free of
 * gradcache/train.h): a dual (or tied) text encoder trained on query/positive pairs with the
 * in-batch contrastive loss (cosine InfoNCE), each step a Gradient Cache step or a plain
 * full-batch step, then gradient clipping and AdamW (the loop: trainer_loop.c; one update:
 * trainer_step.c).
 *
 * Everything that decides what a step computes is a function of the seed and the step count:
 * the initial weights, the dropout masks and the data order come from three Philox streams
 * named by the seed, the data order of an epoch from (seed, epoch) alone. So a checkpoint
 * (train_state.h) holding the parameters, AdamW's state, the step count and the generators'
 * positions is all a resumed run needs to continue bitwise as if it had never stopped.
 *
 * f16 / bf16: the model's parameters and activations in 16 bits, AdamW keeping f32 master
 * weights (in the checkpoint too). With f16 a dynamic loss scaler (PyTorch's defaults) scales
 * the loss once per step; a step with an inf or nan gradient on any rank is skipped everywhere
 * (no update, the scale halved) and logged as such. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/files.h"
#include "trainer_internal.h"

/* The run's three uses of randomness draw from independent Philox streams, all named by the
 * seed (gc_derive_seed), so nearby seeds give unrelated stream names. */
typedef enum random_stream { STREAM_INIT = 1, STREAM_DROPOUT, STREAM_DATA } random_stream;

static uint64_t stream_seed(int64_t seed, random_stream stream) {
    return gc_derive_seed((uint64_t)seed, (uint64_t)stream);
}

gc_trainer_config gc_trainer_config_default(void) {
    return (gc_trainer_config){.model_size = 1,
                               .max_length = 32,
                               .dtype = GC_F32,
                               .batch_size = 64,
                               .chunk_sizes = {8, 8},
                               .loss = GC_CONTRASTIVE_AUTO,
                               .lr = 5e-4,
                               .temperature = 0.05,
                               .lora_alpha = 8,
                               .positives = 1,
                               .accumulate = 1,
                               .distill_temperatures = {1, 1},
                               .device = gc_cpu(),
                               .save_every = 100,
                               .checkpoint_minutes = 5,
                               .log_every = 10};
}

/* GC_ERR_CONFIG with a printf-style message: a setting that cannot work. */
#define refuse(...) (gc_set_error(GC_ERR_CONFIG, __VA_ARGS__), GC_ERR_CONFIG)

/* The recorded error prefixed with `what` ("--data: ..."), its status kept and returned. */
static gc_status failed(const char *what) {
    gc_status status = gc_last_status();
    gc_set_error(status, "%s: %s", what, gc_last_error());
    return status;
}

/* --teacher-scores with the settings distillation cannot work with. */
static gc_status check_distill(const gc_trainer_config *c) {
    if (c->distill != GC_DISTILL_MARGIN_MSE && c->distill != GC_DISTILL_KL_DIV)
        return refuse("--distill: kind %d is neither MarginMSE nor KL", (int)c->distill);
    if (c->hard_negatives < 1)
        return refuse("--teacher-scores needs --hard-negatives of at least 1: the teacher's scores rank each positive "
                      "against its negatives");
    if (c->positives > 1)
        return refuse("--teacher-scores with --positives %lld: distillation scores one positive",
                      (long long)c->positives);
    if (c->guide) return refuse("--teacher-scores with --guide: distillation adds to the plain contrastive loss");
    if (c->matryoshka_count) return refuse("--teacher-scores with --matryoshka: not supported together");
    if (!isfinite(c->distill_weight) || c->distill_weight < 0)
        return refuse("--distill-weight %g: expected a finite weight, at least 0 (0: distillation alone)",
                      c->distill_weight);
    for (int side = 0; side < 2; side++)
        if (!(c->distill_temperatures[side] > 0) || isinf(c->distill_temperatures[side]))
            return refuse("--%s-temperature %g: expected a positive, finite temperature", side ? "teacher" : "student",
                          c->distill_temperatures[side]);
    return GC_OK;
}

/* What no data or device can make work (the program's flags never give these). */
static gc_status check_config(const gc_trainer_config *c) {
    if (!c->data || !c->out) return refuse("%s is required", c->data ? "--out" : "--data");
    const struct {
        const char *name;
        int64_t value, min;
    } counts[] = {
        {"--max-length", c->max_length, 2}, {"--batch-size", c->batch_size, 1},
        {"--gc-chunk-size", c->chunk_sizes[0], 1}, {"--gc-chunk-size", c->chunk_sizes[1], 1},
        {"--steps", c->steps, 0}, {"--epochs", c->epochs, 0}, {"--hard-negatives", c->hard_negatives, 0},
        {"--positives", c->positives, 0}, {"--accumulate", c->accumulate, 0}, {"--gc-chunk-tokens", c->chunk_tokens, 0},
        {"--seed", c->seed, 0}, {"--save-every", c->save_every, 0}, {"--stop-after", c->stop_after, 0},
        {"--eval-every", c->eval_every, 0}, {"--eval-limit", c->eval_limit, 0}, {"--early-stop", c->early_stop, 0},
    };
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
        if (counts[i].value < counts[i].min)
            return refuse("%s %lld: expected at least %lld", counts[i].name, (long long)counts[i].value,
                          (long long)counts[i].min);
    if (!(c->checkpoint_minutes >= 0) || isinf(c->checkpoint_minutes))
        return refuse("--checkpoint-minutes %g: expected a finite number of minutes, at least 0 (0: none)",
                      c->checkpoint_minutes);
    if (c->eval_every && !c->eval_data) return refuse("--eval-every needs --eval-data");
    if (!c->eval_every && (c->eval_data || c->eval_metric || c->eval_limit || c->early_stop))
        return refuse("--eval-data, --eval-metric, --eval-limit and --early-stop need --eval-every");
    int presets = 0;
    while (gc_model_size_names[presets]) presets++;
    if (!c->init && (c->model_size < 0 || c->model_size >= presets))
        return refuse("--model-size %d: no such preset (0 to %d)", c->model_size, presets - 1);
    if (!(c->lr > 0) || !(c->temperature > 0))
        return refuse("--lr %g, --temperature %g: both must be positive", c->lr, c->temperature);
    if (c->matryoshka_count < 0 || c->matryoshka_count > GC_MATRYOSHKA_MAX_DIMS)
        return refuse("--matryoshka: %d prefixes (at most %d)", c->matryoshka_count, GC_MATRYOSHKA_MAX_DIMS);
    for (int j = 0; j < c->matryoshka_count; j++)
        if (c->matryoshka_dims[j] < 1 || !isfinite(c->matryoshka_weights[j]) || c->matryoshka_weights[j] < 0)
            return refuse("--matryoshka: prefix %lld weighted %g (a prefix has at least 1 dimension, a weight is "
                          "finite and not negative)", (long long)c->matryoshka_dims[j], c->matryoshka_weights[j]);
    if (c->global_loss == GC_GLOBAL_LOSS_RING && !c->gc)
        return refuse("--loss ring needs --gc (a plain step gathers)");
    if (c->global_loss == GC_GLOBAL_LOSS_RING && c->loss == GC_CONTRASTIVE_FULL)
        return refuse("--loss ring with the full loss (GC_CONTRASTIVE_FULL): the ring computes the tiled one");
    if (c->guide && c->positives > 1)
        return refuse("--guide with --positives %lld: the guided loss has one positive", (long long)c->positives);
    if (c->guide && !isfinite(c->guide_margin)) return refuse("--guide-margin %g is not finite", c->guide_margin);
    if (c->teacher_scores) {
        gc_status status = check_distill(c);
        if (status != GC_OK) return status;
    }
    if ((unsigned)c->sampling > GC_SAMPLING_PROPORTIONAL)
        return refuse("--sampling: %d is neither round-robin nor proportional", (int)c->sampling);
    if (c->log_every < 0) return refuse("--log-every %lld: expected at least 0", (long long)c->log_every);
    gc_status lora = gc_trainer_lora_check(c);
    if (lora != GC_OK) return lora;
    if ((unsigned)c->global_loss > GC_GLOBAL_LOSS_RING)
        return refuse("--loss: global_loss %d is none of AUTO, GATHER and RING", (int)c->global_loss);
    return GC_OK;
}

/* Every Matryoshka prefix fits the model's embedding. */
static gc_status check_prefixes(const gc_trainer *t) {
    const gc_text_encoder_config *encoder = &t->model.towers[0].config;
    int64_t embedding = encoder->projection ? encoder->projection : encoder->dim;
    for (int j = 0; j < t->config.matryoshka_count; j++)
        if (t->config.matryoshka_dims[j] > embedding)
            return refuse("--matryoshka %lld: the model's embedding has %lld dimensions",
                          (long long)t->config.matryoshka_dims[j], (long long)embedding);
    return GC_OK;
}

/* --no-duplicates: each example's keys are its positives' indices among the distinct texts of
 * its dataset (a batch is one dataset's). */
static void keep_positives_apart(gc_batch_sampler *batches, const gc_pairs *pairs, int64_t positives) {
    int64_t texts = pairs->count * positives;
    const char **columns = malloc((size_t)texts * sizeof *columns);
    int64_t *keys = malloc((size_t)texts * sizeof *keys);
    if (!columns || !keys) gc_fatal("trainer: out of host memory for %lld positives", (long long)texts);
    for (int64_t e = 0; e < pairs->count; e++)
        for (int64_t c = 0; c < positives; c++) columns[e * positives + c] = gc_pairs_text(pairs, e, (int)c + 1);
    const char **distinct;
    int64_t n_distinct = gc_distinct_texts(columns, texts, &distinct, keys);
    gc_batch_sampler_distinct(batches, keys, (int)positives, n_distinct);
    free(distinct);
    free(keys);
    free(columns);
}

/* Dataset d has the columns the settings take and the examples an update takes. */
static gc_status check_dataset(const gc_trainer *t, int d) {
    const gc_trainer_config *c = &t->config;
    const char *path = t->data.paths[d];
    /* the columns after the query: the positives, then the negatives */
    int64_t columns = t->data.pairs[d].negatives + 1, positives = gc_trainer_positives(c),
            negatives = columns - positives, examples = t->data.pairs[d].count;
    if (positives > columns)
        return refuse("--positives %lld: %s has %lld column%s after the query", (long long)positives, path,
                      (long long)columns, columns == 1 ? "" : "s");
    if (c->hard_negatives > negatives)
        return refuse("--hard-negatives %lld: %s has %lld negative column%s", (long long)c->hard_negatives, path,
                      (long long)negatives, negatives == 1 ? "" : "s");
    /* an update takes `accumulate` batches: the sampler's batch is all of them */
    int64_t accumulation = gc_trainer_accumulation(c);
    if (c->batch_size * accumulation <= examples) return GC_OK;
    if (accumulation == 1)
        return refuse("--batch-size %lld: %s has only %lld examples", (long long)c->batch_size, path,
                      (long long)examples);
    return refuse("--batch-size %lld times --accumulate %lld: %s has only %lld examples", (long long)c->batch_size,
                  (long long)accumulation, path, (long long)examples);
}

/* The device, the data and the sizes the settings imply. */
static gc_status load_data(gc_trainer *t) {
    const gc_trainer_config *c = &t->config;
    t->device = c->device;
    gc_status status = gc_train_dist_begin(&t->dist, c->batch_size, &t->device);
    if (status == GC_OK && gc_device_check_dtype(t->device, c->dtype) != GC_OK)
        status = refuse("--precision %s: %s", gc_dtype_name(c->dtype), gc_last_error());
    if (status != GC_OK) return status;
    t->limit = gc_mem_limit_apply(t->device, c->mem_limit, t->dist.env.local_world_size);
    if (gc_train_data_read(c->data, &t->data) != GC_OK) return failed("--data");
    int64_t examples[GC_MAX_DATASETS];
    for (int d = 0; d < t->data.count; d++) {
        if ((status = check_dataset(t, d)) != GC_OK) return status;
        examples[d] = t->data.pairs[d].count;
    }
    if (c->teacher_scores && t->data.count > 1)
        return refuse("--teacher-scores with %d datasets in --data: the scores file is one pair file's",
                      t->data.count);
    if (c->teacher_scores && gc_teacher_scores_read(c->teacher_scores, examples[0], t->data.pairs[0].negatives + 1,
                                                    &t->teacher) != GC_OK)
        return failed("--teacher-scores");
    gc_multi_sampler_init(&t->batches, stream_seed(c->seed, STREAM_DATA), t->data.count, examples,
                          c->batch_size * gc_trainer_accumulation(c), c->sampling);
    for (int d = 0; d < t->data.count && c->no_duplicates; d++)
        keep_positives_apart(&t->batches.datasets[d], &t->data.pairs[d], gc_trainer_positives(c));
    int64_t steps_per_epoch = t->batches.steps_per_epoch;
    t->plan = (gc_train_plan){.total_steps = c->steps ? c->steps : (c->epochs ? c->epochs : 1) * steps_per_epoch,
                              .batches = &t->batches,
                              .gc = c->gc,
                              .rank = gc_train_dist_rank(&t->dist),
                              .world = gc_train_dist_world(&t->dist)};
    t->stop_step = c->stop_after && c->stop_after < t->plan.total_steps ? c->stop_after : t->plan.total_steps;
    return GC_OK;
}

/* The model; data-parallel, the gradient bucketer, which also makes every rank start from
 * rank 0's parameters; the optimizer; and the state a fresh run starts from, or the
 * checkpoint's (which every rank reads whole). */
static gc_status build_model(gc_trainer *t, bool resume) {
    const gc_trainer_config *c = &t->config;
    if (c->init) {
        if (gc_dual_encoder_from_folder(&t->model, c->init, c->max_length, c->dtype, t->device) != GC_OK ||
            gc_dual_encoder_check_prompts(&t->model) != GC_OK)
            return failed("--init");
    } else {
        gc_text_encoder_config config = gc_model_preset(c->model_size, c->max_length);
        config.dtype = c->dtype;
        if (gc_dual_encoder_init(&t->model, &config, c->tied, t->device, stream_seed(c->seed, STREAM_INIT)) != GC_OK)
            return gc_trainer_failed(t, "cannot build the model");
    }
    if (c->lora_r && gc_trainer_lora_attach(t, stream_seed(c->seed, STREAM_INIT)) != GC_OK) return failed("--lora-r");
    /* the bucketer first: a sharded optimizer is built over its buckets */
    if (gc_train_dist_attach(&t->dist, &t->model.params, !c->reduce_half, c->zero) != GC_OK)
        return failed("cannot set up data-parallel training");
    if (gc_train_optim_init(&t->optimizer, &t->dist, &t->model.params, c->lr, GC_TRAIN_WEIGHT_DECAY) != GC_OK)
        return failed("cannot build the optimizer");
    /* warm-up over the first 10% of the steps, then linear decay to 0 */
    t->schedule = (gc_lr_schedule){c->lr, 0, t->plan.total_steps / 10, t->plan.total_steps, GC_LR_LINEAR};
    gc_manual_seed(gc_train_dist_dropout_seed(&t->dist, stream_seed(c->seed, STREAM_DROPOUT)));
    int64_t passages = c->batch_size * (gc_trainer_positives(c) + c->hard_negatives);
    t->progress = (gc_train_progress){.chunk_sizes = {c->gc ? c->chunk_sizes[0] : c->batch_size,
                                                      c->gc ? c->chunk_sizes[1] : passages},
                                      .rng = gc_rng_capture(),
                                      .scaled = c->dtype == GC_F16,
                                      .dataset_losses.count = t->data.count,
                                      .eval.on = c->eval_every > 0};
    gc_loss_scaler_init(&t->progress.scaler);
    if (resume) {
        if (gc_train_state_load(t->checkpoint_path, &t->model, &t->optimizer, &t->progress, &t->settings, &t->plan) !=
            GC_OK)
            return failed("--resume");
        gc_rng_restore(&t->progress.rng);
    }
    return GC_OK;
}

/* Process 0's run folder: created, locked against a second writer (run_lock.h), cleared of
 * what a run killed while saving left behind (gc_file_begin's hidden temporaries), and its log
 * started or, resumed, cut to the checkpoint's steps. */
static gc_status open_folder(gc_trainer *t) {
    if (gc_make_directories(t->out) != GC_OK) return failed("--out");
    gc_status locked = gc_run_lock_take(&t->lock, t->out);
    if (locked != GC_OK) return locked == GC_ERR_CONFIG ? locked : failed("--out");
    if (gc_remove_stale_temporaries(t->checkpoint_path, NULL) != GC_OK ||
        gc_remove_stale_temporaries(t->model_path, NULL) != GC_OK)
        return failed("--out");
    char *log_path = gc_path_join(t->out, "log.jsonl");
    gc_status opened = gc_run_log_open(&t->log, log_path, t->progress.step);
    free(log_path);
    return opened == GC_OK ? GC_OK : failed("--out");
}

/* Everything before the first step. */
static gc_status set_up(gc_trainer *t, bool resume) {
    gc_status status = load_data(t);
    if (status == GC_OK && t->config.eval_every) status = gc_trainer_eval_begin(t, resume);
    if (status != GC_OK) return status;
    gc_train_settings(&t->config, &t->data, &t->settings);
    t->checkpoint_path = gc_path_join(t->out, "checkpoint.safetensors");
    t->model_path = gc_path_join(t->out, t->config.lora_r ? "adapter" : "model.safetensors");
    status = build_model(t, resume);
    if (t->progress.eval.stopped_step) t->stop_step = t->progress.step; /* --early-stop ended it */
    if (status == GC_OK && t->config.guide &&
        gc_dual_encoder_load(t->config.guide, t->config.max_length, t->device, &t->guide) != GC_OK)
        status = failed("--guide");
    if (status == GC_OK) status = check_prefixes(t);
    if (status == GC_OK && gc_train_dist_rank(&t->dist) == 0) status = open_folder(t); /* rank 0 alone writes */
    if (status != GC_OK) return status;
    gc_text_encoder *towers[2] = {gc_dual_encoder_tower(&t->model, 0), gc_dual_encoder_tower(&t->model, 1)};
    /* not in the checkpoint's flags: it changes the memory a step takes, not what it computes */
    for (int side = 0; side < 2; side++) towers[side]->checkpoint_layers = t->config.checkpoint_layers;
    t->loss_options = (gc_contrastive_options){.similarity = GC_SIMILARITY_COSINE,
                                               .temperature = t->config.temperature,
                                               .method = t->config.loss,
                                               .positives = gc_trainer_positives(&t->config)};
    t->gist = (gc_gist_options){.contrastive = t->loss_options,
                                .margin_strategy = t->config.guide_margin_strategy,
                                .margin = t->config.guide_margin};
    t->distill = (gc_distill_options){.kind = t->config.distill,
                                      .similarity = GC_SIMILARITY_COSINE,
                                      .student_temperature = t->config.distill_temperatures[0],
                                      .teacher_temperature = t->config.distill_temperatures[1],
                                      .weight = t->config.distill_weight > 0 ? t->config.distill_weight : 1,
                                      .contrastive = t->config.distill_weight > 0 ? &t->loss_options : NULL};
    gc_loss_fn base = gc_contrastive_loss_fn(&t->loss_options);
    if (t->config.guide) base = gc_gist_loss_fn(&t->gist);
    if (t->config.teacher_scores) base = gc_distill_loss_fn(&t->distill);
    t->matryoshka = (gc_matryoshka_options){.base = base, .count = t->config.matryoshka_count};
    for (int j = 0; j < t->config.matryoshka_count; j++) {
        t->matryoshka.dims[j] = t->config.matryoshka_dims[j];
        t->matryoshka.weights[j] = t->config.matryoshka_weights[j];
    }
    gc_cache_config config = {
        .n_models = 2,
        .models = {{towers[0], gc_dual_encoder_forward_train, t->progress.chunk_sizes[0], &t->model.params},
                   {towers[1], gc_dual_encoder_forward_train, t->progress.chunk_sizes[1], &t->model.params}},
        .loss = t->matryoshka.count ? gc_matryoshka_loss_fn(&t->matryoshka) : t->matryoshka.base,
        .keep_last_graph = true, /* one forward fewer per side; the same numbers */
        .auto_chunk = t->config.gc, /* the ranks retry together; with --accumulate, run_step redoes the update */
        .group = t->dist.group,
        .global_loss = gc_trainer_global_loss(&t->config),
        .ddp = t->dist.ddp,
        .scaler = t->progress.scaled ? &t->progress.scaler : NULL, /* read at each step */
    };
    if (t->config.gc && (t->config.chunk_tokens || t->config.sort_lengths)) {
        /* chunks by token budget, each cut to its longest text; sorted without a budget, the cut
         * alone (a budget no chunk reaches): that is what sorting saves */
        t->token_budget = (gc_token_budget){t->config.chunk_tokens ? t->config.chunk_tokens : INT64_MAX, "mask"};
        config.split = gc_split_by_tokens;
        config.user = &t->token_budget;
    }
    if (t->config.gc && t->config.sort_lengths) config.sort_by = "mask"; /* each side by its own lengths */
    t->cache = gc_cache_new(&config);
    gc_save_timer_start(&t->save_timer, t->config.checkpoint_minutes);
    return GC_OK;
}

/* A fresh run, or with `resume` the one its checkpoint holds. */
static gc_status start(const gc_trainer_config *config, bool resume, gc_trainer **trainer) {
    *trainer = NULL;
    gc_status status = check_config(config);
    if (status != GC_OK) return status;
    gc_trainer *t = calloc(1, sizeof *t);
    if (!t || !(t->out = strdup(config->out))) gc_fatal("trainer: out of host memory");
    t->config = *config;
    status = set_up(t, resume);
    if (status == GC_OK) {
        *trainer = t;
        return GC_OK;
    }
    /* the error survives the tearing down (closing the process group may record its own) */
    char message[512];
    snprintf(message, sizeof message, "%s", gc_last_error());
    gc_trainer_free(t);
    gc_set_error(status, "%s", message);
    return status;
}

gc_status gc_trainer_new(const gc_trainer_config *config, gc_trainer **trainer) {
    return start(config, false, trainer);
}

gc_status gc_trainer_resume(const gc_trainer_config *config, gc_trainer **trainer) {
    return start(config, true, trainer);
}

void gc_trainer_free(gc_trainer *t) {
    if (!t) return;
    gc_run_log_close(&t->log);
    gc_run_lock_release(&t->lock);
    if (t->cache) gc_cache_free(t->cache);
    gc_train_optim_free(&t->optimizer); /* before the bucketer its shards are views of */
    gc_train_dist_end(&t->dist);
    gc_dual_encoder_free(&t->model);
    gc_dual_encoder_free(&t->guide);
    gc_metadata_free(&t->settings);
    gc_train_data_free(&t->data);
    gc_eval_set_free(&t->eval);
    free(t->best_path);
    gc_teacher_scores_free(&t->teacher);
    gc_multi_sampler_free(&t->batches);
    free(t->checkpoint_path);
    free(t->model_path);
    free(t->out);
    free(t);
}

/* The pairs of every dataset of the run together. */
static int64_t data_pairs(const gc_train_data *data) {
    int64_t pairs = 0;
    for (int d = 0; d < data->count; d++) pairs += data->pairs[d].count;
    return pairs;
}

gc_trainer_info gc_trainer_get_info(const gc_trainer *t) {
    return (gc_trainer_info){.rank = gc_train_dist_rank(&t->dist),
                             .world = gc_train_dist_world(&t->dist),
                             .launcher = gc_dist_launcher_name(t->dist.env.launcher),
                             .step = t->progress.step,
                             .stop_step = t->stop_step,
                             .total_steps = t->plan.total_steps,
                             .examples_per_epoch = data_pairs(&t->data),
                             .steps_per_epoch = t->batches.steps_per_epoch,
                             .chunk_sizes = {t->config.gc ? t->progress.chunk_sizes[0] : 0,
                                             t->config.gc ? t->progress.chunk_sizes[1] : 0},
                             .device = t->device,
                             .limit = t->limit,
                             .checkpoint_path = t->checkpoint_path,
                             .model_path = t->model_path,
                             .model = &t->model,
                             .eval_metric = t->config.eval_every ? gc_eval_set_metric(&t->eval) : NULL,
                             .best_step = t->progress.eval.best_step,
                             .best_value = t->progress.eval.best_value,
                             .early_stopped = t->progress.eval.stopped_step};
}
