/* Random generators and RNG contexts.
 *
 * A generator is just a Philox stream name and a position in it: (seed, offset), the
 * offset counting 32-bit words (see gradcache/random.h). Each device has a default
 * generator; every random op of the nn layer (dropout, initialisation) takes its words from
 * a generator and advances it by exactly the number it used, so the same program with the
 * same seed draws the same numbers on the CPU and on CUDA.
 *
 * An RNG context (the reference's RandContext) is a snapshot of every device's generator.
 * Replaying it makes the ops inside the replay draw bitwise the same numbers as when it was
 * captured; ending the replay puts every generator back where it was before the replay,
 * so the program's stream continues as if the replay had not happened (it is not rewound).
 * GradCache captures a context before each chunk's first forward and replays it for the
 * second, so that both see the same dropout masks. */
#ifndef GRADCACHE_RNG_H
#define GRADCACHE_RNG_H

#include <stdint.h>

#include "gradcache/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_generator {
    uint64_t seed;
    uint64_t offset; /* the next unused word of the stream */
} gc_generator;

/* The default generator of a device (process-wide, not thread-safe). Initially seed 0. */
gc_generator *gc_default_generator(gc_device device);
/* Sets every device's default generator to (seed, 0). */
void gc_manual_seed(uint64_t seed);
/* Reserves `words` words of g's stream: returns the offset to draw them from and advances
 * g past them. */
uint64_t gc_generator_take(gc_generator *g, uint64_t words);
/* The seed of stream `index` of a family named by `seed` (splitmix64's finaliser of seed +
 * index times the golden ratio, Steele et al.): unrelated streams for neighbouring seeds and
 * indices, e.g. the weights, dropout and data order of a run, or each rank's dropout. */
uint64_t gc_derive_seed(uint64_t seed, uint64_t index);

typedef struct gc_rng_context {
    gc_generator devices[1 + GC_MAX_CUDA_DEVICES]; /* [0] the CPU, [1 + i] cuda:i */
} gc_rng_context;

/* A snapshot of every device's default generator. */
gc_rng_context gc_rng_capture(void);
/* Sets every default generator to a snapshot (rewinding or fast-forwarding them). */
void gc_rng_restore(const gc_rng_context *context);
/* Sets every default generator to the snapshot; returns the state to restore with
 * gc_rng_replay_end(). Replays do not nest across each other's ends out of order. */
gc_rng_context gc_rng_replay_begin(const gc_rng_context *context);
void gc_rng_replay_end(const gc_rng_context *saved);

#ifdef __cplusplus
}
#endif
#endif
