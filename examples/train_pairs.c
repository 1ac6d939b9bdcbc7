/* Trains a dual text encoder on a pair file (one `query<TAB>positive[<TAB>negative...]` line
 * per example) with Gradient Cache, as `gradcache train` does, into a run folder: 4 steps of 16
 * pairs, each encoded in chunks of 4 queries and 8 passages, so that only a chunk's activations
 * are alive at once while every query still sees all 16 passages as negatives. The run stops
 * after step 2 as if interrupted (its checkpoint written), resumes from the run folder for
 * steps 3 and 4 (bit for bit what an uninterrupted run computes), and the saved model is loaded
 * back and evaluated: Recall@1, Recall@10 and MRR of each query's positive among all of them.
 * Build: cc train_pairs.c $(pkg-config --cflags --libs gradcache)
 * Usage: train_pairs PAIRS.tsv RUN_FOLDER (the pairs: 16 or more) */
#include <stdbool.h>
#include <stdio.h>

#include <gradcache/gradcache.h>

/* Called after every step (gc_trainer_config.on_step): what the run's log.jsonl records. */
static void print_step(void *user, const gc_step_record *record) {
    (void)user;
    printf("step %lld  loss %.4f  lr %.2e  peak %zu bytes  chunks %lld,%lld\n", (long long)record->step,
           record->loss, record->lr, record->peak_bytes, (long long)record->chunk_sizes[0],
           (long long)record->chunk_sizes[1]);
}

/* The library prints nothing: a failure is one line in gc_last_error(). */
static int fail(const char *doing) {
    fprintf(stderr, "train_pairs: %s: %s\n", doing, gc_last_error());
    return 1;
}

/* A fresh run, or (resume) the one whose checkpoint is in config->out, trained up to its stop
 * step; the checkpoint and the model are saved there. */
static int train(const gc_trainer_config *config, bool resume) {
    gc_trainer *trainer;
    gc_status status = resume ? gc_trainer_resume(config, &trainer) : gc_trainer_new(config, &trainer);
    if (status != GC_OK) return fail(resume ? "resuming" : "starting");
    gc_trainer_info info = gc_trainer_get_info(trainer);
    printf("%s at step %lld of %lld, to stop after step %lld\n", resume ? "resumed" : "started",
           (long long)info.step, (long long)info.total_steps, (long long)info.stop_step);
    status = gc_trainer_run(trainer);
    gc_trainer_free(trainer);
    return status == GC_OK ? 0 : fail("training");
}

/* The model saved in the run folder, ranking each query's positive among every positive. */
static int evaluate(const char *pairs_path, const char *run) {
    gc_dual_encoder model;
    if (gc_dual_encoder_load(run, 0, gc_cpu(), &model) != GC_OK) return fail("loading the model");
    gc_pairs pairs;
    gc_retrieval_metrics metrics;
    gc_status status = gc_pairs_read(pairs_path, &pairs);
    if (status == GC_OK) status = gc_retrieval_evaluate_pairs(&model, &pairs, pairs.count, 64, &metrics);
    if (status == GC_OK)
        printf("Recall@1 %.4f  Recall@10 %.4f  MRR %.4f  (%lld queries, %lld candidates)\n", metrics.recall_at_1,
               metrics.recall_at_10, metrics.mrr, (long long)metrics.queries, (long long)metrics.candidates);
    gc_pairs_free(&pairs);
    gc_dual_encoder_free(&model);
    return status == GC_OK ? 0 : fail("evaluating");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PAIRS.tsv RUN_FOLDER\n", argv[0]);
        return 2;
    }
    gc_trainer_config config = gc_trainer_config_default(); /* the gradcache program's defaults */
    config.data = argv[1];
    config.out = argv[2];      /* log.jsonl, checkpoint.safetensors, model.safetensors */
    config.model_size = 0;     /* gc_model_size_names[0]: "tiny" */
    config.max_length = 24;    /* tokens per text */
    config.batch_size = 16;
    config.gc = true;
    config.chunk_sizes[0] = 4; /* query rows per chunk */
    config.chunk_sizes[1] = 8; /* passage rows per chunk */
    config.steps = 4;
    config.lr = 1e-3;
    config.on_step = print_step;
    config.stop_after = 2; /* as if interrupted after step 2 */
    int status = train(&config, false);
    config.stop_after = 0;
    if (status == 0) status = train(&config, true);
    if (status == 0) status = evaluate(argv[1], argv[2]);
    gc_shutdown(); /* the CPU kernels' threads joined: nothing of the library outlives main */
    return status;
}
