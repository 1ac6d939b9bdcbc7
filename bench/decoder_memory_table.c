/* bench_decoder_memory --table: the largest contrastive batch of pairs that full fine-tuning and
 * LoRA, each plain and with Gradient Cache, fit under 24 and 80 GiB at a shape's whole depth,
 * from the library's exact byte counts of the parts of a step, measured at 1 and 2 layers:
 *   - P, the parameters (and adapters), and S, AdamW's state (decoder_adamw_bytes: two f32
 *     moments per learning parameter and an f32 master of a 16-bit one; the measured mode
 *     prints it beside the measured state); both grow by the same bytes with every layer;
 *   - t(n), the transient peak of a plain forward + backward of n sequences (its graph, the
 *     backward's temporaries, the learning parameters' gradients, the dense embedding gradient
 *     of full fine-tuning), at n = 1 and 2: each layer adds the same bytes, and each sequence
 *     (the activations grow with the rows) too, so t is extrapolated in both. Full
 *     fine-tuning's peak at n = 1, 2 is its gradients' (at the backward's end, the graph
 *     mostly freed), which hides what a sequence adds; so its bytes per sequence are taken
 *     as LoRA's, whose graph holds the same activations and the adapters' f32 inputs besides
 *     (a bound from above);
 *   - the contrastive loss on N pairs with its representations' gradients: the reference
 *     through autograd (a plain step: N x N scores) fitted in N^2 from 3 sizes (its N^2 term
 *     stays below its f32 copies' linear one up to thousands of pairs, far above the plain
 *     batches here), and the tiled loss GradCache uses past 512 rows (linear) from 2.
 * A plain step of N pairs needs P + S + t(2N) + the loss; a GradCache step in chunks of c
 * sequences P + S + t(c) + a later chunk's gradient of the largest learning tensor beside
 * the running sum (the embedding table's, f32, for full fine-tuning) + the 2N cached
 * representations + the tiled loss: sums of the parts' peaks, so bounds from above (the
 * parts' peaks are not all at one moment). */
#include <math.h>
#include <stdio.h>

#include "bench_util.h"
#include "decoder_memory.h"

typedef struct step_bytes {
    double fixed;        /* P + S */
    double transient[2]; /* t(1), t(2) */
    double accumulation; /* a later chunk's gradient of the largest learning tensor, in f32, beside the sum */
    double seconds;      /* of the plain step of 2 sequences */
} step_bytes;

/* P + S and t(1), t(2) of a model of `layers` layers (t(2) only with adapters: full
 * fine-tuning's is bounded from LoRA's, see the top). */
static step_bytes measure(const options *o, int layers) {
    size_t start = bench_live();
    gc_text_encoder encoder;
    gc_param_list trainable = {0};
    decoder_model_init(&encoder, o, layers, &trainable);
    step_bytes bytes = {.fixed = (double)(bench_live() - start + decoder_adamw_bytes(&trainable))};
    for (int i = 0; i < trainable.count; i++)
        bytes.accumulation = fmax(bytes.accumulation, 4.0 * (double)gc_numel(trainable.items[i].tensor));
    double seconds;
    bytes.transient[0] = (double)decoder_plain_transient(&encoder, &trainable, 1, o, &seconds);
    bytes.transient[1] = o->lora_r ? (double)decoder_plain_transient(&encoder, &trainable, 2, o, &bytes.seconds)
                                   : bytes.transient[0];
    gc_param_list_free(&trainable);
    gc_text_encoder_free(&encoder);
    return bytes;
}

/* The transient peak of the contrastive loss's value and gradients over `pairs` random pairs
 * (representations [pairs, dim] of the dtype), tiled or the reference through autograd. */
static double loss_transient(const options *o, int64_t pairs, bool tiled) {
    int64_t dim = decoder_shape_config(o, 1).dim;
    gc_tensor *q = gc_uniform(GC_SHAPE(pairs, dim), o->dtype, gc_cpu(), -1, 1, 5, 0);
    gc_tensor *p = gc_uniform(GC_SHAPE(pairs, dim), o->dtype, gc_cpu(), -1, 1, 6, 0);
    if (!q || !p) bench_require(gc_last_status());
    gc_contrastive_options loss = {.similarity = GC_SIMILARITY_COSINE, .temperature = 0.05};
    size_t before = bench_live();
    gc_memory_reset_peak(gc_cpu());
    if (tiled) {
        double value;
        gc_tensor *grads[2] = {NULL, NULL};
        bench_require(gc_contrastive_loss_tiled(q, p, &loss, 1.0, &value, &grads[0], &grads[1]));
        gc_tensor_release(grads[0]);
        gc_tensor_release(grads[1]);
    } else {
        gc_set_requires_grad(q, true);
        gc_set_requires_grad(p, true);
        gc_tensor *value = gc_contrastive_loss(q, p, &loss);
        if (!value) bench_require(gc_last_status());
        bench_require(gc_backward(&value, NULL, 1));
        gc_tensor_release(value);
        gc_zero_grad(q);
        gc_zero_grad(p);
    }
    double transient = (double)(bench_peak() - before);
    gc_tensor_release(q);
    gc_tensor_release(p);
    return transient;
}

typedef struct method {
    const char *name;
    step_bytes whole; /* at the shape's depth */
} method;

/* x(layers) from x(1) and x(2): the same bytes per layer */
static double at_depth(double one, double two, int layers) { return one + (layers - 1) * (two - one); }

typedef struct loss_fit {
    double full[3]; /* a + b N + c N^2, the reference's */
    double tiled[2]; /* a + b N, past the tile */
} loss_fit;

