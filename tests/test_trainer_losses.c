/* The trainer's losses beyond one positive (gradcache/train.h), on the 64 pairs of
 * tests/fixtures/word_pairs.tsv (query, then 2 columns): with --positives 2 both columns are
 * positives, and a GradCache run logs the plain run's losses (the second step's after the
 * first's update); --matryoshka over the whole
 * embedding alone is the plain loss, bit for bit, and adding a prefix adds its loss; settings
 * that cannot work are refused naming them; a checkpoint keeps both settings; evaluation at
 * each prefix; --no-duplicates; --accumulate; --gc-chunk-tokens; --guide. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcache/train.h"
#include "trainer_run.h"

static char folder[] = "/tmp/test_trainer_losses_XXXXXX";

/* The tiny preset (embedding 64), 2 steps of 16, GradCache in chunks of 8, in folder/name. */
static gc_trainer_config small_run(const char *name, char *out, size_t size) {
    return gc_test_small_run(folder, name, 2, out, size);
}

/* Refused, with nothing made in folder/refused (the configs below name runs already made). */
static void expect_refused(gc_trainer_config config, const char *message) {
    char out[256];
    snprintf(out, sizeof out, "%s/refused", folder);
    config.out = out;
    gc_test_expect_refused(&config, message);
}

static void test_positives(void) {
    char out[256];
    double cached[2], one[2];
    gc_trainer_config config = small_run("positives", out, sizeof out);
    config.positives = 2;
    /* one chunk per side: the plain step's dropout masks (chunked GradCache: test_loss_multi.c) */
    config.chunk_sizes[0] = 16, config.chunk_sizes[1] = 32;
    gc_test_expect_cached_equals_plain(folder, config, "positives_plain", cached);
    /* the same passages with the second column a hard negative: another loss */
    config = small_run("negative", out, sizeof out);
    config.hard_negatives = 1;
    config.chunk_sizes[0] = 16, config.chunk_sizes[1] = 32; /* the same dropout masks */
    gc_test_run(config, one);
    CHECK_MSG(fabs(one[0] - cached[0]) > 1e-3, "2 positives and 1 positive + 1 negative both give %.9g", one[0]);

    config = small_run("refused", out, sizeof out);
    config.positives = 3;
    expect_refused(config, "--positives 3: " PAIRS " has 2 columns after the query");
    config.positives = 2;
    config.hard_negatives = 1;
    expect_refused(config, "--hard-negatives 1: " PAIRS " has 0 negative columns");
    /* the ring takes several positives and Matryoshka prefixes (one process: nothing travels,
     * the same loss; two: test_dist_ring_positives.c, test_cli_train_ring.sh) */
    double ring[2];
    config = small_run("ring_positives", out, sizeof out);
    config.positives = 2;
    config.chunk_sizes[0] = 16, config.chunk_sizes[1] = 32;
    config.global_loss = GC_GLOBAL_LOSS_RING;
    config.matryoshka_count = 1;
    config.matryoshka_dims[0] = 64;
    config.matryoshka_weights[0] = 1;
    gc_test_run(config, ring);
    CHECK_MSG(ring[0] == cached[0] && ring[1] == cached[1], "--loss ring --positives 2 --matryoshka 64: %.9g, %.9g; "
              "without the ring and the prefix %.9g, %.9g", ring[0], ring[1], cached[0], cached[1]);
}

