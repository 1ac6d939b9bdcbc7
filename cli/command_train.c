/* gradcache train: the flags of a run (gc_trainer_config of gradcache/train.h, whose trainer
 * does the work), its progress on stderr and its summary on stdout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "errors.h"
#include "flags.h"
#include "gradcache/files.h"
#include "gradcache/pretrained.h"
#include "gradcache/train.h"
#include "int_list.h"
#include "progress.h"

#define SUMMARY                                                                                              \
    "Trains a dual text encoder (or one tied encoder with --tied) on query<TAB>positive pairs with the\n"     \
    "in-batch contrastive loss; --gc computes each step with Gradient Cache. Writes DIR/log.jsonl,\n"          \
    "DIR/checkpoint.safetensors (for --resume) and DIR/model.safetensors (for gradcache eval). With --init,\n" \
    "fine-tunes a pretrained model (one encoder for both sides) of the BERT family or a decoder-style\n"      \
    "embedder (Llama, Mistral, Qwen2, Qwen3; its query prompt before each query), and DIR is a model\n"      \
    "folder too: the folder's config.json, tokenizer files and sentence-transformers files, and\n"           \
    "model.safetensors under Hugging Face's names, which transformers loads; with --lora-r, DIR/adapter/\n" \
    "instead, a PEFT adapter folder over the frozen --init model."

/* --zero: what a data-parallel run shards, in gc_zero's order. "2" reduces once per step, as
 * every other stage does (the same bytes on the wire as without ZeRO); "2b" after every
 * chunk's backward (the least gradient memory, the bytes times the chunks): see docs/TRAIN.md. */
static const char *const zero_names[] = {"0", "1", "2", "2b", NULL};

/* --guide-margin-strategy, in gc_gist_margin's order (sentence-transformers' names). */
static const char *const margin_names[] = {"absolute", "relative", NULL};

/* --sampling, in gc_sampling's order (sentence-transformers' names, in its spelling of flags). */
static const char *const sampling_names[] = {"round-robin", "proportional", NULL};

/* --distill, in gc_distill_kind's order. */
static const char *const distill_names[] = {"margin-mse", "kl", NULL};

/* --loss: how a --gc step computes the loss's gradient (tiled or full), and across processes
 * how it sees the global batch (gathered or around the ring). The ring is tiled, so "tiled"
 * leaves the exchange to auto and "full" gathers. */
static const char *const loss_names[] = {"auto", "tiled", "full", "gather", "ring", NULL};
static const struct { /* loss_names[i]'s settings */
    gc_contrastive_method method;
    gc_global_loss global;
} loss_choices[] = {
    {GC_CONTRASTIVE_AUTO, GC_GLOBAL_LOSS_AUTO},  {GC_CONTRASTIVE_TILED, GC_GLOBAL_LOSS_AUTO},
    {GC_CONTRASTIVE_FULL, GC_GLOBAL_LOSS_GATHER}, {GC_CONTRASTIVE_AUTO, GC_GLOBAL_LOSS_GATHER},
    {GC_CONTRASTIVE_AUTO, GC_GLOBAL_LOSS_RING},
};

/* The flags: the run's settings, and what the program makes of the rest. */
typedef struct train_flags {
    gc_trainer_config config;
    const char *gc_chunk_size; /* parsed into config.chunk_sizes */
    const char *matryoshka;    /* parsed into config.matryoshka_* */
    int device;                /* an index into cli_device_choices */
    int precision;             /* CLI_PRECISION_*: config.dtype */
    int loss;                  /* an index into loss_names: config.loss and config.global_loss */
    int zero;                  /* an index into zero_names: config.zero */
    int margin_strategy;       /* an index into margin_names: config.guide_margin_strategy */
    int distill;               /* an index into distill_names: config.distill */
    int sampling;              /* an index into sampling_names: config.sampling */
    int weight_packing;        /* CLI_PACKING_*: gc_set_weight_packing (not a setting of the run:
                                  the same results either way) */
    int64_t log_every;
    bool resume;
    bool merge;                /* --merge: the adapters folded into --init's model, OUT/merged */
} train_flags;

