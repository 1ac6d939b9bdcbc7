/* What a run holds (gc_trainer of gradcache/train.h), shared by its setting up (trainer.c),
 * its loop (trainer_loop.c) and one update (trainer_step.c). The line between the last two runs
 * one way: the loop calls the update, which calls nothing of the loop. */
#ifndef GC_TRAIN_TRAINER_INTERNAL_H
#define GC_TRAIN_TRAINER_INTERNAL_H

#include "gradcache/train.h"
#include "eval_set.h"
#include "metadata.h"
#include "run_lock.h"
#include "run_log.h"
#include "save_timer.h"
#include "train_data.h"
#include "train_dist.h"
#include "train_optim.h"
#include "train_state.h"

/* Gradient clipping and AdamW's weight decay: those of BERT-style fine-tuning. */
#define GC_TRAIN_MAX_GRAD_NORM 1.0
#define GC_TRAIN_WEIGHT_DECAY 0.01

struct gc_trainer {
    gc_trainer_config config;   /* as given; its strings are the caller's (out: copied below) */
    char *out;                  /* the run folder */
    gc_device device;           /* config->device, or cuda:LOCAL_RANK in a launched CUDA run */
    gc_mem_limit limit;         /* on the device: config->mem_limit, GC_MEM_LIMIT's or the default */
    gc_train_dist dist;         /* data-parallel: this rank's part of a launched run */
    char *checkpoint_path, *model_path;
    gc_train_data data;         /* --data's datasets (one, or several) */
    gc_multi_sampler batches;   /* each step's dataset and examples */
    double dataset_means[GC_MAX_DATASETS]; /* several datasets: a logging point's means (the record's) */
    gc_train_plan plan;         /* the steps, the batches, the world: what a checkpoint must fit */
    int64_t stop_step;          /* the last step gc_trainer_run takes: plan.total_steps, or stop_after */
    gc_dual_encoder model;
    gc_train_optim optimizer;   /* AdamW, whole or over this rank's shards (--zero) */
    gc_lr_schedule schedule;
    gc_contrastive_options loss_options; /* the loss keeps a pointer to it */
    gc_matryoshka_options matryoshka;    /* over the contrastive loss, when count > 0 (a pointer too) */
    gc_dual_encoder guide;               /* --guide: frozen, eval mode */
    gc_gist_options gist;                /* --guide: the loss (a pointer too); its guide's representations
                                            set for each batch */
    gc_teacher_scores teacher;           /* --teacher-scores: every example's, as the file has them */
    gc_distill_options distill;          /* --distill: the loss (a pointer too); its teacher scores set for
                                            each batch, [B, 1 + hard_negatives] */
    gc_token_budget token_budget;        /* --gc-chunk-tokens, --gc-sort-lengths: the split's user data */
    gc_cache *cache;
    gc_metadata settings;       /* the settings a resumed run must share (train_state.h) */
    gc_train_progress progress; /* where the run is: what a checkpoint holds */
    gc_run_log log;             /* process 0's DIR/log.jsonl */
    gc_run_lock lock;           /* process 0's hold on DIR/lock: one writer per run folder */
    gc_save_timer save_timer;   /* --checkpoint-minutes' clock */
    gc_eval_set eval;           /* --eval-every: the set evaluated on */
    char *best_path;            /* process 0's OUT/best */
};

/* ---- one update (trainer_step.c) ---- */

/* Step trainer->progress.step + 1's update: the batches (K with --accumulate K, their gradients
 * summed and reduced across processes once, at the last; all of them again when automatic chunk
 * sizing halves the chunks), clipping and the AdamW update; the step counted and its record
 * into *record. The log, evaluation and checkpoints are the loop's (gc_trainer_step). */
gc_status gc_trainer_update(gc_trainer *trainer, gc_step_record *record);

/* Batches per update: config->accumulate, 0 counting as 1. */
int64_t gc_trainer_accumulation(const gc_trainer_config *config);
/* Positives per example: config->positives, 0 counting as 1. */
int64_t gc_trainer_positives(const gc_trainer_config *config);
/* How the cache sees the global batch: config->global_loss, except that a plain step gathers
 * (it holds the whole local batch's activations: the gathered rows are no burden), and so does
 * --guide or --teacher-scores under AUTO -- the guide's rows (the teacher's scores) are given before the cache would choose, the global
 * batch's for the gathered loss, this rank's for the ring. */
gc_global_loss gc_trainer_global_loss(const gc_trainer_config *config);

/* ---- the loop (trainer_loop.c) and what it calls around an update ---- */

/* The recorded error prefixed with `what` ("step 3: training: ...") and, past the memory
 * limit, followed by where the limit came from (" (the limit: GC_MEM_LIMIT)"); its status kept
 * and returned. */
gc_status gc_trainer_failed(const gc_trainer *trainer, const char *what);

/* --eval-every (trainer_eval.c): the evaluation set read and, on process 0, what a killed run
 * left of OUT/best/ tidied (a fresh run removes an earlier run's), before the first step. */
gc_status gc_trainer_eval_begin(gc_trainer *trainer, bool resume);
/* After step `step`'s log line: the evaluation when due, with its log line, OUT/best/ when it
 * is the best so far, and --early-stop (which moves stop_step to `step`). */
gc_status gc_trainer_eval_after(gc_trainer *trainer, int64_t step);

/* --lora-* (trainer_lora.c): the settings checked (GC_ERR_CONFIG naming the flag); the
 * adapters attached to the model's towers, A drawn from the stream `init_seed` names, and
 * model.params made the adapters alone; the adapter folder written into dir/adapter/. */
gc_status gc_trainer_lora_check(const gc_trainer_config *config);
gc_status gc_trainer_lora_attach(gc_trainer *trainer, uint64_t init_seed);
/* The run's model into `dir`: with --lora-r, PEFT's adapter folder dir/adapter/ (the base is
 * --init's folder, unchanged); else the whole model (gc_dual_encoder_save). */
gc_status gc_trainer_save_model(const gc_trainer *trainer, const char *dir);

#endif
