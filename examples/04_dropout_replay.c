/* Step 4: randomness you can replay. Dropout draws its mask from the device's default
 * generator, a Philox stream position (seed, offset) that it advances. An RNG context is a
 * snapshot of every device's generator: replaying it makes the ops inside draw the very same
 * numbers again, and ending the replay puts the generators back where they were. That is how
 * Gradient Cache's second pass over a chunk sees the dropout masks of its first.
 * Build: cc 04_dropout_replay.c $(pkg-config --cflags --libs gradcache). Exit status 0 when
 * the replayed mask equals the first bit for bit, a second draw does not, and the generator
 * ends the replay where it was. */
#include <stdio.h>
#include <string.h>

#include <gradcache/gradcache.h>

enum { N = 4096 };

/* How many elements of a and b ([N] f32) differ. */
static int differing(const gc_tensor *a, const gc_tensor *b) {
    const float *x = gc_data(a), *y = gc_data(b);
    int count = 0;
    for (int i = 0; i < N; i++) count += memcmp(&x[i], &y[i], sizeof *x) != 0;
    return count;
}

int main(void) {
    gc_manual_seed(2024);
    gc_tensor *x = gc_ones(GC_SHAPE(N), GC_F32, gc_cpu());
    gc_rng_context before_first = gc_rng_capture();
    gc_tensor *first = gc_nn_dropout(x, 0.5, true); /* each element 0 or 1 / (1 - 0.5) = 2 */
    gc_tensor *second = gc_nn_dropout(x, 0.5, true); /* the stream moved on: another mask */

    uint64_t offset_before_replay = gc_default_generator(gc_cpu())->offset;
    gc_rng_context resume = gc_rng_replay_begin(&before_first);
    gc_tensor *replayed = gc_nn_dropout(x, 0.5, true); /* the first mask again */
    gc_rng_replay_end(&resume);
    uint64_t offset_after_replay = gc_default_generator(gc_cpu())->offset;

    double kept = 0;
    for (int i = 0; i < N; i++) kept += ((const float *)gc_data(first))[i] != 0;
    int replay_vs_first = differing(first, replayed), second_vs_first = differing(first, second);
    printf("the first mask keeps %.1f%% of the elements; the replayed mask differs from it in %d elements, a "
           "second draw in %d\n", 100 * kept / N, replay_vs_first, second_vs_first);
    printf("the CPU's generator was at word %llu before the replay and is at %llu after it\n",
           (unsigned long long)offset_before_replay, (unsigned long long)offset_after_replay);
    bool right = replay_vs_first == 0 && second_vs_first > 0 && offset_after_replay == offset_before_replay;
    printf("example 04_dropout_replay: %s\n", right ? "ok" : "WRONG");
    gc_tensor *all[] = {x, first, second, replayed};
    for (int i = 0; i < 4; i++) gc_tensor_release(all[i]);
    gc_shutdown();
    return right ? 0 : 1;
}
