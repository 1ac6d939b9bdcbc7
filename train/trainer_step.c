/* One update of a run (gc_trainer_update, trainer_internal.h): a step's batches, their
 * gradients (a cached or a plain step, automatic chunk sizing's retries), the overflow check,
 * clipping and AdamW, and the step's record. It calls nothing of the loop around it
 * (trainer_loop.c: the log, evaluation, checkpoints), which calls it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/clock.h"
#include "gradcache/memory.h"
#include "trainer_internal.h"

int64_t gc_trainer_accumulation(const gc_trainer_config *config) {
    return config->accumulate > 1 ? config->accumulate : 1;
}

gc_global_loss gc_trainer_global_loss(const gc_trainer_config *config) {
    if (!config->gc || ((config->guide || config->teacher_scores) && config->global_loss == GC_GLOBAL_LOSS_AUTO))
        return GC_GLOBAL_LOSS_GATHER;
    return config->global_loss;
}

int64_t gc_trainer_positives(const gc_trainer_config *config) {
    return config->positives > 1 ? config->positives : 1;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* With loss scaling: whether any gradient of any rank is inf or nan (one fused pass here,
 * then the verdict agreed over the ranks, so that every rank skips the same steps). */
static gc_status check_overflow(gc_trainer *t, bool *skipped) {
    *skipped = false;
    if (!t->progress.scaled) return GC_OK;
    return gc_train_optim_check_grads(&t->optimizer, &t->model.params, skipped);
}

/* Unscales (1 / divisor: the loss scale times the batches accumulated, whose summed gradients
 * become their mean) and clips inside AdamW's f32 update: the gradients, 16-bit ones included,
 * are never rewritten in place. */
static gc_status clip_and_update(gc_trainer *t, double loss, double divisor, double *grad_norm) {
    double grad_scale = 1 / divisor;
    gc_clear_error(); /* a nan norm with an error recorded means clipping ran out of memory */
    *grad_norm = gc_train_optim_clip_grad_scale(&t->optimizer, &t->model.params, GC_TRAIN_MAX_GRAD_NORM, &grad_scale);
    if (isnan(*grad_norm) && gc_last_status() != GC_OK) return gc_last_status();
    if (!isfinite(loss) || isnan(*grad_norm)) {
        /* an update would spread the nan into every parameter: stop while the last
         * checkpoint is still sound, as the loss does when a representation overflows */
        gc_set_error(GC_ERR_NON_FINITE, "the loss is %g and the gradient norm %g: the run diverged (lower --lr?)",
                     loss, *grad_norm);
        return GC_ERR_NON_FINITE;
    }
    return gc_train_optim_step_scaled(&t->optimizer, grad_scale);
}

/* side's rows (a new tensor) gathered over the ranks in rank order, as the cache gathers the
 * student's: the global batch's rows; in a world of one, or for the loss around the ring (which
 * takes each rank's own rows), side itself. */
static gc_tensor *gathered(const gc_trainer *t, gc_tensor *side) {
    if (!t->dist.group || !side || gc_trainer_global_loss(&t->config) == GC_GLOBAL_LOSS_RING) return side;
    gc_tensor *all = gc_dist_all_gather(t->dist.group, side, NULL);
    gc_tensor_release(side);
    return all;
}

/* --guide: the guide's representations of the global batch examples[0..batch_size) into the
 * loss's options (released with release_guide): its queries, and each example's positive then
 * its hard negatives, the passages' order. Each rank encodes its own share of the examples,
 * and the shares are gathered: every rank holds the global batch's guide rows, as the gathered
 * loss holds the student's (around the ring, each keeps its own, as the student's). */
static gc_status guide_representations(gc_trainer *t, const gc_pairs *pairs, const int64_t *all_examples) {
    const gc_trainer_config *c = &t->config;
    int64_t start, count, per_example = 1 + c->hard_negatives;
    gc_train_dist_share(&t->dist, c->batch_size, &start, &count);
    const int64_t *examples = all_examples + start;
    const char **queries = malloc((size_t)count * sizeof *queries);
    const char **passages = malloc((size_t)(count * per_example) * sizeof *passages);
    if (!queries || !passages) gc_fatal("train: out of host memory for %lld texts", (long long)count);
    for (int64_t e = 0; e < count; e++) {
        queries[e] = gc_pairs_text(pairs, examples[e], 0);
        for (int64_t k = 0; k < per_example; k++) passages[e * per_example + k] = gc_pairs_text(pairs, examples[e], (int)(1 + k));
    }
    /* eval mode, no graph, a chunk of texts at a time: the student's chunk sizes */
    t->gist.guide_queries =
        gathered(t, gc_dual_encoder_encode(&t->guide, 0, queries, count, t->progress.chunk_sizes[0]));
    t->gist.guide_passages =
        gathered(t, gc_dual_encoder_encode(&t->guide, 1, passages, count * per_example, t->progress.chunk_sizes[1]));
    free(queries);
    free(passages);
    return t->gist.guide_queries && t->gist.guide_passages ? GC_OK : gc_last_status();
}

