/* Attention over packed tokens on the CPU (backend_kernels.h, attention_packed): for each text
 * and head, its n real tokens' queries, keys and values are copied out of the packed rows
 * ([n, Dh] each, a few KiB), multiplied with the own GEMM, put through gc_softmax_scaled's
 * row, and the context written back into the packed rows. The composed path unpacks q, k and
 * v to [B, T, ...] (a cat and a gather each), permutes them to [B, H, T, Dh], multiplies
 * [T, T] per head and permutes and packs the context back: eleven copies the size of the
 * hidden states per layer that this one does not make, and no padded query is computed.
 *
 * Why the bits are the composed path's (tests/test_attention_packed.c): a padded key's row of
 * the unpacked k and v is 0, so its logit there is exactly 0 and its probability exactly 0
 * (e^(-10000 - max) rounds to 0), and each context element is one chain of multiply-adds per
 * GEMM depth block, to which a padded key adds exactly 0. So here each query's logits are
 * laid out over its text's T places (0 at the padded ones) for the same softmax row, and the
 * context sums the real keys of each depth block of places in turn, as the GEMM would. */
#include <stdlib.h>
#include <string.h>

#include "gradcache/error.h"
#include "kernels_cpu.h"
#include "scratch_cpu.h"
#include "thread_pool.h"

typedef struct packed_job {
    const gc_attention_packed_args *args;
    const int64_t *first; /* [B + 1]: text b's rows are [first[b], first[b + 1]) */
    gc_cpu_isa isa;
} packed_job;

/* One text's buffers, sized for T tokens. */
typedef struct text_scratch {
    float *q, *k, *v, *context; /* [n, Dh] */
    float *logits, *probs;      /* [n, n] */
    float *row, *row_probs;     /* [T]: one query's logits and probabilities over the places */
    int64_t *place;             /* [n]: each real token's place t in the text */
} text_scratch;

/* rows [first, first + n) of `from` (row stride `stride`, head columns at `column`) into [n, Dh] */
static void copy_head(float *to, const float *from, int64_t stride, int64_t column, int64_t first, int64_t n,
                      int64_t head_dim) {
    for (int64_t i = 0; i < n; i++)
        memcpy(to + i * head_dim, from + (first + i) * stride + column, (size_t)head_dim * sizeof(float));
}

static void product(const packed_job *job, const float *a, const float *b, float *c, int64_t m, int64_t n,
                    int64_t k, bool trans_b, float beta) {
    gc_matmul_args args = {.a = a, .b = b, .c = c, .dtype = GC_F32, .batch = 1, .m = m, .n = n, .k = k,
                           .trans_b = trans_b, .alpha = 1.0f, .beta = beta};
    gc_cpu_matmul_own(&args, job->isa);
}

/* The probabilities [n, n] of the text's n queries over its n real keys, at the places place[]. */
static void text_probs(const packed_job *job, int64_t text, int64_t n, text_scratch *s) {
    const gc_attention_packed_args *a = job->args;
    int64_t length = a->length;
    product(job, s->q, s->k, s->logits, n, n, a->head_dim, true, 0.0f);
    const float *bias = a->bias ? (const float *)a->bias + text * length : NULL;
    bool staged = a->scale != 1.0 || bias; /* as gc_softmax_scaled decides it */
    float scale = (float)a->scale;
    memset(s->row, 0, (size_t)length * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < n; j++) s->row[s->place[j]] = s->logits[i * n + j];
        gc_cpu_softmax_row_f32_on(job->isa, s->row, bias, scale, staged, s->row_probs, (size_t)length);
        for (int64_t j = 0; j < n; j++) s->probs[i * n + j] = s->row_probs[s->place[j]];
    }
}

/* context [n, Dh] = probs @ v, the real keys of each GEMM depth block of places in turn. */
static void text_context(const packed_job *job, int64_t n, text_scratch *s) {
    const gc_attention_packed_args *a = job->args;
    int64_t key = 0;
    for (int64_t block = 0; block == 0 || block * GC_GEMM_DEPTH_BLOCK < a->length; block++) {
        int64_t end = key; /* the keys [key, end) have places in this block */
        while (end < n && s->place[end] < (block + 1) * GC_GEMM_DEPTH_BLOCK) end++;
        /* probs' columns [key, end) are a strided [n, end - key] operand: copied, packed by rows */
        float *block_probs = s->logits; /* free once the probabilities are made */
        for (int64_t i = 0; i < n; i++)
            memcpy(block_probs + i * (end - key), s->probs + i * n + key, (size_t)(end - key) * sizeof(float));
        product(job, block_probs, s->v + key * a->head_dim, s->context, n, a->head_dim, end - key, false,
                block == 0 ? 0.0f : 1.0f);
        key = end;
    }
}

static void run_texts(void *arg, int64_t begin, int64_t end) {
    const packed_job *job = arg;
    const gc_attention_packed_args *a = job->args;
    int64_t length = a->length, dh = a->head_dim, groups = a->heads / a->kv_heads;
    int64_t q_stride = a->heads * dh, kv_stride = a->kv_heads * dh;
    size_t vectors = (size_t)(length * dh), square = (size_t)(length * length);
    float *block = gc_cpu_scratch(GC_SCRATCH_ATTENTION, (4 * vectors + 2 * square + 2 * (size_t)length) *
                                                            sizeof(float) + (size_t)length * sizeof(int64_t));
    text_scratch s = {.q = block, .k = block + vectors, .v = block + 2 * vectors, .context = block + 3 * vectors};
    s.logits = s.context + vectors;
    s.probs = s.logits + square;
    s.row = s.probs + square;
    s.row_probs = s.row + length;
    s.place = (int64_t *)(s.row_probs + length);
    for (int64_t item = begin; item < end; item++) {
        int64_t text = item / a->heads, head = item % a->heads, kv_head = head / groups;
        int64_t first = job->first[text], n = job->first[text + 1] - first;
        if (n == 0) continue;
        for (int64_t i = 0; i < n; i++) s.place[i] = a->positions ? a->positions[first + i] - text * length : i;
        copy_head(s.q, a->q, q_stride, head * dh, first, n, dh);
        copy_head(s.k, a->k, kv_stride, kv_head * dh, first, n, dh);
        copy_head(s.v, a->v, kv_stride, kv_head * dh, first, n, dh);
        text_probs(job, text, n, &s);
        text_context(job, n, &s);
        float *out = (float *)a->out;
        for (int64_t i = 0; i < n; i++)
            memcpy(out + (first + i) * q_stride + head * dh, s.context + i * dh, (size_t)dh * sizeof(float));
    }
}

void gc_cpu_attention_packed(const gc_attention_packed_args *args) {
    if (args->dtype != GC_F32) gc_fatal("attention_packed: no CPU kernel for %s", gc_dtype_name(args->dtype));
    int64_t *first = malloc((size_t)(args->batch + 1) * sizeof *first);
    if (!first) gc_fatal("attention_packed: out of host memory for %lld texts", (long long)args->batch);
    for (int64_t text = 0, row = 0; text <= args->batch; text++) { /* positions increase: one walk */
        while (args->positions && row < args->tokens && args->positions[row] < text * args->length) row++;
        first[text] = args->positions ? row : text * args->length;
    }
    packed_job job = {args, first, gc_cpu_isa_selected()};
    gc_parallel_for(args->batch * args->heads, 1, run_texts, &job);
    free(first);
}
