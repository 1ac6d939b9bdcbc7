/* Default generators per device, and RNG contexts (see gradcache/rng.h). */
#include "gradcache/error.h"
#include "gradcache/rng.h"

static gc_rng_context generators; /* [0] the CPU, [1 + i] cuda:i; all (0, 0) at start */

gc_generator *gc_default_generator(gc_device device) {
    if (device.type == GC_DEVICE_CPU) return &generators.devices[0];
    if (device.index < 0 || device.index >= GC_MAX_CUDA_DEVICES)
        gc_fatal("rng: CUDA device index %d outside [0, %d)", device.index, GC_MAX_CUDA_DEVICES);
    return &generators.devices[1 + device.index];
}

void gc_manual_seed(uint64_t seed) {
    for (int i = 0; i < 1 + GC_MAX_CUDA_DEVICES; i++) generators.devices[i] = (gc_generator){seed, 0};
}

uint64_t gc_generator_take(gc_generator *g, uint64_t words) {
    uint64_t offset = g->offset;
    if (words > UINT64_MAX - offset) gc_fatal("rng: generator of seed %llu exhausted", (unsigned long long)g->seed);
    g->offset += words;
    return offset;
}

uint64_t gc_derive_seed(uint64_t seed, uint64_t index) {
    uint64_t z = seed + index * 0x9E3779B97F4A7C15u;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

gc_rng_context gc_rng_capture(void) { return generators; }

void gc_rng_restore(const gc_rng_context *context) { generators = *context; }

gc_rng_context gc_rng_replay_begin(const gc_rng_context *context) {
    gc_rng_context saved = generators;
    generators = *context;
    return saved;
}

void gc_rng_replay_end(const gc_rng_context *saved) { gc_rng_restore(saved); }