/* --gc-chunk-size "N" (both sides) or "N,M" (queries, passages); 0 or the usage status. */
static int parse_chunk_sizes(const char *text, int64_t sizes[2]) {
    char *end;
    long long query = strtoll(text, &end, 10), passage = query;
    if (*end == ',') passage = strtoll(end + 1, &end, 10);
    if (*end || end == text || query < 1 || passage < 1 || query > INT32_MAX || passage > INT32_MAX)
        return cli_fail("train", 2,
                        "--gc-chunk-size: expected N or N,M (positive integers: query rows, passage rows), got '%s'",
                        text);
    sizes[0] = query;
    sizes[1] = passage;
    return 0;
}

/* --matryoshka "D1,D2,...": the prefixes, largest first, each weighted 1; 0 or the usage status. */
static int parse_prefixes(const char *text, gc_trainer_config *config) {
    cli_int_list dims;
    int status = cli_int_list_parse("train", "matryoshka", text, 1, 1 << 20, &dims);
    if (status) return status;
    if (dims.count > GC_MATRYOSHKA_MAX_DIMS)
        return cli_fail("train", 2, "--matryoshka: %d prefixes, at most %d", dims.count, GC_MATRYOSHKA_MAX_DIMS);
    config->matryoshka_count = dims.count;
    for (int j = 0; j < dims.count; j++) {
        config->matryoshka_dims[j] = dims.values[dims.count - 1 - j];
        config->matryoshka_weights[j] = 1;
    }
    return 0;
}

/* --eval-every and the flags that need it; 0 or the usage status. */
static int check_eval_flags(const gc_trainer_config *f) {
    if (f->eval_every && !f->eval_data)
        return cli_fail("train", 2, "--eval-every needs --eval-data (a pair file or folder, or a BEIR-format folder)");
    if (!f->eval_every && (f->eval_data || f->eval_metric || f->eval_limit || f->early_stop))
        return cli_fail("train", 2, "--eval-data, --eval-metric, --eval-limit and --early-stop need --eval-every");
    int known = 0;
    while (f->eval_metric && gc_eval_measure_names[known] && strcmp(gc_eval_measure_names[known], f->eval_metric))
        known++;
    if (f->eval_metric && !gc_eval_measure_names[known])
        return cli_fail("train", 2,
                        "--eval-metric: expected one of mrr, recall@1, recall@10, ndcg@10, recall@100, mrr@10, "
                        "map@100, got '%s'", f->eval_metric);
    return 0;
}

/* Parses train's flags (argv[2..]): 0; 1 after --help; or 2 after one line on stderr naming
 * the flag (unknown, malformed, out of range, or a combination that makes no sense). */
