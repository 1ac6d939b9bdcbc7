/* LoRA over Gradient Cache across processes (tests/lora_checks.h): in worlds of 2 and 3
 * processes forked by this test, over the TCP ring, each rank gives its own rows of the global
 * batch and draws its own dropout masks (the model's and the adapters'); the cached step's
 * adapter gradients, reduced by a bucketer over the adapters alone, equal the plain
 * full-batch step's over the gathered representations in f64 to 1e-10, for tied and separate
 * encoders, with and without layer checkpointing; the frozen base gets no gradient. */
#include "dist_spawn.h"
#include "lora_checks.h"

typedef struct lora_case {
    const char *name;
    bool tied, checkpoint_layers;
} lora_case;

static int lora_body(int rank, int world, void *arg) {
    (void)rank, (void)world;
    const lora_case *c = arg;
    gc_process_group *group = dist_test_group(60);
    check_cached_step(c->name, c->tied, c->checkpoint_layers, GC_F64, group);
    gc_process_group_free(group);
    CHECK(gc_memory_get_stats(gc_cpu()).live_bytes == 0);
    return gc_test_result();
}

int main(void) {
    const lora_case cases[] = {{"tied", true, false},
                               {"separate encoders", false, false},
                               {"separate, layer checkpointing", false, true}};
    for (int world = 2; world <= 3; world++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            CHECK_MSG(dist_all_pass(world, lora_body, (void *)&cases[i], 120), "world %d: %s", world, cases[i].name);
    return gc_test_result();
}
