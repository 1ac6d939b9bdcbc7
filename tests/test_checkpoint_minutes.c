/* Checkpoints by wall time (gc_trainer_config.checkpoint_minutes, train/save_timer.h): with a
 * time so short that every step passes it, a checkpoint is written after the first step
 * already (none without it, save_every being 0); a run dropped after its second step without
 * saving (as if killed) resumes from that time-triggered checkpoint and ends with the straight
 * run's model byte for byte; a negative or infinite time is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint_files.h"
#include "gradcache/files.h"
#include "gradcache/train.h"
#include "trainer_run.h"

static char folder[] = "/tmp/test_checkpoint_minutes_XXXXXX";

/* A run of 4 steps, saving at the last step only unless `minutes` says otherwise. */
static gc_trainer_config run_of(const char *name, double minutes, char *out, size_t size) {
    gc_trainer_config config = gc_test_small_run(folder, name, 4, out, size);
    config.save_every = 0;
    config.checkpoint_minutes = minutes;
    return config;
}

static bool exists(const char *run, const char *file) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", run, file);
    return access(path, F_OK) == 0;
}

/* After one step: a checkpoint with the time rule (1e-9 minutes: every step), none without. */
static void test_first_step(void) {
    for (int timed = 0; timed < 2; timed++) {
        char out[256];
        gc_trainer_config config = run_of(timed ? "timed" : "untimed", timed ? 1e-9 : 0, out, sizeof out);
        gc_trainer *trainer;
        REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
        CHECK_MSG(gc_trainer_step(trainer, NULL) == GC_OK, "%s", gc_last_error());
        CHECK_MSG(exists(out, "checkpoint.safetensors") == (timed == 1), "%s: a checkpoint after step 1: %s", out,
                  exists(out, "checkpoint.safetensors") ? "yes" : "no");
        gc_trainer_free(trainer);
    }
}

/* Dropped after step 2 (no save of its own), resumed: the straight run's model. */
static void test_killed_resumes(void) {
    char straight[256], dropped[256], a[300], b[300];
    gc_trainer_config config = run_of("straight", 0, straight, sizeof straight);
    gc_trainer *trainer;
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(trainer);
    config = run_of("dropped", 1e-9, dropped, sizeof dropped);
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    for (int s = 0; s < 2; s++) CHECK_MSG(gc_trainer_step(trainer, NULL) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(trainer);
    config.checkpoint_minutes = 0;
    CHECK_MSG(gc_trainer_resume(&config, &trainer) == GC_OK, "%s", gc_last_error());
    if (trainer) {
        CHECK(gc_trainer_get_info(trainer).step == 2);
        CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
        gc_trainer_free(trainer);
    }
    snprintf(a, sizeof a, "%s/model.safetensors", straight);
    snprintf(b, sizeof b, "%s/model.safetensors", dropped);
    size_t size_a = 0, size_b = 0;
    unsigned char *bytes_a = gc_test_read_bytes(a, &size_a), *bytes_b = gc_test_read_bytes(b, &size_b);
    CHECK_MSG(bytes_a && bytes_b && size_a == size_b && memcmp(bytes_a, bytes_b, size_a) == 0,
              "the resumed run's model differs from the straight run's");
    free(bytes_a);
    free(bytes_b);
}

static void test_refused(void) {
    const double bad[] = {-1, INFINITY, NAN};
    for (int i = 0; i < 3; i++) {
        char out[256];
        gc_trainer_config config = run_of("refused", bad[i], out, sizeof out);
        gc_test_expect_refused(&config, "--checkpoint-minutes ");
    }
}

int main(void) {
    REQUIRE(mkdtemp(folder) != NULL);
    test_first_step();
    test_killed_resumes();
    test_refused();
    gc_folder_remove(folder);
    gc_shutdown();
    return gc_test_result();
}
