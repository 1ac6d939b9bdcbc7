/* The small run the trainer's tests start from (test_trainer.c, test_trainer_losses.c): the
 * tiny preset on the 64 pairs of tests/fixtures/word_pairs.tsv, batches of 16 with GradCache in
 * chunks of 8, in folder/name; a run's logged losses, a GradCache run against its plain twin; and
 * the check of a refused run. */
#ifndef GC_TESTS_TRAINER_RUN_H
#define GC_TESTS_TRAINER_RUN_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gradcache/train.h"

#define PAIRS GC_TEST_FIXTURES "/word_pairs.tsv"

/* `steps` steps; the run folder's path is written into out[size]. */
static inline gc_trainer_config gc_test_small_run(const char *folder, const char *name, int64_t steps, char *out,
                                                  size_t size) {
    snprintf(out, size, "%s/%s", folder, name);
    gc_trainer_config config = gc_trainer_config_default();
    config.data = PAIRS;
    config.out = out;
    config.model_size = 0;
    config.max_length = 16;
    config.batch_size = 16;
    config.gc = true;
    config.chunk_sizes[0] = config.chunk_sizes[1] = 8;
    config.steps = steps;
    return config;
}

/* The gradient norms of the last run's first two steps (gc_test_run). */
static double gc_test_norms[2];

/* The logged losses of a run's steps into ((double *)user)[0..2), their gradient norms into
 * gc_test_norms. */
static inline void gc_test_record_step(void *user, const gc_step_record *record) {
    ((double *)user)[record->step - 1] = record->loss;
    gc_test_norms[record->step - 1] = record->grad_norm;
}

/* config's run (two steps), its losses into losses[2]. */
static inline void gc_test_run(gc_trainer_config config, double losses[2]) {
    config.on_step = gc_test_record_step;
    config.user = losses;
    gc_trainer *trainer;
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(trainer);
}

/* config's run (GradCache steps; its losses into cached) logs the losses of the same run with
 * plain steps, made in folder/plain: f32, the cached step sums the same terms as the plain one
 * in other orders (1e-5). */
static inline void gc_test_expect_cached_equals_plain(const char *folder, gc_trainer_config config, const char *plain,
                                                      double cached[2]) {
    char out[256];
    double losses[2];
    gc_test_run(config, cached);
    snprintf(out, sizeof out, "%s/%s", folder, plain);
    config.out = out;
    config.gc = false;
    gc_test_run(config, losses);
    for (int s = 0; s < 2; s++)
        CHECK_MSG(fabs(cached[s] - losses[s]) <= 1e-5 * fabs(losses[s]), "%s, step %d: GradCache %.9g, plain %.9g",
                  plain, s + 1, cached[s], losses[s]);
}

/* gc_trainer_new refuses `config` with GC_ERR_CONFIG, one line containing `message`, and makes
 * nothing at config->out. */
static inline void gc_test_expect_refused(const gc_trainer_config *config, const char *message) {
    gc_trainer *trainer = (gc_trainer *)1;
    CHECK_MSG(gc_trainer_new(config, &trainer) == GC_ERR_CONFIG, "%s: %s", message, gc_last_error());
    CHECK_MSG(strstr(gc_last_error(), message) != NULL, "want '%s', got '%s'", message, gc_last_error());
    CHECK(trainer == NULL && strchr(gc_last_error(), '\n') == NULL);
    CHECK_MSG(access(config->out, F_OK) != 0, "a refused run made %s", config->out);
    gc_clear_error();
}

#endif