static int parse_flags(int argc, char **argv, train_flags *flags) {
    *flags = (train_flags){.config = gc_trainer_config_default(), .log_every = 10};
    gc_trainer_config *f = &flags->config;
    f->out = "runs/latest";
    cli_flag table[] = {
        {"data", CLI_FLAG_STRING, &f->data, 0, 0, NULL,
         "a pair file, a folder holding train.tsv or a BEIR folder (required); or several, comma-separated, each "
         "step's batch from one of them as --sampling says"},
        {"sampling", CLI_FLAG_CHOICE, &flags->sampling, 0, 0, sampling_names,
         "with several --data: round-robin (the datasets in turn; an epoch ends when the smallest is used up) or "
         "proportional (each epoch every dataset's batches once, in a seeded random order)"},
        {"out", CLI_FLAG_STRING, &f->out, 0, 0, NULL, "the run folder (log, checkpoint, model)"},
        {"model-size", CLI_FLAG_CHOICE, &f->model_size, 0, 0, gc_model_size_names, "the encoder preset"},
        {"init", CLI_FLAG_STRING, &f->init, 0, 0, NULL,
         "start from a pretrained model folder (config.json, model.safetensors or its shards, tokenizer.json) of "
         "the BERT family or a decoder-style embedder (llama, mistral, qwen2, qwen3) instead of a preset"},
        {"lora-r", CLI_FLAG_INT, &f->lora_r, 1, 1 << 20, NULL,
         "with --init, train LoRA adapters of this rank on the --lora-targets Linears, the model itself frozen; "
         "writes PEFT's DIR/adapter/ (adapter_config.json, adapter_model.safetensors) instead of a model, for "
         "eval/encode --model INIT --adapter DIR/adapter"},
        {"lora-alpha", CLI_FLAG_DOUBLE, &f->lora_alpha, 1e-12, 1e12, NULL,
         "with --lora-r, the adapters' update is scaled by alpha / r (default 8, PEFT's)"},
        {"lora-dropout", CLI_FLAG_DOUBLE, &f->lora_dropout, 0, 1, NULL,
         "with --lora-r, dropout on each adapter's input, below 1 (default 0)"},
        {"lora-targets", CLI_FLAG_STRING, &f->lora_targets, 0, 0, NULL,
         "with --lora-r, the Linears to adapt, comma-separated module names as PEFT's target_modules: query,value "
         "(BERT), q_proj,v_proj (the decoders)"},
        {"merge", CLI_FLAG_BOOL, &flags->merge, 0, 0, NULL,
         "with --lora-r, after the run also write DIR/merged: a whole model folder with the adapters folded into "
         "the --init model (PEFT's merge_and_unload), which transformers loads with no adapter"},
        {"max-length", CLI_FLAG_INT, &f->max_length, 2, 4096, NULL,
         "tokens per text ([CLS] and UTF-8 bytes; with --init, the folder's tokens, its special tokens and "
         "prompt included)"},
        {"precision", CLI_FLAG_CHOICE, &flags->precision, 0, 0, cli_precision_names,
         "parameters and activations: f32, or f16 / bf16 with f32 master weights (f16: loss scaling)"},
        {"tied", CLI_FLAG_BOOL, &f->tied, 0, 0, NULL, "one encoder for queries and passages"},
        {"batch-size", CLI_FLAG_INT, &f->batch_size, 1, 1 << 24, NULL, "examples per step"},
        {"gc", CLI_FLAG_BOOL, &f->gc, 0, 0, NULL, "compute each step with Gradient Cache"},
        {"gc-chunk-size", CLI_FLAG_STRING, &flags->gc_chunk_size, 0, 0, NULL,
         "rows per chunk with --gc: N, or N,M for queries and passages (default 8)"},
        {"accumulate", CLI_FLAG_INT, &f->accumulate, 1, 1 << 20, NULL,
         "batches per update: K steps' gradients summed (averaged) before one AdamW step, reduced across processes "
         "once"},
        {"gc-chunk-tokens", CLI_FLAG_INT, &f->chunk_tokens, 1, 1e12, NULL,
         "with --gc, also at most N real (unpadded) tokens per chunk, each chunk cut to its longest text"},
        {"gc-sort-lengths", CLI_FLAG_BOOL, &f->sort_lengths, 0, 0, NULL,
         "with --gc, chunk each side's texts longest first, each chunk cut to its longest text: less padding, "
         "the same gradients"},
        {"checkpoint-layers", CLI_FLAG_BOOL, &f->checkpoint_layers, 0, 0, NULL,
         "keep only each encoder layer's input for backward and run the layer again there: less memory per chunk "
         "(a larger --gc-chunk-size fits), the same gradients, a slower step"},
        {"reduce-half", CLI_FLAG_BOOL, &f->reduce_half, 0, 0, NULL,
         "data-parallel f16/bf16: average gradients in their own dtype (half the traffic) instead of f32"},
        {"zero", CLI_FLAG_CHOICE, &flags->zero, 0, 0, zero_names,
         "data-parallel, sharded over the processes: 0 nothing, 1 AdamW's state, 2 the gradients too (reduced once "
         "per step), 2b the gradients reduced after every --gc chunk's backward (least memory, more traffic)"},
        {"device", CLI_FLAG_CHOICE, &flags->device, 0, 0, cli_device_choices, "where to train (cuda: the first GPU)"},
        {"mem-limit", CLI_FLAG_SIZE, &f->mem_limit, 0, 0, NULL,
         "a byte limit on the device's memory, e.g. 512M (default: GC_MEM_LIMIT's, else on the CPU 2/3 of the "
         "memory available at the start, shared by the processes of a launched run on this machine)"},
        {"steps", CLI_FLAG_INT, &f->steps, 0, 1e12, NULL, "steps to train (0: as --epochs says)"},
        {"epochs", CLI_FLAG_INT, &f->epochs, 0, 1e6, NULL,
         "epochs to train, each skipping the examples the batch size leaves over (0: one, unless --steps)"},
        {"lr", CLI_FLAG_DOUBLE, &f->lr, 1e-12, 1, NULL,
         "AdamW's peak rate: linear warm-up over 10% of the steps, then linear decay to 0"},
        {"temperature", CLI_FLAG_DOUBLE, &f->temperature, 1e-4, 100, NULL, "the contrastive loss's temperature"},
        {"loss", CLI_FLAG_CHOICE, &flags->loss, 0, 0, loss_names,
         "with --gc, the loss's gradient: tiled (no batch x batch matrix), full, or auto (tiled above one tile of "
         "rows: 512 on the CPU, 4096 on a GPU); across processes, gather (every process holds every "
         "representation), ring (each its own; the passages travel), or auto (the ring when the gathered "
         "representations and their gradients would take more than a quarter of the memory limit)"},
        {"hard-negatives", CLI_FLAG_INT, &f->hard_negatives, 0, 64, NULL,
         "negatives per example: the first N negative columns"},
        {"positives", CLI_FLAG_INT, &f->positives, 1, 64, NULL,
         "positives per example: the first K columns after the query (the loss averages over them), the rest "
         "negatives"},
        {"no-duplicates", CLI_FLAG_BOOL, &f->no_duplicates, 0, 0, NULL,
         "no two examples of a batch share a positive text (identical positives make false negatives)"},
        {"matryoshka", CLI_FLAG_STRING, &flags->matryoshka, 0, 0, NULL,
         "nested prefixes of the embedding, e.g. 384,256,128,64: the loss is summed over them (weights 1)"},
        {"guide", CLI_FLAG_STRING, &f->guide, 0, 0, NULL,
         "a model folder (or run) whose frozen embeddings of each batch mask out false negatives: any candidate "
         "it scores above the query's positive less the margin (GISTEmbed; its own tokenizer; across processes "
         "gathered, or around the ring with --loss ring)"},
        {"guide-margin", CLI_FLAG_DOUBLE, &f->guide_margin, -1e6, 1e6, NULL,
         "with --guide, the margin below the positive's guide score"},
        {"guide-margin-strategy", CLI_FLAG_CHOICE, &flags->margin_strategy, 0, 0, margin_names,
         "with --guide: absolute (the positive's score minus the margin) or relative (times 1 - margin)"},
        {"teacher-scores", CLI_FLAG_STRING, &f->teacher_scores, 0, 0, NULL,
         "distil a teacher's scores: FILE has a line per example of the pair file, its positive's score then one "
         "per negative, tab-separated (docs/DATA.md); needs --hard-negatives 1 or more"},
        {"distill", CLI_FLAG_CHOICE, &flags->distill, 0, 0, distill_names,
         "with --teacher-scores: margin-mse (the student's margins positive - negative against the teacher's, "
         "squared) or kl (KL of the teacher's softmax over positive and negatives from the student's)"},
        {"distill-weight", CLI_FLAG_DOUBLE, &f->distill_weight, 0, 1e6, NULL,
         "with --teacher-scores: 0, the distillation loss alone; W > 0, the in-batch contrastive loss + W times it"},
        {"student-temperature", CLI_FLAG_DOUBLE, &f->distill_temperatures[0], 1e-4, 100, NULL,
         "with --distill kl, the student's cosine scores are divided by it (the loss is multiplied by its square)"},
        {"teacher-temperature", CLI_FLAG_DOUBLE, &f->distill_temperatures[1], 1e-4, 1e6, NULL,
         "with --distill kl, the teacher's scores are divided by it"},
        {"seed", CLI_FLAG_INT, &f->seed, 0, 9007199254740992.0, NULL,
         "names the random streams: weights, dropout, data order"},
        {"log-every", CLI_FLAG_INT, &flags->log_every, 1, 1e12, NULL,
         "steps between progress lines when stderr is not a terminal, and with several --data between the log's "
         "per-dataset mean losses"},
        {"save-every", CLI_FLAG_INT, &f->save_every, 0, 1e12, NULL, "steps between checkpoints (0: only at the end)"},
        {"checkpoint-minutes", CLI_FLAG_DOUBLE, &f->checkpoint_minutes, 0, 1e9, NULL,
         "also a checkpoint after the first step that ends this many minutes after the start or the last "
         "checkpoint, so that a killed run loses at most about that much (0: by --save-every only)"},
        {"stop-after", CLI_FLAG_INT, &f->stop_after, 0, 1e12, NULL,
         "stop after this step as if interrupted, checkpoint written, for --resume (0: never)"},
        {"eval-every", CLI_FLAG_INT, &f->eval_every, 1, 1e12, NULL,
         "evaluate every N steps and at the last on --eval-data (eval mode, the training's weights and random "
         "streams untouched), a line in DIR/log.jsonl; the best model so far kept in DIR/best/ (with best.json)"},
        {"eval-data", CLI_FLAG_STRING, &f->eval_data, 0, 0, NULL,
         "with --eval-every: a pair file or a folder holding dev.tsv (MRR, Recall@1, Recall@10), or a BEIR-format "
         "folder (its dev qrels, else test: nDCG@10, Recall@10, Recall@100, MRR@10, MAP@100)"},
        {"eval-metric", CLI_FLAG_STRING, &f->eval_metric, 0, 0, NULL,
         "with --eval-every, the measure that decides the best: mrr, recall@1, recall@10 (pairs) or ndcg@10, "
         "recall@10, recall@100, mrr@10, map@100 (BEIR) (default: mrr, ndcg@10)"},
        {"eval-limit", CLI_FLAG_INT, &f->eval_limit, 0, 1e12, NULL,
         "with --eval-every, evaluate on the first Q pairs (BEIR: judged queries) only (0: all)"},
        {"early-stop", CLI_FLAG_INT, &f->early_stop, 0, 1e12, NULL,
         "with --eval-every, stop after K evaluations in a row without improvement, checkpoint written (0: never)"},
        {"resume", CLI_FLAG_BOOL, &flags->resume, 0, 0, NULL,
         "continue from DIR/checkpoint.safetensors (with the flags of the run that wrote it)"},
        CLI_WEIGHT_PACKING_FLAG(flags->weight_packing),
    };
    int status = cli_flags_parse("train", SUMMARY, table, (int)(sizeof table / sizeof *table), argc, argv, 2);
    if (status) return status;
    if (!f->data) return cli_fail("train", 2, "--data is required (a pair file, or a folder holding train.tsv)");
    if (f->steps && f->epochs) return cli_fail("train", 2, "--steps and --epochs cannot be used together");
    if (flags->merge && !f->lora_r) return cli_fail("train", 2, "--merge needs --lora-r");
    if (flags->gc_chunk_size && !f->gc) return cli_fail("train", 2, "--gc-chunk-size needs --gc");
    if (f->chunk_tokens && !f->gc) return cli_fail("train", 2, "--gc-chunk-tokens needs --gc");
    if (f->sort_lengths && !f->gc) return cli_fail("train", 2, "--gc-sort-lengths needs --gc");
    if (flags->loss != 0 && !f->gc)
        return cli_fail("train", 2, "--loss %s needs --gc (the plain step gathers and differentiates the full loss)",
                        loss_names[flags->loss]);
    f->dtype = cli_precision_dtype(flags->precision);
    f->loss = loss_choices[flags->loss].method;
    f->global_loss = loss_choices[flags->loss].global;
    f->zero = (gc_zero)flags->zero;
    f->guide_margin_strategy = (gc_gist_margin)flags->margin_strategy;
    if ((f->guide_margin != 0 || flags->margin_strategy) && !f->guide)
        return cli_fail("train", 2, "--guide-margin and --guide-margin-strategy need --guide");
    f->distill = (gc_distill_kind)flags->distill;
    f->sampling = (gc_sampling)flags->sampling;
    if (flags->sampling && !strchr(f->data, ','))
        return cli_fail("train", 2, "--sampling %s needs several datasets in --data (a,b,...)",
                        sampling_names[flags->sampling]);
    f->log_every = flags->log_every;
    if ((flags->distill || f->distill_weight != 0) && !f->teacher_scores)
        return cli_fail("train", 2, "--distill and --distill-weight need --teacher-scores");
    if ((f->distill_temperatures[0] != 1 || f->distill_temperatures[1] != 1) && f->distill != GC_DISTILL_KL_DIV)
        return cli_fail("train", 2, "--student-temperature and --teacher-temperature need --distill kl");
    if (flags->matryoshka && parse_prefixes(flags->matryoshka, f)) return 2;
    int status_eval = check_eval_flags(f);
    if (status_eval) return status_eval;
    return flags->gc_chunk_size ? parse_chunk_sizes(flags->gc_chunk_size, f->chunk_sizes) : 0;
}

