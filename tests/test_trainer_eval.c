/* Evaluation during a run (--eval-every: gc_trainer_config.eval_*, train/trainer_eval.c), on
 * the 64 pairs of tests/fixtures/word_pairs.tsv (train and evaluation alike) and a BEIR-format
 * folder made of them: evaluations at every N steps and the last, in the log and on_eval; the
 * weights bit for bit those of a run without; OUT/best/ the best evaluation's model, which gives
 * the logged figure again, replaced only by a better one; --early-stop at the K-th evaluation
 * without improvement, saved, and a resumed run that stays stopped; a resumed run keeping its
 * best and its count; a best moved aside by a killed run put back; settings refused in one line
 * before anything is written. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint_files.h"
#include "gradcache/files.h"
#include "gradcache/train.h"
#include "trainer_run.h"

static char folder[] = "/tmp/test_trainer_eval_XXXXXX";

/* What on_eval saw. */
typedef struct evaluations {
    int count;
    gc_eval_record records[16];
} evaluations;

static void remember(void *user, const gc_eval_record *record) {
    evaluations *seen = user;
    if (seen->count < 16) seen->records[seen->count] = *record;
    seen->count++;
}

/* The tiny run of trainer_run.h, `steps` steps, evaluated on the pairs every `every` steps. */
static gc_trainer_config eval_run(const char *name, int64_t steps, int64_t every, char *out, size_t size) {
    gc_trainer_config config = gc_test_small_run(folder, name, steps, out, size);
    config.eval_every = every;
    config.eval_data = PAIRS;
    config.on_eval = remember;
    return config;
}

/* A fresh run of config to its stop, its evaluations into *seen. */
static gc_trainer_info run(gc_trainer_config config, bool resume, evaluations *seen) {
    *seen = (evaluations){0};
    config.user = seen;
    gc_trainer *trainer;
    gc_status made = resume ? gc_trainer_resume(&config, &trainer) : gc_trainer_new(&config, &trainer);
    REQUIRE(made == GC_OK);
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    gc_trainer_info info = gc_trainer_get_info(trainer);
    gc_trainer_free(trainer);
    return info;
}

/* The file out/name's text (free it), "" when missing. */
static char *read_text(const char *out, const char *name) {
    char path[PATH_MAX];
    size_t size = 0;
    unsigned char *bytes = gc_test_read_bytes(gc_test_path(path, out, name), &size);
    char *text = malloc(size + 1);
    REQUIRE(text);
    if (bytes) memcpy(text, bytes, size);
    text[size] = '\0';
    free(bytes);
    return text;
}

/* The number after "key": in text, NAN when absent. */
static double number_after(const char *text, const char *key) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    const char *at = strstr(text, quoted);
    return at ? strtod(at + strlen(quoted), NULL) : NAN;
}

/* The log's evaluation lines, each cut before its "seconds" (the one value that differs
 * between runs), into lines[]; returns how many. */
static int eval_lines(const char *out, char lines[][512], int most) {
    char *log = read_text(out, "log.jsonl");
    int count = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "{\"eval\":", 8) != 0 || count == most) continue;
        char *seconds = strstr(line, ",\"seconds\"");
        if (seconds) *seconds = '\0';
        snprintf(lines[count++], 512, "%s", line);
    }
    free(log);
    return count;
}

/* Every 2 steps and at the last (5): three evaluations, logged after their steps with every
 * measure; the best the first strict maximum; OUT/best/ loads and gives its figure again. */