static double full_loss(const loss_fit *f, double n) { return f->full[0] + f->full[1] * n + f->full[2] * n * n; }

/* The bytes of a step of N pairs, plain or cached in chunks of o->chunk sequences. */
static double step_need(const method *m, const loss_fit *f, const options *o, double pairs, bool cached) {
    const double *t = m->whole.transient;
    double per_sequence = t[1] - t[0];
    if (!cached) return m->whole.fixed + t[0] + (2 * pairs - 1) * per_sequence + full_loss(f, pairs);
    double representations = 2 * pairs * (double)decoder_shape_config(o, 1).dim * (double)gc_dtype_size(o->dtype);
    double loss = pairs > 512 ? f->tiled[0] + f->tiled[1] * pairs : full_loss(f, pairs);
    return m->whole.fixed + t[0] + (double)(o->chunk - 1) * per_sequence + m->whole.accumulation + representations +
           loss;
}

/* The largest N with step_need <= budget (0: not even one pair). */
static int64_t largest_batch(const method *m, const loss_fit *f, const options *o, double budget, bool cached) {
    if (step_need(m, f, o, 1, cached) > budget) return 0;
    int64_t low = 1, high = 2;
    while (step_need(m, f, o, (double)high, cached) <= budget) low = high, high *= 2;
    while (high - low > 1) {
        int64_t middle = low + (high - low) / 2;
        if (step_need(m, f, o, (double)middle, cached) <= budget) low = middle;
        else high = middle;
    }
    return low;
}

static const double GIB = 1024.0 * 1024.0 * 1024.0;

int decoder_memory_table(const options *given) {
    options o = *given;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it is measured: the 7B shape takes minutes */
    int depth = decoder_shape_config(&o, 0).layers, lora_r = o.lora_r ? o.lora_r : 16;
    char lora_name[32];
    snprintf(lora_name, sizeof lora_name, "LoRA r=%d", lora_r);
    method methods[2] = {{.name = "full"}, {.name = lora_name}};
    for (int m = 0; m < 2; m++) {
        o.lora_r = m ? lora_r : 0;
        step_bytes one = measure(&o, 1), two = measure(&o, 2);
        methods[m].whole.fixed = at_depth(one.fixed, two.fixed, depth);
        methods[m].whole.accumulation = one.accumulation;
        for (int n = 0; n < 2; n++) methods[m].whole.transient[n] = at_depth(one.transient[n], two.transient[n], depth);
        printf("# %s: P + S %.0f + %.0f per layer; t(1) %.0f + %.0f per layer; t(2) %.0f + %.0f per layer; "
               "plain step of 2 sequences (LoRA): %.1f s (1 layer), %.1f s (2 layers)\n",
               methods[m].name, one.fixed, two.fixed - one.fixed, one.transient[0],
               two.transient[0] - one.transient[0], one.transient[1], two.transient[1] - one.transient[1],
               one.seconds, two.seconds);
    }
    loss_fit fit;
    double full[3] = {loss_transient(&o, 8, false), loss_transient(&o, 16, false), loss_transient(&o, 32, false)};
    /* through (8, f0), (16, f1), (32, f2): second differences give c */
    fit.full[2] = ((full[2] - full[1]) / 16 - (full[1] - full[0]) / 8) / 24;
    fit.full[1] = (full[1] - full[0]) / 8 - fit.full[2] * 24;
    fit.full[0] = full[0] - fit.full[1] * 8 - fit.full[2] * 64;
    double tiled[2] = {loss_transient(&o, 600, true), loss_transient(&o, 1200, true)};
    fit.tiled[1] = (tiled[1] - tiled[0]) / 600;
    fit.tiled[0] = tiled[0] - fit.tiled[1] * 600;
    /* full fine-tuning's bytes per sequence: LoRA's (see the top) */
    double lora_per_sequence = methods[1].whole.transient[1] - methods[1].whole.transient[0];
    methods[0].whole.transient[1] = fmax(methods[0].whole.transient[1], methods[0].whole.transient[0] + lora_per_sequence);
    printf("# loss: reference %.0f + %.1f N + %.2f N^2; tiled %.0f + %.1f N (N pairs)\n", fit.full[0], fit.full[1],
           fit.full[2], fit.tiled[0], fit.tiled[1]);

    printf("# bench_decoder_memory --table --shape %s --length %lld --chunk %lld --dtype %s --lora-r %d (%d layers)\n",
           decoder_shape_name(o.shape), (long long)o.length, (long long)o.chunk, gc_dtype_name(o.dtype), lora_r,
           depth);
    printf("| %s, %s, T = %lld | P + S | largest batch (pairs) under 24 GiB | under 80 GiB |\n| --- | ---: | ---: | ---: |\n",
           decoder_shape_name(o.shape), gc_dtype_name(o.dtype), (long long)o.length);
    for (int m = 0; m < 2; m++)
        for (int cached = 0; cached < 2; cached++) {
            char way[64];
            snprintf(way, sizeof way, cached ? "Gradient Cache, chunks of %lld" : "plain", (long long)o.chunk);
            printf("| %s, %s | %.2f GiB | %lld | %lld |\n", methods[m].name, way, methods[m].whole.fixed / GIB,
                   (long long)largest_batch(&methods[m], &fit, &o, 24 * GIB, cached),
                   (long long)largest_batch(&methods[m], &fit, &o, 80 * GIB, cached));
        }
    gc_shutdown();
    return 0;
}