/* What the progress line and the summary need of each step. */
typedef struct report {
    cli_progress bar;
    bool printer;    /* process 0 prints: the others train in silence */
    int64_t first;   /* the step the run started after (a resumed run's checkpoint's) */
    double first_loss, last_loss, seconds;
    const char *global_loss; /* the last step's */
} report;

/* gc_trainer_config.on_step */
static void on_step(void *user, const gc_step_record *record) {
    report *r = user;
    if (r->printer) cli_progress_step(&r->bar, record);
    if (record->step == r->first + 1) r->first_loss = record->loss;
    r->last_loss = record->loss;
    r->seconds += record->seconds;
    r->global_loss = record->global_loss;
}

/* gc_trainer_config.on_eval: a line per evaluation on stderr (process 0). */
static void on_eval(void *user, const gc_eval_record *e) {
    report *r = user;
    if (!r->printer) return;
    cli_progress_end(&r->bar);
    fprintf(stderr, "gradcache train: step %lld: %s %.4f", (long long)e->step, e->names[e->metric],
            e->values[e->metric]);
    if (e->best) fprintf(stderr, " (the best so far)\n");
    else
        fprintf(stderr, " (best %.4f at step %lld, %lld evaluation%s without improvement)\n", e->best_value,
                (long long)e->best_step, (long long)e->since_best, e->since_best == 1 ? "" : "s");
    if (e->stopped) fprintf(stderr, "gradcache train: early stop at step %lld\n", (long long)e->step);
}