static void release_guide(gc_trainer *t) {
    gc_tensor_release((gc_tensor *)t->gist.guide_queries);
    gc_tensor_release((gc_tensor *)t->gist.guide_passages);
    t->gist.guide_queries = t->gist.guide_passages = NULL;
}

/* --teacher-scores: the scores of the batch examples[0..batch_size) [B, 1 + hard_negatives], f64
 * on the device, into the loss's options (released with release_teacher). Every rank holds the
 * whole file, so each takes its rows without a collective: the global batch's for the gathered
 * loss (whose rows are every rank's share in rank order, the examples' order), its own share's
 * for the loss around the ring. */
static gc_status teacher_scores(gc_trainer *t, const int64_t *examples) {
    const gc_trainer_config *c = &t->config;
    int64_t first = 0, count = c->batch_size, columns = 1 + c->hard_negatives, stride = t->teacher.columns;
    if (gc_trainer_global_loss(c) == GC_GLOBAL_LOSS_RING) gc_train_dist_share(&t->dist, c->batch_size, &first, &count);
    double *rows = malloc((size_t)(count * columns > 0 ? count * columns : 1) * sizeof *rows);
    if (!rows) gc_fatal("train: out of host memory for %lld teacher scores", (long long)(count * columns));
    for (int64_t e = 0; e < count; e++)
        for (int64_t j = 0; j < columns; j++)
            rows[e * columns + j] = t->teacher.scores[examples[first + e] * stride + j];
    t->distill.teacher_scores = gc_from_host(rows, GC_SHAPE(count, columns), GC_F64, t->device);
    free(rows);
    return t->distill.teacher_scores ? GC_OK : gc_last_status();
}

static void release_teacher(gc_trainer *t) {
    gc_tensor_release((gc_tensor *)t->distill.teacher_scores);
    t->distill.teacher_scores = NULL;
}

/* One batch of an update: this rank's share of examples[0..batch_size) of `pairs`, tokenized, and its
 * gradients added to the parameters' (a cached or a plain step); its loss into *loss, the
 * largest peak of live bytes it saw into *peak, and whether its loss ran around the ring into
 * *ring. */
static gc_status batch_gradients(gc_trainer *t, const gc_pairs *pairs, const int64_t *examples, double *loss,
                                 size_t *peak, bool *ring) {
    const gc_trainer_config *c = &t->config;
    int64_t share_start, share;
    gc_train_dist_share(&t->dist, c->batch_size, &share_start, &share); /* this rank's examples */
    gc_training_batch batch;
    /* each example's passages: its positives, then its hard negatives */
    int passage_columns = (int)(gc_trainer_positives(c) - 1 + c->hard_negatives);
    gc_status status = gc_training_batch_make(pairs, examples + share_start, share, passage_columns,
                                              t->model.tokenizer, t->model.prompts, c->max_length, c->dtype, t->device,
                                              &batch);
    if (status != GC_OK) return status;
    gc_memory_reset_peak(t->device);
    if (c->guide) status = guide_representations(t, pairs, examples);
    if (status == GC_OK && c->teacher_scores) status = teacher_scores(t, examples);
    gc_cache_report report = {0};
    if (status == GC_OK && c->gc) status = gc_cache_step(t->cache, batch.inputs, loss, &report);
    else if (status == GC_OK) status = gc_cache_full_batch_step(t->cache, batch.inputs, loss);
    release_guide(t);
    release_teacher(t);
    gc_training_batch_release(&batch);
    if (c->gc) memcpy(t->progress.chunk_sizes, report.chunk_sizes, sizeof t->progress.chunk_sizes);
    *ring = report.ring_loss;
    /* a cached step measures its phases itself, resetting the peak at each: the step's peak
     * is the largest of theirs and of what followed the last reset */
    *peak = max_size(*peak, max_size(max_size(report.forward_peak_bytes, report.loss_peak_bytes),
                                     gc_memory_get_stats(t->device).peak_bytes));
    return status;
}