static void test_matryoshka(void) {
    char out[256];
    double plain[2], whole[2], nested[2];
    gc_trainer_config config = small_run("base", out, sizeof out);
    gc_test_run(config, plain);
    config = small_run("whole", out, sizeof out);
    config.matryoshka_count = 1;
    config.matryoshka_dims[0] = 64;
    config.matryoshka_weights[0] = 1;
    gc_test_run(config, whole);
    CHECK_MSG(whole[0] == plain[0] && whole[1] == plain[1], "the whole embedding alone: %.9g, %.9g; plain %.9g, %.9g",
              whole[0], whole[1], plain[0], plain[1]);
    config = small_run("nested", out, sizeof out);
    config.matryoshka_count = 2;
    config.matryoshka_dims[0] = 64, config.matryoshka_dims[1] = 16;
    config.matryoshka_weights[0] = config.matryoshka_weights[1] = 1;
    gc_test_run(config, nested);
    CHECK_MSG(nested[0] > plain[0] + 1, "64 and 16: %.9g, 64 alone %.9g (each term is about log 16)", nested[0],
              plain[0]);

    /* the checkpoint keeps the prefixes: resuming without them is refused */
    config.matryoshka_count = 0;
    gc_trainer *trainer;
    CHECK(gc_trainer_resume(&config, &trainer) == GC_ERR_FORMAT && trainer == NULL);
    CHECK_MSG(strstr(gc_last_error(), "flag.matryoshka"), "%s", gc_last_error());
    gc_clear_error();

    config.matryoshka_count = 1;
    config.matryoshka_dims[0] = 65;
    expect_refused(config, "--matryoshka 65: the model's embedding has 64 dimensions");
    config.matryoshka_weights[0] = -1;
    expect_refused(config, "--matryoshka: prefix 65 weighted -1");
}

/* --no-duplicates: with one positive each (all distinct here) the batches are the plain ones;
 * with both columns positives (the second column is another line's first) they are rearranged;
 * the checkpoint keeps the setting. */
static void test_no_duplicates(void) {
    char out[256];
    double plain[2], kept[2], multi[2], apart[2];
    gc_test_run(small_run("order", out, sizeof out), plain);
    gc_trainer_config config = small_run("distinct", out, sizeof out);
    config.no_duplicates = true;
    gc_test_run(config, kept);
    CHECK_MSG(kept[0] == plain[0] && kept[1] == plain[1], "distinct positives: %.9g, plain %.9g", kept[0], plain[0]);
    config = small_run("multi", out, sizeof out);
    config.positives = 2;
    gc_test_run(config, multi);
    config = small_run("apart", out, sizeof out);
    config.positives = 2;
    config.no_duplicates = true;
    gc_test_run(config, apart);
    CHECK_MSG(apart[0] != multi[0], "shared positives kept apart: the same first batch (loss %.9g)", apart[0]);
    config.no_duplicates = false;
    gc_trainer *trainer;
    CHECK(gc_trainer_resume(&config, &trainer) == GC_ERR_FORMAT && trainer == NULL);
    CHECK_MSG(strstr(gc_last_error(), "flag.no-duplicates"), "%s", gc_last_error());
    gc_clear_error();
}

/* --accumulate 2 with batches of 8: an update's loss is the mean of its two batches', which
 * are the two first steps of a run without it (the same examples, the same dropout masks, and
 * a rate too small to move an f32 parameter); a stopped and resumed run continues as one that
 * did not stop; too few examples for an update are refused. */
static void test_accumulate(void) {
    char out[256], straight[256];
    double single[2], accumulated[2], resumed[2];
    gc_trainer_config config = small_run("single", out, sizeof out);
    config.batch_size = 8, config.lr = 1e-30;
    gc_test_run(config, single);
    double single_norms[2] = {gc_test_norms[0], gc_test_norms[1]};
    config = small_run("accumulated", straight, sizeof straight);
    config.batch_size = 8, config.lr = 1e-30, config.accumulate = 2;
    gc_test_run(config, accumulated);
    /* the update's gradient is the batches' mean: its norm at most the mean of theirs (and at
     * least half their difference), where their sum would be twice that */
    double most = (single_norms[0] + single_norms[1]) / 2, least = fabs(single_norms[0] - single_norms[1]) / 2;
    CHECK_MSG(gc_test_norms[0] <= most * (1 + 1e-6) && gc_test_norms[0] >= least * (1 - 1e-6),
              "gradient norm %.9g, the batches' %.9g and %.9g", gc_test_norms[0], single_norms[0], single_norms[1]);
    double mean = (single[0] + single[1]) / 2; /* an f64 sum of two: a rounding apart */
    CHECK_MSG(fabs(accumulated[0] - mean) <= 1e-15 * mean, "accumulated %.17g, the mean of the batches' %.17g",
              accumulated[0], mean);
    config = small_run("resumed", out, sizeof out);
    config.batch_size = 8, config.lr = 1e-30, config.accumulate = 2, config.stop_after = 1;
    gc_test_run(config, resumed);
    config.stop_after = 0;
    gc_trainer *trainer;
    REQUIRE(gc_trainer_resume(&config, &trainer) == GC_OK);
    gc_step_record record;
    CHECK_MSG(gc_trainer_step(trainer, &record) == GC_OK && record.loss == accumulated[1], "resumed %.17g, straight "
              "%.17g", record.loss, accumulated[1]);
    gc_trainer_free(trainer);
    config.batch_size = 16, config.accumulate = 5;
    expect_refused(config, "--batch-size 16 times --accumulate 5: " PAIRS " has only 64 examples");
}