static void test_evaluations(void) {
    char out[256];
    evaluations seen;
    gc_trainer_config config = eval_run("every2", 5, 2, out, sizeof out);
    config.eval_limit = 48;
    gc_trainer_info info = run(config, false, &seen);
    CHECK_MSG(seen.count == 3, "%d evaluations", seen.count);
    int64_t want_steps[] = {2, 4, 5};
    double best = -1;
    int64_t best_step = 0;
    for (int i = 0; i < 3 && i < seen.count; i++) {
        const gc_eval_record *r = &seen.records[i];
        CHECK_MSG(r->step == want_steps[i], "evaluation %d after step %lld", i, (long long)r->step);
        CHECK(r->queries == 48 && !strcmp(r->names[r->metric], "mrr") && r->count == 3);
        CHECK_MSG(r->best == (r->values[r->metric] > best), "step %lld: best %d", (long long)r->step, r->best);
        if (r->best) best = r->values[r->metric], best_step = r->step;
        CHECK(r->best_step == best_step && r->best_value == best && !r->stopped);
    }
    CHECK(info.best_step == best_step && info.best_value == best && !strcmp(info.eval_metric, "mrr"));
    /* the log: a line per evaluation, after its step's line, the figures exactly */
    char *log = read_text(out, "log.jsonl");
    const char *step2 = strstr(log, "{\"step\":2,"), *eval2 = strstr(log, "{\"eval\":{\"step\":2,");
    const char *step3 = strstr(log, "{\"step\":3,");
    CHECK(step2 && eval2 && step3 && step2 < eval2 && eval2 < step3);
    free(log);
    char lines[8][512];
    CHECK(eval_lines(out, lines, 8) == 3);
    for (int i = 0; i < 3 && i < seen.count; i++)
        CHECK_MSG(number_after(lines[i], "mrr") == seen.records[i].values[0], "%s", lines[i]);
    /* OUT/best/: the model of the best step, which gives the logged figure again */
    char *summary = read_text(out, "best/best.json");
    CHECK_MSG(number_after(summary, "step") == (double)best_step && number_after(summary, "mrr") == best, "%s",
              summary);
    free(summary);
    char best_dir[PATH_MAX];
    gc_dual_encoder model;
    REQUIRE(gc_dual_encoder_load(gc_test_path(best_dir, out, "best"), 0, gc_cpu(), &model) == GC_OK);
    gc_pairs pairs;
    REQUIRE(gc_pairs_read(PAIRS, &pairs) == GC_OK);
    gc_retrieval_metrics metrics;
    REQUIRE(gc_retrieval_evaluate_pairs(&model, &pairs, 48, 8, &metrics) == GC_OK);
    CHECK_MSG(metrics.mrr == best, "OUT/best/ gives MRR %.17g, the log %.17g", metrics.mrr, best);
    gc_pairs_free(&pairs);
    gc_dual_encoder_free(&model);
}

/* Evaluating changes nothing a step computes: the weights after 4 steps (dropout on) are the
 * bits of a run without evaluation. */
static void test_same_weights(void) {
    char with[256], without[256], a[PATH_MAX], b[PATH_MAX];
    evaluations seen;
    run(eval_run("with", 4, 1, with, sizeof with), false, &seen);
    CHECK(seen.count == 4);
    gc_trainer_config plain = gc_test_small_run(folder, "without", 4, without, sizeof without);
    run(plain, false, &seen);
    CHECK(seen.count == 0);
    CHECK_MSG(gc_test_same_file_bytes(gc_test_path(a, with, "model.safetensors"), gc_test_path(b, without, "model.safetensors")),
              "evaluating every step changed the weights");
}

/* An lr far below the weights' rounding leaves the model as it was: every evaluation ties the
 * first, which is no improvement. --early-stop 2: the best stays step 1's (a tie does not
 * replace it), and the run stops at step 3, saved there; resumed, it stays stopped. */
static void test_early_stop(void) {
    char out[256], path[PATH_MAX];
    evaluations seen;
    gc_trainer_config config = eval_run("early", 10, 1, out, sizeof out);
    config.lr = 1e-12;
    config.early_stop = 2;
    config.save_every = 0;
    gc_trainer_info info = run(config, false, &seen);
    CHECK_MSG(seen.count == 3 && info.step == 3 && info.early_stopped == 3, "%d evaluations, step %lld", seen.count,
              (long long)info.step);
    for (int i = 0; i < 3 && i < seen.count; i++) {
        CHECK(seen.records[i].best == (i == 0) && seen.records[i].best_step == 1);
        CHECK(seen.records[i].since_best == i && seen.records[i].stopped == (i == 2));
        CHECK(seen.records[i].values[0] == seen.records[0].values[0]);
    }
    char *summary = read_text(out, "best/best.json");
    CHECK_MSG(number_after(summary, "step") == 1, "%s", summary);
    free(summary);
    char *log = read_text(out, "log.jsonl");
    CHECK(strstr(log, "{\"step\":4,") == NULL && strstr(log, "\"early_stop\":true"));
    free(log);
    CHECK(access(gc_test_path(path, out, "checkpoint.safetensors"), F_OK) == 0);
    /* resumed: stopped where it was, no step taken, and no step to take */
    info = run(config, true, &seen);
    CHECK(seen.count == 0 && info.step == 3 && info.stop_step == 3 && info.early_stopped == 3 && info.best_step == 1);
    gc_trainer *trainer;
    config.user = &seen;
    REQUIRE(gc_trainer_resume(&config, &trainer) == GC_OK);
    CHECK(gc_trainer_step(trainer, NULL) == GC_ERR_CONFIG);
    CHECK_MSG(strstr(gc_last_error(), "step 4: the run stopped early at step 3"), "%s", gc_last_error());
    gc_clear_error();
    gc_trainer_free(trainer);
}

