/* The trainer as library calls (gc_trainer of gradcache/train.h), on the 64 pairs of
 * tests/fixtures/word_pairs.tsv: settings that cannot work (--loss ring's among them) are
 * GC_ERR_CONFIG with one line and nothing written; gc_trainer_step, gc_trainer_run and the
 * on_step callback see the same steps; a run stopped, saved and resumed equals an
 * uninterrupted one byte for byte; a step past the run's last is refused. (The gradcache
 * program's use of it: test_cli_train.sh and the rest.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint_files.h"
#include "gradcache/files.h"
#include "gradcache/train.h"
#include "trainer_run.h"

static char folder[] = "/tmp/test_trainer_XXXXXX";

/* A small run in folder/name: the tiny preset, 4 steps of 16 with GradCache. */
static gc_trainer_config small_run(const char *name, char *out, size_t size) {
    return gc_test_small_run(folder, name, 4, out, size);
}


static void test_refused(void) {
    char out[256];
    gc_trainer_config config = small_run("refused", out, sizeof out);
    config.batch_size = 65;
    gc_test_expect_refused(&config, "--batch-size 65: " PAIRS " has only 64 examples");
    config.batch_size = 16;
    config.hard_negatives = 2;
    gc_test_expect_refused(&config, "--hard-negatives 2: " PAIRS " has 1 negative column");
    config.hard_negatives = 0;
    config.max_length = 1;
    gc_test_expect_refused(&config, "--max-length 1: expected at least 2");
    config.max_length = 16;
    config.data = NULL;
    gc_test_expect_refused(&config, "--data is required");
    config.data = PAIRS;
    config.model_size = 3;
    gc_test_expect_refused(&config, "--model-size 3: no such preset");
    config.model_size = 0;
    /* the ring is the cached step's, and tiled */
    config.global_loss = GC_GLOBAL_LOSS_RING;
    config.gc = false;
    gc_test_expect_refused(&config, "--loss ring needs --gc");
    config.gc = true;
    config.loss = GC_CONTRASTIVE_FULL;
    gc_test_expect_refused(&config, "--loss ring with the full loss (GC_CONTRASTIVE_FULL)");
    config.loss = GC_CONTRASTIVE_AUTO;
    config.global_loss = (gc_global_loss)3;
    gc_test_expect_refused(&config, "--loss: global_loss 3 is none of AUTO, GATHER and RING");
    config.global_loss = GC_GLOBAL_LOSS_AUTO;
    /* a missing file is no setting: the reader's status and line */
    config.data = GC_TEST_FIXTURES "/missing.tsv";
    gc_trainer *trainer;
    CHECK(gc_trainer_new(&config, &trainer) == GC_ERR_IO && trainer == NULL);
    CHECK_MSG(strncmp(gc_last_error(), "--data: " GC_TEST_FIXTURES "/missing.tsv: cannot open", 20) == 0, "%s",
              gc_last_error());
    gc_clear_error();
}

/* What on_step saw: the records of every step, in order. */
typedef struct seen {
    int count;
    gc_step_record records[8];
} seen;

static void remember(void *user, const gc_step_record *record) {
    seen *s = user;
    if (s->count < 8) s->records[s->count] = *record;
    s->count++;
}