/* --gc-chunk-tokens: a budget above the whole batch's tokens, with one chunk per side, is the
 * run without it bit for bit (the one chunk is already as wide as its longest text); a small
 * one makes other chunks (other dropout masks: another loss); the checkpoint keeps it. */
static void test_chunk_tokens(void) {
    char out[256];
    double whole[2], unbounded[2], small[2];
    gc_trainer_config config = small_run("one_chunk", out, sizeof out);
    config.chunk_sizes[0] = config.chunk_sizes[1] = 16;
    gc_test_run(config, whole);
    config = small_run("unbounded", out, sizeof out);
    config.chunk_sizes[0] = config.chunk_sizes[1] = 16, config.chunk_tokens = 1 << 20;
    gc_test_run(config, unbounded);
    CHECK_MSG(unbounded[0] == whole[0] && unbounded[1] == whole[1], "unbounded budget %.9g, none %.9g", unbounded[0],
              whole[0]);
    config = small_run("small_budget", out, sizeof out);
    config.chunk_sizes[0] = config.chunk_sizes[1] = 16, config.chunk_tokens = 40;
    gc_test_run(config, small);
    CHECK_MSG(small[0] != whole[0], "a budget of 40 tokens changed no chunk (loss %.9g)", small[0]);
    config.chunk_tokens = 0;
    gc_trainer *trainer;
    CHECK(gc_trainer_resume(&config, &trainer) == GC_ERR_FORMAT && trainer == NULL);
    CHECK_MSG(strstr(gc_last_error(), "flag.gc-chunk-tokens"), "%s", gc_last_error());
    gc_clear_error();
}

/* --guide (a pretrained BERT with its own WordPiece tokenizer guiding the byte-level preset):
 * a GradCache run logs the plain run's losses; the guide's mask moves the loss (margin 0 masks
 * at least the queries' and positives' own rows, which the guide scores 1; margin -1e6 masks
 * nothing); --matryoshka over it; the checkpoint keeps the setting; what the guided loss does
 * not offer is refused. */
