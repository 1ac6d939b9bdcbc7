/* --checkpoint-layers (gc_trainer_config.checkpoint_layers): a run with it logs the losses and
 * gradient norms of the run without it bit for bit (dropout is on: the recomputed layers replay
 * their masks), with a lower peak at every step, GradCache and plain alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer_run.h"

static char folder[] = "/tmp/test_trainer_checkpoint_layers_XXXXXX";

enum { STEPS = 2 };

typedef struct logged {
    double loss[STEPS], grad_norm[STEPS];
    size_t peak[STEPS];
} logged;

static void record(void *user, const gc_step_record *r) {
    logged *l = user;
    l->loss[r->step - 1] = r->loss;
    l->grad_norm[r->step - 1] = r->grad_norm;
    l->peak[r->step - 1] = r->peak_bytes;
}

static logged run(const char *name, bool gc, bool checkpoint_layers) {
    char out[256];
    logged l;
    memset(&l, 0, sizeof l);
    gc_trainer_config config = gc_test_small_run(folder, name, STEPS, out, sizeof out);
    config.gc = gc;
    config.checkpoint_layers = checkpoint_layers;
    config.on_step = record;
    config.user = &l;
    gc_trainer *trainer;
    REQUIRE(gc_trainer_new(&config, &trainer) == GC_OK);
    CHECK_MSG(gc_trainer_run(trainer) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(trainer);
    return l;
}

static void test_same_run_less_memory(void) {
    for (int gc = 0; gc < 2; gc++) {
        logged plain = run(gc ? "gc" : "plain", gc, false), checkpointed = run(gc ? "gc_ckpt" : "plain_ckpt", gc, true);
        for (int s = 0; s < STEPS; s++) {
            CHECK_MSG(plain.loss[s] == checkpointed.loss[s] && plain.grad_norm[s] == checkpointed.grad_norm[s],
                      "%s step %d: loss %.17g, grad norm %.17g; checkpointed %.17g, %.17g", gc ? "gc" : "plain",
                      s + 1, plain.loss[s], plain.grad_norm[s], checkpointed.loss[s], checkpointed.grad_norm[s]);
            printf("%s step %d: peak %zu bytes, checkpointed %zu\n", gc ? "gc" : "plain", s + 1, plain.peak[s],
                   checkpointed.peak[s]);
            CHECK_MSG(checkpointed.peak[s] < plain.peak[s], "%s step %d: peak %zu bytes, checkpointed %zu",
                      gc ? "gc" : "plain", s + 1, plain.peak[s], checkpointed.peak[s]);
        }
    }
}

int main(void) {
    REQUIRE(mkdtemp(folder));
    GC_TEST_CASE(test_same_run_less_memory);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", folder);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", folder);
    return gc_test_result();
}
