/* Distillation in the trainer (gradcache/train.h: --teacher-scores, --distill, --distill-weight)
 * on the 64 pairs of tests/fixtures/word_pairs.tsv (query, positive, negative) with the teacher's
 * scores of tests/fixtures/word_pairs_teacher.tsv (line i: 3 + 0.25 (i mod 4), then
 * 1 - 0.5 (i mod 3)): a GradCache run logs the plain run's losses; each kind is a loss of its
 * own, and the weight adds the contrastive loss; the checkpoint keeps the settings; settings that
 * cannot work are refused naming them; and the teacher file's reader refuses each malformed
 * file naming the file and the line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcache/train.h"
#include "trainer_run.h"

#define TEACHER GC_TEST_FIXTURES "/word_pairs_teacher.tsv"

static char folder[] = "/tmp/test_trainer_distill_XXXXXX";

/* The tiny preset, 2 steps of 16, MarginMSE over the positive and the negative; one chunk per
 * side, so that the plain step draws the same dropout masks. */
static gc_trainer_config distill_run(const char *name, char *out, size_t size) {
    gc_trainer_config config = gc_test_small_run(folder, name, 2, out, size);
    config.hard_negatives = 1;
    config.teacher_scores = TEACHER;
    config.chunk_sizes[0] = 16, config.chunk_sizes[1] = 32;
    return config;
}

static void expect_cached_equals_plain(gc_trainer_config config, const char *name, double cached[2]) {
    char plain[64];
    snprintf(plain, sizeof plain, "%s_plain", name);
    gc_test_expect_cached_equals_plain(folder, config, plain, cached);
}

static void test_runs(void) {
    char out[256];
    double margin[2], kl[2], both[2], contrastive[2];
    gc_trainer_config config = distill_run("margin", out, sizeof out);
    expect_cached_equals_plain(config, "margin", margin);
    config = distill_run("kl", out, sizeof out);
    config.distill = GC_DISTILL_KL_DIV;
    config.distill_temperatures[0] = 0.05;
    expect_cached_equals_plain(config, "kl", kl);
    config = distill_run("both", out, sizeof out);
    config.distill_weight = 0.5;
    expect_cached_equals_plain(config, "both", both);
    config = distill_run("contrastive", out, sizeof out);
    config.teacher_scores = NULL;
    gc_test_run(config, contrastive);
    /* the first step's loss, before any update: MarginMSE of margins ~3 against cosine margins
     * under 2, the KL of two softmaxes, and contrastive + half the MarginMSE */
    CHECK_MSG(margin[0] > 1 && isfinite(kl[0]) && kl[0] > 0 && fabs(kl[0] - margin[0]) > 1e-3,
              "MarginMSE %.9g, KL %.9g", margin[0], kl[0]);
    CHECK_MSG(fabs(both[0] - (contrastive[0] + 0.5 * margin[0])) <= 1e-5 * both[0],
              "contrastive %.9g + 0.5 MarginMSE %.9g, got %.9g", contrastive[0], margin[0], both[0]);

    /* the checkpoint keeps the settings: resuming without the teacher is refused */
    config = distill_run("both", out, sizeof out);
    config.teacher_scores = NULL;
    gc_trainer *trainer;
    CHECK(gc_trainer_resume(&config, &trainer) == GC_ERR_FORMAT && trainer == NULL);
    CHECK_MSG(strstr(gc_last_error(), "flag.distill"), "%s", gc_last_error());
    gc_clear_error();
}

static void test_refused(void) {
    char out[256];
    gc_trainer_config config = distill_run("refused", out, sizeof out);
    config.hard_negatives = 0;
    gc_test_expect_refused(&config, "--teacher-scores needs --hard-negatives of at least 1");
    config.hard_negatives = 1;
    config.distill_weight = -1;
    gc_test_expect_refused(&config, "--distill-weight -1: expected a finite weight, at least 0");
    config.distill_weight = 0;
    config.distill_temperatures[1] = 0;
    gc_test_expect_refused(&config, "--teacher-temperature 0: expected a positive, finite temperature");
    config.distill_temperatures[1] = 1;
    config.positives = 2;
    gc_test_expect_refused(&config, "--teacher-scores with --positives 2: distillation scores one positive");
}

/* --- the teacher file --- */

/* `text` written to folder/teacher.tsv; its path into path[size]. */
static void write_teacher(const char *text, size_t length, char *path, size_t size) {
    snprintf(path, size, "%s/teacher.tsv", folder);
    FILE *file = fopen(path, "wb");
    REQUIRE(file && fwrite(text, 1, length, file) == length && fclose(file) == 0);
}

/* A file of 3 examples with 2 scores each is refused with GC_ERR_FORMAT and `message` after
 * "folder/teacher.tsv" (":LINE: what"). */
