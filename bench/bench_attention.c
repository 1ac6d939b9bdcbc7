/* Attention's core on the CPU, fused (gc_attention_fused) against the composed ops (matmul,
 * softmax_scaled, dropout, matmul), forward and backward through autograd, at the trainer's
 * presets' shapes: B = 128 texts of T = 32 tokens, 4 heads of Dh = 16 (tiny) and 32 (small),
 * a padding mask, dropout 0.1; and 8 texts of T = 512 (Dh 32), where the scores would be
 * 32 MiB. The two alternate REPS times; the medians are printed, so a
 * noisy machine's drift falls on both.
 *
 *   build/bench/bench_attention [REPS]        (default 15; GC_NUM_THREADS as for any run) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "gradcache/gradcache.h"

#define MAX_REPS 101

typedef struct shape {
    const char *name;
    int64_t batch, heads, length, head_dim;
} shape;

typedef struct operands {
    gc_tensor *q, *k, *v, *g, *bias; /* bias [B, 1, 1, T]: the last quarter of each text padded */
} operands;

/* The layer's composed path with G = 1: the heads as a batch of [T, Dh] products. */
static gc_tensor *composed(const operands *o, const gc_attention_fused_options *options) {
    const int64_t *s = o->q->shape;
    gc_tensor *q = gc_reshape(o->q, GC_SHAPE(s[0] * s[1], s[2], s[3]));
    gc_tensor *k = gc_reshape(o->k, GC_SHAPE(s[0] * s[1], s[2], s[3]));
    gc_tensor *v = gc_reshape(o->v, GC_SHAPE(s[0] * s[1], s[2], s[3]));
    gc_tensor *scores = gc_matmul(q, k, false, true);
    gc_tensor *per_head = gc_reshape(scores, GC_SHAPE(s[0], s[1], s[2], s[2]));
    gc_tensor *probs = gc_softmax_scaled(per_head, options->scale, o->bias);
    gc_tensor *dropped = gc_dropout(probs, options->dropout, options->seed, options->offset);
    gc_tensor *flat = gc_reshape(dropped, GC_SHAPE(s[0] * s[1], s[2], s[2]));
    gc_tensor *context = gc_matmul(flat, v, false, false);
    gc_tensor *out = gc_reshape(context, 4, s);
    gc_tensor *const temporaries[] = {q, k, v, scores, per_head, probs, dropped, flat, context};
    for (int i = 0; i < 9; i++) gc_tensor_release(temporaries[i]);
    return out;
}

/* Seconds of one forward and backward. */
static double step(const operands *o, bool fused) {
    gc_attention_fused_options options = {.scale = 1 / sqrt((double)o->q->shape[3]), .dropout = 0.1, .seed = 1};
    double start = gc_seconds();
    gc_tensor *out = fused ? gc_attention_fused(o->q, o->k, o->v, o->bias, &options) : composed(o, &options);
    if (!out || gc_backward(&out, &o->g, 1) != GC_OK) {
        fprintf(stderr, "bench_attention: %s\n", gc_last_error());
        exit(1);
    }
    gc_tensor_release(out);
    return gc_seconds() - start;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "usage: bench_attention [REPS, 1 to %d]\n", MAX_REPS);
        return 2;
    }
    const shape shapes[] = {{"tiny", 128, 4, 32, 16}, {"small", 128, 4, 32, 32}, {"long", 8, 4, 512, 32}};
    const gc_device cpu = gc_cpu();
    printf("%-6s %4s %3s %4s %4s %12s %12s %8s\n", "shape", "B", "H", "T", "Dh", "composed ms", "fused ms",
           "ratio");
    for (int s = 0; s < 3; s++) {
        const shape *sh = &shapes[s];
        operands o;
        o.q = gc_normal(GC_SHAPE(sh->batch, sh->heads, sh->length, sh->head_dim), GC_F32, cpu, 0, 1, 1, 0);
        o.k = gc_normal(GC_SHAPE(sh->batch, sh->heads, sh->length, sh->head_dim), GC_F32, cpu, 0, 1, 2, 0);
        o.v = gc_normal(GC_SHAPE(sh->batch, sh->heads, sh->length, sh->head_dim), GC_F32, cpu, 0, 1, 3, 0);
        o.g = gc_normal(GC_SHAPE(sh->batch, sh->heads, sh->length, sh->head_dim), GC_F32, cpu, 0, 1, 4, 0);
        float *bias = malloc(sizeof(float) * (size_t)(sh->batch * sh->length));
        if (!o.q || !o.k || !o.v || !o.g || !bias) return 1;
        for (int64_t i = 0; i < sh->batch * sh->length; i++) bias[i] = i % sh->length < sh->length * 3 / 4 ? 0 : -10000;
        o.bias = gc_from_host(bias, GC_SHAPE(sh->batch, 1, 1, sh->length), GC_F32, cpu);
        free(bias);
        gc_set_requires_grad(o.q, true);
        gc_set_requires_grad(o.k, true);
        gc_set_requires_grad(o.v, true);
        double times[2][MAX_REPS];
        step(&o, false), step(&o, true); /* warm-up: caches, scratch, the pool's threads */
        for (int r = 0; r < reps; r++)
            for (int fused = 0; fused < 2; fused++) times[fused][r] = step(&o, fused);
        double composed_ms = 1e3 * gc_median(times[0], reps), fused_ms = 1e3 * gc_median(times[1], reps);
        printf("%-6s %4lld %3lld %4lld %4lld %12.2f %12.2f %8.2f\n", sh->name, (long long)sh->batch,
               (long long)sh->heads, (long long)sh->length, (long long)sh->head_dim, composed_ms, fused_ms,
               fused_ms / composed_ms);
        gc_tensor_release(o.q);
        gc_tensor_release(o.k);
        gc_tensor_release(o.v);
        gc_tensor_release(o.g);
        gc_tensor_release(o.bias);
    }
    gc_shutdown();
    return 0;
}
