/* The benchmarks' model: an MLP tower (in -> hidden -> dim, gelu, dropout 0.1), two of which
 * make a dual encoder trained with in-batch InfoNCE. */
#ifndef GC_BENCH_TOWER_H
#define GC_BENCH_TOWER_H

#include <stdio.h>
#include <stdlib.h>

#include "gradcache/gradcache.h"

typedef struct tower {
    gc_linear in, out;
    gc_param_list params;
} tower;

static inline tower make_tower(int64_t in, int64_t hidden, int64_t dim, gc_device device, gc_generator *init) {
    tower t = {0};
    if (gc_linear_init(&t.in, in, hidden, true, GC_F32, device, init) != GC_OK ||
        gc_linear_init(&t.out, hidden, dim, true, GC_F32, device, init) != GC_OK) {
        fprintf(stderr, "tower: %s\n", gc_last_error());
        exit(1);
    }
    gc_linear_params(&t.in, "in", &t.params);
    gc_linear_params(&t.out, "out", &t.params);
    return t;
}

static inline gc_tensor *tower_forward(void *state, const gc_batch *chunk) {
    tower *t = state;
    gc_tensor *h = gc_linear_forward(&t->in, chunk->tensors[0]);
    gc_tensor *a = gc_gelu_tanh(h);
    gc_tensor *d = gc_nn_dropout(a, 0.1, true);
    gc_tensor *out = gc_linear_forward(&t->out, d);
    gc_tensor_release(h);
    gc_tensor_release(a);
    gc_tensor_release(d);
    return out;
}

static inline void free_tower(tower *t) {
    gc_linear_free(&t->in);
    gc_linear_free(&t->out);
    gc_param_list_free(&t->params);
}

#endif