static void expect_malformed(const char *text, size_t length, const char *message) {
    char path[256], want[512];
    write_teacher(text, length, path, sizeof path);
    gc_teacher_scores scores = {.count = -1};
    CHECK_MSG(gc_teacher_scores_read(path, 3, 2, &scores) == GC_ERR_FORMAT, "'%s' was read", message);
    snprintf(want, sizeof want, "%s%s", path, message);
    CHECK_MSG(strcmp(gc_last_error(), want) == 0, "want '%s', got '%s'", want, gc_last_error());
    CHECK(scores.scores == NULL && scores.count == 0);
    gc_clear_error();
}
#define MALFORMED(text, message) expect_malformed(text, sizeof text - 1, message)

static void test_teacher_file(void) {
    char path[256];
    const char good[] = "1\t-2.5\r\n0.5\t1e-3\n3\t4"; /* "\r\n" and a last line without its newline */
    write_teacher(good, sizeof good - 1, path, sizeof path);
    gc_teacher_scores scores;
    REQUIRE(gc_teacher_scores_read(path, 3, 2, &scores) == GC_OK);
    const double want[6] = {1, -2.5, 0.5, 1e-3, 3, 4};
    CHECK(scores.count == 3 && scores.columns == 2 && memcmp(scores.scores, want, sizeof want) == 0);
    gc_teacher_scores_free(&scores);

    MALFORMED("1\t2\n3\t4\n", ": 2 lines for the pair file's 3 examples");
    MALFORMED("", ": 0 lines for the pair file's 3 examples");
    MALFORMED("1\t2\n3\t4\n5\t6\n7\t8\n", ":4: more lines than the pair file's 3 examples");
    MALFORMED("1\t2\n\n5\t6\n", ":2: empty line");
    MALFORMED("1\t2\n3\n5\t6\n", ":2: 1 scores where 2 are expected (the positive's, then one per hard negative of "
                                 "the pair file)");
    MALFORMED("1\t2\t3\n", ":1: more than the 2 scores expected (the positive's, then one per hard negative of the "
                           "pair file)");
    MALFORMED("1\tx\n", ":1: score 2 is not a number");
    MALFORMED("1\t\t2\n", ":1: score 2 is not a number");
    MALFORMED("1 2\n", ":1: score 1 is not a number");
    MALFORMED("1\t 2\n", ":1: score 2 is not a number");
    MALFORMED("1\t\v2\n", ":1: score 2 is not a number");
    MALFORMED("1\tnan\n", ":1: score 2 is nan");
    MALFORMED("1e999\t2\n", ":1: score 1 is inf");
    MALFORMED("1\t2\0\n", ":1: NUL byte");
    MALFORMED("1\t2\r\r\n", ":1: score 2 is not a number");
    char *long_line = malloc(GC_PAIRS_MAX_LINE + 2);
    REQUIRE(long_line);
    memset(long_line, '1', GC_PAIRS_MAX_LINE + 1);
    long_line[GC_PAIRS_MAX_LINE + 1] = '\n';
    char message[64];
    snprintf(message, sizeof message, ":1: line longer than the limit of %d bytes", GC_PAIRS_MAX_LINE);
    expect_malformed(long_line, GC_PAIRS_MAX_LINE + 2, message);
    free(long_line);

    gc_teacher_scores missing;
    CHECK(gc_teacher_scores_read("/nonexistent/teacher.tsv", 3, 2, &missing) == GC_ERR_IO);
    CHECK_MSG(strstr(gc_last_error(), "/nonexistent/teacher.tsv: cannot open"), "%s", gc_last_error());
    gc_clear_error();

    /* the trainer names the flag, and the pair file's examples */
    char out[256];
    gc_trainer_config config = distill_run("short", out, sizeof out);
    const char two[] = "1\t2\n3\t4\n";
    write_teacher(two, sizeof two - 1, path, sizeof path);
    config.teacher_scores = path;
    gc_trainer *trainer = (gc_trainer *)1;
    CHECK(gc_trainer_new(&config, &trainer) == GC_ERR_FORMAT && trainer == NULL);
    const char *error = gc_last_error();
    CHECK_MSG(strstr(error, "--teacher-scores: ") && strstr(error, ": 2 lines for the pair file's 64 examples"), "%s",
              error);
    gc_clear_error();
}

int main(void) {
    REQUIRE(mkdtemp(folder));
    GC_TEST_CASE(test_teacher_file);
    GC_TEST_CASE(test_refused);
    GC_TEST_CASE(test_runs);
    char command[512];
    snprintf(command, sizeof command, "rm -rf '%s'", folder);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", folder);
    return gc_test_result();
}