/* The summary's word on how the last step's loss saw the global batch (nothing in one process). */
static const char *exchange_note(const char *global_loss) {
    if (!strcmp(global_loss, "ring")) return " (the loss around the ring)";
    return strcmp(global_loss, "gather") ? "" : " (the loss over the gathered batch)";
}

/* --merge: OUT/adapter folded into --init's model as OUT/merged (a folder of an earlier run's
 * replaced: it is this run's output). */
static int merge(const gc_trainer_config *config) {
    char *adapter = gc_path_join(config->out, "adapter"), *merged = gc_path_join(config->out, "merged");
    gc_status status = gc_folder_remove(merged);
    if (status == GC_OK) status = gc_lora_merge_folder(config->init, adapter, merged);
    if (status == GC_OK) printf("wrote %s: the adapters folded into %s\n", merged, config->init);
    free(adapter);
    free(merged);
    return status == GC_OK ? 0 : cli_fail("train", 1, "--merge: %s", gc_last_error());
}

static int train(gc_trainer *trainer, const train_flags *f, report *r) {
    gc_trainer_info info = gc_trainer_get_info(trainer);
    r->printer = info.rank == 0;
    r->first = info.step;
    if (info.early_stopped) {
        if (r->printer)
            printf("nothing to do: %s stopped early at step %lld of %lld (--early-stop: no better %s since step "
                   "%lld, %.4f)\n", info.checkpoint_path, (long long)info.early_stopped, (long long)info.total_steps,
                   info.eval_metric, (long long)info.best_step, info.best_value);
        return 0;
    }
    if (info.step >= info.stop_step) {
        if (r->printer)
            printf("nothing to do: %s is at step %lld of %lld\n", info.checkpoint_path, (long long)info.step,
                   (long long)info.total_steps);
        return 0;
    }
    /* reported by process 0 once everything is set up: a failure stays one line */
    const gc_bert_unused *unused = &info.model->unused;
    if (unused->count && r->printer)
        fprintf(stderr, "gradcache train: note: %s: %d weight%s unused by the encoder (%s)\n",
                f->config.init, unused->count, unused->count == 1 ? "" : "s", unused->names);
    if (r->printer && info.world > 1)
        fprintf(stderr, "gradcache train: %d processes started by %s\n", info.world, info.launcher);
    cli_progress_begin(&r->bar, stderr, info.step, info.total_steps, f->log_every, info.limit.bytes);
    if (r->printer) cli_progress_plan(&r->bar, &info, &f->config);
    gc_status status = gc_trainer_run(trainer);
    cli_progress_end(&r->bar);
    if (status != GC_OK) {
        bool memory = status == GC_ERR_OUT_OF_MEMORY || status == GC_ERR_MEM_LIMIT;
        return cli_fail("train", 1, "%s%s", gc_last_error(),
                        memory && !f->config.gc ? " (a plain step holds the whole batch's activations: try --gc)" : "");
    }
    info = gc_trainer_get_info(trainer); /* where it stopped, and its best */
    if (r->printer)
        printf("trained steps %lld-%lld of %lld in %.1f s, loss %.4f -> %.4f%s; wrote %s and %s\n",
               (long long)r->first + 1, (long long)info.stop_step, (long long)info.total_steps, r->seconds,
               r->first_loss, r->last_loss, exchange_note(r->global_loss), info.model_path, info.checkpoint_path);
    if (r->printer && info.best_step)
        printf("best %s %.4f at step %lld%s\n", info.eval_metric, info.best_value, (long long)info.best_step,
               info.early_stopped ? " (stopped early: --early-stop)" : "");
    return r->printer && f->merge ? merge(&f->config) : 0;
}

int cli_command_train(int argc, char **argv) {
    train_flags f;
    int status = parse_flags(argc, argv, &f);
    if (status) return status == 1 ? 0 : status; /* 1: --help was printed */
    status = cli_device_from_flag("train", f.device, &f.config.device);
    if (status) return status;
    gc_set_weight_packing(f.weight_packing == CLI_PACKING_ON);
    report r = {.first_loss = NAN, .last_loss = NAN};
    f.config.on_step = on_step;
    f.config.on_eval = on_eval;
    f.config.user = &r;
    gc_trainer *trainer;
    gc_status made = f.resume ? gc_trainer_resume(&f.config, &trainer) : gc_trainer_new(&f.config, &trainer);
    if (made != GC_OK) return cli_fail("train", made == GC_ERR_CONFIG ? 2 : 1, "%s", gc_last_error());
    status = train(trainer, &f, &r);
    gc_trainer_free(trainer);
    return status;
}
