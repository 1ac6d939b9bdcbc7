/* Counter-based random numbers: the raw Philox stream, and the uniform and normal ops,
 * which check their arguments, allocate and dispatch to the backend's random kernel.
 * The arithmetic lives in philox_impl.h, shared with the kernels. */
#include <math.h>

#include "backend.h"
#include "gradcache/random.h"
#include "philox_impl.h"

void gc_philox4x32(const uint32_t counter[4], const uint32_t key[2], int rounds, uint32_t out[4]) {
    if (rounds < 0) gc_fatal("philox4x32: %d rounds, need at least 0", rounds);
    gc_philox_block(counter, key, rounds, out);
}

uint32_t gc_philox_word(uint64_t seed, uint64_t w) {
    gc_philox_reader reader = gc_philox_reader_start(seed);
    return gc_philox_read(&reader, w);
}

uint64_t gc_uniform_words(int64_t n) {
    if (n < 0) gc_fatal("uniform_words: negative element count %lld", (long long)n);
    return (uint64_t)n;
}

uint64_t gc_normal_words(int64_t n) {
    if (n < 0) gc_fatal("normal_words: negative element count %lld", (long long)n);
    return 2 * (uint64_t)n;
}

/* A new tensor filled by the backend's random kernel (a, b as in backend.h). */
static gc_tensor *random_tensor(const char *op, int ndim, const int64_t *shape, gc_dtype dtype,
                                gc_device device, gc_random_kind kind, uint64_t seed,
                                uint64_t offset, double a, double b) {
    char text[96];
    if (!gc_dtype_is_float(dtype))
        gc_fatal("%s: needs a floating-point dtype, got %s for shape %s", op, gc_dtype_name(dtype),
                 gc_shape_str(ndim, shape, text, sizeof text));
    gc_tensor *t = gc_empty(ndim, shape, dtype, device);
    if (!t) return NULL;
    gc_backend_for(device)->random(gc_data(t), (size_t)gc_numel(t), dtype, kind, seed, offset, a,
                                   b);
    return t;
}

gc_tensor *gc_uniform(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device,
                      double lo, double hi, uint64_t seed, uint64_t offset) {
    /* a finite width keeps (hi - lo) u finite, so no nan can come out */
    if (!(lo <= hi) || !isfinite(hi - lo))
        gc_fatal("uniform: bad range [%g, %g): need finite lo <= hi", lo, hi);
    return random_tensor("uniform", ndim, shape, dtype, device, GC_RANDOM_UNIFORM, seed, offset,
                         lo, hi);
}

gc_tensor *gc_normal(int ndim, const int64_t *shape, gc_dtype dtype, gc_device device,
                     double mean, double std, uint64_t seed, uint64_t offset) {
    if (!isfinite(mean) || !isfinite(std) || std < 0)
        gc_fatal("normal: bad mean %g or std %g: need both finite and std >= 0", mean, std);
    return random_tensor("normal", ndim, shape, dtype, device, GC_RANDOM_NORMAL, seed, offset,
                         mean, std);
}