/* Several datasets: the record's loss added to its dataset's, and at a logging point (every
 * log_every steps, and the run's last) each dataset's mean since the previous one into it. */
static void log_dataset_loss(gc_trainer *t, gc_step_record *record) {
    gc_dataset_losses_add(&t->progress.dataset_losses, record->dataset, record->loss);
    int64_t every = t->config.log_every;
    if ((every && record->step % every == 0) || record->step == t->plan.total_steps) {
        gc_dataset_losses_take(&t->progress.dataset_losses, t->dataset_means);
        record->dataset_losses = t->dataset_means;
    }
}

gc_status gc_trainer_update(gc_trainer *t, gc_step_record *record) {
    const gc_trainer_config *c = &t->config;
    int64_t step = t->progress.step, epoch, batches = gc_trainer_accumulation(c);
    int dataset;
    const int64_t *examples = gc_multi_sampler_batch(&t->batches, step, &dataset, &epoch);
    double start = gc_seconds(), loss = 0;
    size_t peak = 0;
    bool ring = false;
    gc_status status = GC_OK;
    gc_rng_context first_batch = gc_rng_capture();
    for (int64_t b = 0; b < batches && status == GC_OK; b++) {
        if (t->dist.ddp && batches > 1) gc_ddp_micro_batch(t->dist.ddp, (int)b, (int)batches);
        double batch_loss = NAN;
        int64_t chunk_size = t->progress.chunk_sizes[0] + t->progress.chunk_sizes[1];
        status = batch_gradients(t, &t->data.pairs[dataset], examples + b * c->batch_size, &batch_loss, &peak, &ring);
        loss += batch_loss / (double)batches; /* the update's loss: the mean of its batches' */
        if (status == GC_OK && b > 0 && t->progress.chunk_sizes[0] + t->progress.chunk_sizes[1] < chunk_size) {
            /* automatic chunk sizing halved the chunks, zeroing the earlier batches' gradients:
             * the update again from its first batch, as if it had started with these chunks */
            gc_train_dist_zero_grad(&t->dist, &t->model.params);
            gc_rng_restore(&first_batch);
            loss = 0;
            b = -1;
        }
    }
    if (status != GC_OK) return status;
    loss += 0.0; /* -0 to +0: a batch of one has the loss -log 1, which would print as -0.0000 */
    double loss_scale = t->progress.scaled ? t->progress.scaler.scale : 1, grad_norm = NAN;
    bool skipped = false;
    status = check_overflow(t, &skipped);
    gc_adamw *adamw = gc_train_optim_adamw(&t->optimizer);
    adamw->lr = gc_lr_at(&t->schedule, step);
    if (status == GC_OK && !skipped) status = clip_and_update(t, loss, loss_scale * (double)batches, &grad_norm);
    if (status == GC_OK && t->progress.scaled) gc_loss_scaler_update(&t->progress.scaler, skipped);
    gc_train_dist_zero_grad(&t->dist, &t->model.params);
    if (status != GC_OK) return status;
    gc_device_synchronize(t->device);
    double seconds = gc_seconds() - start;
    /* the panels only grow during a step (made at a form's second product, repacked in place
     * after the update), so their peak since the last phase's reset is the step's */
    size_t packed = gc_memory_get_stats(t->device).peak_packed_bytes;
    *record = (gc_step_record){.step = step + 1,
                               .epoch = epoch,
                               .loss = loss,
                               .lr = adamw->lr,
                               .grad_norm = grad_norm,
                               .examples_per_second = (double)(c->batch_size * batches) / seconds,
                               .seconds = seconds,
                               .peak_bytes = peak,
                               .packed_bytes = packed,
                               .chunk_sizes = {t->progress.chunk_sizes[0], t->progress.chunk_sizes[1]},
                               .loss_scale = loss_scale,
                               .skipped = skipped,
                               .global_loss = !t->dist.group ? "local" : ring ? "ring" : "gather",
                               .dataset = dataset,
                               .datasets = t->data.count,
                               .dataset_name = t->data.names[dataset]};
    if (t->data.count > 1) log_dataset_loss(t, record);
    t->progress.step = step + 1;
    return GC_OK;
}