/* Stopped after step 3 (checkpoint), resumed to 6: the evaluations and OUT/best/ of the
 * uninterrupted run, byte for byte; with the model left unchanged (the lr of test_early_stop),
 * a resumed run that forgot its best would take step 4's tie for a new best, and one that
 * forgot its count would not stop at step 5 with --early-stop 4. */
static void test_resume(void) {
    for (int frozen = 0; frozen < 2; frozen++) {
        char straight[256], resumed[256], a[PATH_MAX], b[PATH_MAX];
        evaluations seen;
        gc_trainer_config config = eval_run(frozen ? "frozen_straight" : "straight", 6, 1, straight, sizeof straight);
        if (frozen) config.lr = 1e-12, config.early_stop = 4;
        gc_trainer_info info = run(config, false, &seen);
        CHECK(info.step == (frozen ? 5 : 6));
        config.out = resumed;
        snprintf(resumed, sizeof resumed, "%s/%s", folder, frozen ? "frozen_resumed" : "resumed");
        config.stop_after = 3;
        run(config, false, &seen);
        config.stop_after = 0;
        info = run(config, true, &seen);
        CHECK_MSG(seen.count == (frozen ? 2 : 3), "%d evaluations after resuming", seen.count);
        CHECK(info.early_stopped == (frozen ? 5 : 0));
        char want[8][512], got[8][512];
        int n = eval_lines(straight, want, 8), n_resumed = eval_lines(resumed, got, 8);
        CHECK_MSG(n == (frozen ? 5 : 6) && n_resumed == n, "%d evaluations logged, resumed %d", n, n_resumed);
        for (int i = 0; i < n && i < n_resumed; i++) CHECK_MSG(!strcmp(want[i], got[i]), "%s\nresumed: %s", want[i], got[i]);
        const char *files[] = {"best/best.json", "best/model.safetensors", "model.safetensors"};
        for (int i = 0; i < 3; i++)
            CHECK_MSG(gc_test_same_file_bytes(gc_test_path(a, straight, files[i]), gc_test_path(b, resumed, files[i])),
                      "%s differs from the uninterrupted run's", b);
        if (!frozen) {
            /* killed between moving its best aside and putting the new one in place: the next
             * start puts the old one back */
            char moved[PATH_MAX];
            REQUIRE(rename(gc_test_path(a, resumed, "best"), gc_test_path(moved, resumed, "best.old")) == 0);
            gc_trainer *trainer;
            REQUIRE(gc_trainer_resume(&config, &trainer) == GC_OK);
            gc_trainer_free(trainer);
            CHECK(access(moved, F_OK) != 0 && gc_test_same_file_bytes(gc_test_path(a, straight, files[0]),
                                                              gc_test_path(b, resumed, files[0])));
        }
    }
}

/* A tiny BEIR-format folder of the pairs (queries the definitions, the corpus the words, no dev
 * qrels: test's are evaluated): nDCG@10 decides by default, and OUT/best/ gives it again. */
