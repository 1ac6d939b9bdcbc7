/* The small run the trainer's tests start from (test_trainer.c, test_trainer_losses.c): the
 * tiny preset on the 64 pairs of tests/fixtures/word_pairs.tsv, batches of 16 with GradCache in
 * chunks of 8, in folder/name; and the check of a refused run. */
#ifndef GC_TESTS_TRAINER_RUN_H
#define GC_TESTS_TRAINER_RUN_H

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