/* gc_trainer_run and gc_trainer_step one by one compute the same steps; the callback sees each. */
static void test_steps(void) {
    char out[256], stepped_out[256];
    seen by_run = {0}, by_step = {0};
    gc_trainer_config config = small_run("run", out, sizeof out);
    config.on_step = remember;
    config.user = &by_run;
    gc_trainer *trainer;
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    gc_trainer_info info = gc_trainer_get_info(trainer);
    CHECK(info.step == 0 && info.stop_step == 4 && info.total_steps == 4 && info.world == 1 && info.rank == 0);
    CHECK(info.model && info.model->params.count > 0 && strstr(info.checkpoint_path, "/run/checkpoint.safetensors"));
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    CHECK(gc_trainer_get_info(trainer).step == 4 && by_run.count == 4);
    gc_step_record record;
    CHECK(gc_trainer_step(trainer, &record) == GC_ERR_CONFIG && strstr(gc_last_error(), "past the run's 4 steps"));
    gc_clear_error();
    gc_trainer_free(trainer);

    gc_trainer_config stepped = small_run("stepped", stepped_out, sizeof stepped_out);
    stepped.on_step = remember;
    stepped.user = &by_step;
    REQUIRE(gc_trainer_new(&stepped, &trainer) == GC_OK);
    for (int step = 1; step <= 4; step++) {
        CHECK(gc_trainer_step(trainer, &record) == GC_OK && record.step == step && record.epoch == 0);
        CHECK(by_step.count == step && by_step.records[step - 1].loss == record.loss);
        CHECK(record.loss == by_run.records[step - 1].loss && record.lr == by_run.records[step - 1].lr);
        CHECK(!strcmp(record.global_loss, "local")); /* one process: nothing gathered or passed on */
    }
    gc_trainer_free(trainer);
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/model.safetensors", out);
    snprintf(b, sizeof b, "%s/model.safetensors", stepped_out);
    CHECK(gc_test_same_file_bytes(a, b));
}

/* Stopped after step 1 and saved again by hand (a no-op save is harmless), then resumed: the
 * uninterrupted run of test_steps, byte for byte. */
static void test_resume(void) {
    char out[256], straight_out[256];
    gc_trainer_config config = small_run("resumed", out, sizeof out);
    small_run("run", straight_out, sizeof straight_out);
    config.stop_after = 1;
    gc_trainer *trainer;
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    CHECK(gc_trainer_get_info(trainer).stop_step == 1);
    CHECK(gc_trainer_run(trainer) == GC_OK && gc_trainer_save(trainer) == GC_OK);
    gc_trainer_free(trainer);
    config.stop_after = 0;
    REQUIRE(gc_trainer_resume(&config, &trainer) == GC_OK);
    CHECK(gc_trainer_get_info(trainer).step == 1);
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(trainer);
    const char *files[] = {"model.safetensors", "checkpoint.safetensors"};
    for (int i = 0; i < 2; i++) {
        char a[300], b[300];
        snprintf(a, sizeof a, "%s/%s", out, files[i]);
        snprintf(b, sizeof b, "%s/%s", straight_out, files[i]);
        CHECK_MSG(gc_test_same_file_bytes(a, b), "%s differs from the uninterrupted run's", a);
    }
    /* another setting than the checkpoint's: refused, naming it */
    config.lr = 1e-3;
    CHECK(gc_trainer_resume(&config, &trainer) == GC_ERR_FORMAT && trainer == NULL);
    CHECK_MSG(strstr(gc_last_error(), "was written with --lr 0.0005, this run has --lr 0.001"), "%s", gc_last_error());
    gc_clear_error();
}

/* A learning rate that blows the weights up: the step that sees a non-finite loss or gradient
 * stops the run with GC_ERR_NON_FINITE (what a caller can tell from a bad file or flag), one
 * line saying so, and the parameters as the last finite step left them. */
static void test_diverged(void) {
    char out[256];
    gc_trainer_config config = small_run("diverged", out, sizeof out);
    config.lr = 1e30;
    config.gc = false;
    gc_trainer *trainer;
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    gc_status status = gc_trainer_run(trainer);
    CHECK_MSG(status == GC_ERR_NON_FINITE, "status %s: %s", gc_status_name(status), gc_last_error());
    const char *message = gc_last_error();
    CHECK_MSG((strstr(message, "an inf or a nan") || strstr(message, "diverged")) && !strchr(message, '\n'), "%s",
              message);
    CHECK(gc_trainer_get_info(trainer).step < 4);
    gc_clear_error();
    gc_trainer_free(trainer);
}

int main(void) {
    REQUIRE(mkdtemp(folder));
    test_refused();
    test_steps();
    test_resume();
    test_diverged();
    if (gc_test_failures == 0) REQUIRE(gc_folder_remove(folder) == GC_OK); /* else left to look at */
    return gc_test_result();
}