static void test_beir(void) {
    char beir[PATH_MAX], path[PATH_MAX], out[256];
    gc_test_path(beir, folder, "beir");
    REQUIRE(mkdir(beir, 0777) == 0 && mkdir(gc_test_path(path, beir, "qrels"), 0777) == 0);
    gc_pairs pairs;
    REQUIRE(gc_pairs_read(PAIRS, &pairs) == GC_OK);
    FILE *corpus = fopen(gc_test_path(path, beir, "corpus.jsonl"), "w");
    FILE *queries = fopen(gc_test_path(path, beir, "queries.jsonl"), "w");
    FILE *qrels = fopen(gc_test_path(path, beir, "qrels/test.tsv"), "w");
    REQUIRE(corpus && queries && qrels);
    fprintf(qrels, "query-id\tcorpus-id\tscore\n");
    for (int64_t i = 0; i < pairs.count; i++) {
        fprintf(queries, "{\"_id\":\"q%lld\",\"text\":\"%s\"}\n", (long long)i, gc_pairs_text(&pairs, i, 0));
        fprintf(corpus, "{\"_id\":\"d%lld\",\"text\":\"%s\"}\n", (long long)i, gc_pairs_text(&pairs, i, 1));
        fprintf(qrels, "q%lld\td%lld\t1\n", (long long)i, (long long)i);
    }
    REQUIRE(fclose(corpus) == 0 && fclose(queries) == 0 && fclose(qrels) == 0);
    gc_pairs_free(&pairs);
    evaluations seen;
    gc_trainer_config config = eval_run("beir_run", 2, 1, out, sizeof out);
    config.eval_data = beir;
    gc_trainer_info info = run(config, false, &seen);
    CHECK(seen.count == 2 && !strcmp(info.eval_metric, "ndcg@10") && seen.records[0].count == 5);
    gc_dual_encoder model;
    REQUIRE(gc_dual_encoder_load(gc_test_path(path, out, "best"), 0, gc_cpu(), &model) == GC_OK);
    gc_beir data;
    REQUIRE(gc_beir_read(beir, "test", &data) == GC_OK);
    gc_beir_eval_options options = {.k = 100, .batch = 8, .block = 8192};
    gc_beir_result result;
    REQUIRE(gc_beir_evaluate(&model, &data, &options, &result) == GC_OK);
    CHECK_MSG(result.mean.ndcg_at_10 == info.best_value, "OUT/best/ gives nDCG@10 %.17g, the log %.17g",
              result.mean.ndcg_at_10, info.best_value);
    gc_beir_result_free(&result);
    gc_beir_free(&data);
    gc_dual_encoder_free(&model);
    /* a pair set's measure for a BEIR folder: a setting that cannot work */
    config.eval_metric = "mrr";
    snprintf(out, sizeof out, "%s/beir_refused", folder);
    gc_test_expect_refused(&config, "--eval-metric mrr: ");
}

static void test_refused(void) {
    char out[256];
    gc_trainer_config config = eval_run("refused", 2, 1, out, sizeof out);
    config.eval_data = NULL;
    gc_test_expect_refused(&config, "--eval-every needs --eval-data");
    config.eval_data = PAIRS;
    config.eval_every = 0;
    config.early_stop = 2;
    gc_test_expect_refused(&config, "need --eval-every");
    config.eval_every = 1;
    config.early_stop = 0;
    config.eval_metric = "ndcg@10";
    gc_test_expect_refused(&config, "--eval-metric ndcg@10: " PAIRS " is a pair file");
    config.eval_metric = NULL;
    /* a missing file: the reader's status, its line, nothing written */
    config.eval_data = GC_TEST_FIXTURES "/missing.tsv";
    gc_trainer *trainer;
    CHECK(gc_trainer_new(&config, &trainer) == GC_ERR_IO && trainer == NULL);
    CHECK_MSG(strncmp(gc_last_error(), "--eval-data: " GC_TEST_FIXTURES "/missing.tsv", 20) == 0, "%s",
              gc_last_error());
    CHECK(access(out, F_OK) != 0);
    gc_clear_error();
}

int main(void) {
    REQUIRE(mkdtemp(folder));
    test_refused();
    test_evaluations();
    test_same_weights();
    test_early_stop();
    test_resume();
    test_beir();
    if (gc_test_failures == 0) REQUIRE(gc_folder_remove(folder) == GC_OK); /* else left to look at */
    return gc_test_result();
}
