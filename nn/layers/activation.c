/* The activations a layer can be configured with, by name. */
#include "gradcache/nn.h"
#include "gradcache/ops.h"

gc_tensor *gc_activate(const gc_tensor *x, gc_activation activation) {
    switch (activation) {
    case GC_ACT_GELU_ERF: return gc_gelu_erf(x);
    case GC_ACT_GELU_TANH: return gc_gelu_tanh(x);
    case GC_ACT_RELU: return gc_relu(x);
    case GC_ACT_TANH: return gc_tanh(x);
    }
    gc_fatal("activate: unknown activation %d", (int)activation);
}
