/* What the cache's files share. */
#ifndef GC_GRADCACHE_CACHE_INTERNAL_H
#define GC_GRADCACHE_CACHE_INTERNAL_H

#include "gradcache/cache.h"

struct gc_cache {
    gc_cache_config config; /* chunk sizes updated by automatic sizing */
};

/* The representation of `model` for `input`: forward, then the representation function. */
gc_tensor *gc_cache_representation(void *model, gc_model_fn forward, const gc_batch *input,
                                   gc_representation_fn representation, void *user);
/* Model m's representation of the whole input with one graph: its forwards chunk by chunk
 * (so dropout draws exactly the masks of the cached step), concatenated with grad on. */
gc_tensor *gc_cache_forward_with_graph(const gc_cache *cache, int m, const gc_batch *input);
/* Back-propagates `seed` from `output` with the configured backward (or gc_backward). */
gc_status gc_cache_backward(gc_backward_fn backward, gc_tensor *output, gc_tensor *seed, void *user);
/* The scale a step's gradients carry: the scaler's, or 1 without one. */
double gc_cache_loss_scale(const gc_cache *cache);
/* The backward of the loss `value`, seeded with the loss scale when there is a scaler. */
gc_status gc_cache_loss_backward(const gc_cache *cache, gc_tensor *value);
/* The loss over the leaves, and (scaled) d loss / d leaf into grads[i] (new references). */
gc_status gc_cache_loss_and_cache(const gc_cache *cache, gc_tensor *const *leaves, double *loss, gc_tensor **grads);

#endif