static void test_guide(void) {
    char out[256];
    double cached[2], unmasked[2];
    gc_trainer_config config = small_run("guided", out, sizeof out);
    config.guide = GC_TEST_FIXTURES "/tiny_bert";
    config.chunk_sizes[0] = config.chunk_sizes[1] = 16; /* one chunk: the plain step's dropout masks */
    gc_test_expect_cached_equals_plain(folder, config, "guided_plain", cached);
    config = small_run("unmasked", out, sizeof out);
    config.guide = GC_TEST_FIXTURES "/tiny_bert";
    config.chunk_sizes[0] = config.chunk_sizes[1] = 16;
    config.guide_margin = -1e6;
    gc_test_run(config, unmasked);
    CHECK_MSG(unmasked[0] > cached[0] + 0.1, "masking removes candidates: %.9g masked, %.9g not", cached[0],
              unmasked[0]);
    /* --matryoshka over the guided loss: the whole embedding alone is the guided loss, bit for
     * bit; with a prefix of 16 too, GradCache logs the plain run's losses */
    double whole[2], nested[2];
    config = small_run("guided_whole", out, sizeof out);
    config.guide = GC_TEST_FIXTURES "/tiny_bert";
    config.chunk_sizes[0] = config.chunk_sizes[1] = 16;
    config.matryoshka_count = 1;
    config.matryoshka_dims[0] = 64;
    config.matryoshka_weights[0] = 1;
    gc_test_run(config, whole);
    CHECK_MSG(whole[0] == cached[0] && whole[1] == cached[1], "--guide, the whole embedding alone: %.9g, %.9g; "
              "guided %.9g, %.9g", whole[0], whole[1], cached[0], cached[1]);
    config = small_run("guided_nested", out, sizeof out);
    config.guide = GC_TEST_FIXTURES "/tiny_bert";
    config.chunk_sizes[0] = config.chunk_sizes[1] = 16;
    config.matryoshka_count = 2;
    config.matryoshka_dims[0] = 64, config.matryoshka_dims[1] = 16;
    config.matryoshka_weights[0] = config.matryoshka_weights[1] = 1;
    gc_test_expect_cached_equals_plain(folder, config, "guided_nested_plain", nested);
    CHECK_MSG(nested[0] > cached[0] + 1, "--guide, 64 and 16: %.9g, 64 alone %.9g (the prefix adds a loss of its own)",
              nested[0], cached[0]);

    config.guide = NULL; /* the checkpoint keeps the guide: resuming without it is refused */
    gc_trainer *trainer;
    CHECK(gc_trainer_resume(&config, &trainer) == GC_ERR_FORMAT && trainer == NULL);
    CHECK_MSG(strstr(gc_last_error(), "flag.guide"), "%s", gc_last_error());
    gc_clear_error();
    config.guide = GC_TEST_FIXTURES "/tiny_bert";
    config.positives = 2;
    expect_refused(config, "--guide with --positives 2: the guided loss has one positive");
    config.positives = 1;
    config.guide_margin = NAN;
    expect_refused(config, "--guide-margin nan is not finite");
}

/* Evaluation at each prefix: 0 and 64 are the whole embedding, 16 a ranking of its own; a
 * prefix longer than the embedding is refused. */
static void test_evaluation_at_prefixes(void) {
    char out[256];
    small_run("base", out, sizeof out);
    gc_dual_encoder model;
    gc_pairs pairs;
    REQUIRE(gc_dual_encoder_load(out, 0, gc_cpu(), &model) == GC_OK && gc_pairs_read(PAIRS, &pairs) == GC_OK);
    const int64_t dims[3] = {0, 64, 16};
    gc_retrieval_metrics metrics[3], whole;
    REQUIRE(gc_retrieval_evaluate_pairs_at(&model, &pairs, 64, 16, dims, 3, metrics) == GC_OK);
    REQUIRE(gc_retrieval_evaluate_pairs(&model, &pairs, 64, 16, &whole) == GC_OK);
    CHECK(metrics[0].mrr == whole.mrr && metrics[1].mrr == whole.mrr && metrics[1].recall_at_1 == whole.recall_at_1);
    CHECK(metrics[2].queries == 64 && metrics[2].mrr > 0 && metrics[2].mrr != whole.mrr);
    const int64_t too_long[1] = {65};
    CHECK(gc_retrieval_evaluate_pairs_at(&model, &pairs, 64, 16, too_long, 1, metrics) == GC_ERR_CONFIG);
    CHECK_MSG(strstr(gc_last_error(), "--matryoshka 65: the embedding has 64 dimensions"), "%s", gc_last_error());
    gc_clear_error();
    gc_pairs_free(&pairs);
    gc_dual_encoder_free(&model);
}

int main(void) {
    REQUIRE(mkdtemp(folder));
    GC_TEST_CASE(test_positives);
    GC_TEST_CASE(test_matryoshka);
    GC_TEST_CASE(test_evaluation_at_prefixes);
    GC_TEST_CASE(test_no_duplicates);
    GC_TEST_CASE(test_accumulate);
    GC_TEST_CASE(test_chunk_tokens);
    GC_TEST_CASE(test_guide);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", folder);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", folder);
    return gc_test_result();
}
