/* Dropout drawing its mask from the default generator of the input's device. */
#include "gradcache/nn.h"
#include "gradcache/ops.h"

gc_tensor *gc_nn_dropout(const gc_tensor *x, double p, bool training) {
    if (!x) return NULL;
    /* A bad p is a programmer error in evaluation too, not only when it would be used. */
    char text[128];
    if (!(p >= 0 && p < 1))
        gc_fatal("nn_dropout: p = %g outside [0, 1) for %s", p, gc_tensor_str(x, text, sizeof text));
    if (!training || p == 0) return gc_tensor_retain((gc_tensor *)x);
    gc_generator *generator = gc_default_generator(x->device);
    uint64_t offset = gc_generator_take(generator, (uint64_t)gc_numel(x));
    return gc_dropout(x, p, generator->seed, offset);
}
