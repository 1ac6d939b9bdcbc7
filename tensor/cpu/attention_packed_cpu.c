/* Attention over packed tokens on the CPU (backend_kernels.h, attention_packed): for each text
 * and head, its n real tokens' queries, keys and values are copied out of the packed rows
 * ([n, Dh] each, a few KiB), multiplied with the own GEMM, put through gc_softmax_scaled's
 * row, and the context written back into the packed rows. The composed path unpacks q, k and
 * v to [B, T, ...] (a cat and a gather each), permutes them to [B, H, T, Dh], multiplies
 * [T, T] per head and permutes and packs the context back: eleven copies the size of the
 * hidden states per layer that this one does not make, and no padded query is computed.
 *
 * The logits are made transposed, keys by queries (k q^T: each one the same chain of fused
 * multiply-adds as q k^T's, the factors swapped), so that the softmax takes eight queries
 * at once down the columns (gc_cpu_softmax_columns_f32_on, the row's bits): a text's rows
 * are a dozen or so keys long, which one at a time left most of the softmax to scalar
 * tails. The queries are padded to a multiple of eight with zero rows, whose results are
 * not written back.
 *
 * Why the bits are the composed path's (tests/test_attention_packed.c): a padded key's row of
 * the unpacked k and v is 0, so its logit there is exactly 0 and its probability exactly 0
 * (e^(-10000 - max) rounds to 0), and each context element is one chain of multiply-adds per
 * GEMM depth block, to which a padded key adds exactly 0. So here each query's logits are
 * laid out over its text's T places (0 at the padded ones) for the same softmax, and the
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

/* One text's buffers, sized for T places; P is the queries rounded up to a whole vector. */
typedef struct text_scratch {
    float *q, *context;   /* [P, Dh]: the queries (zero past n), their contexts */
    float *k, *v;         /* [n, Dh] */
    float *logits;        /* [n, P]: key j's logits for each query, where they are not placed at once */
    float *placed;        /* [T, P]: the logits laid over the places, 0 at the padded ones */
    int64_t *place;       /* [n]: each real token's place t in the text */
    const float *probs;   /* [n, P]: key j's probabilities for each query (in logits or placed) */
} text_scratch;

/* Queries rounded up to a whole AVX2 vector: the softmax's passes run along them, and a count
 * that is not a multiple of the width leaves a scalar tail in each. */
enum { QUERY_VECTOR = 8 };

static int64_t padded_queries(int64_t n) { return (n + QUERY_VECTOR - 1) / QUERY_VECTOR * QUERY_VECTOR; }

/* rows [first, first + n) of `from` (row stride `stride`, head columns at `column`) into [n, Dh] */
static void copy_head(float *to, const float *from, int64_t stride, int64_t column, int64_t first, int64_t n,
                      int64_t head_dim) {
    for (int64_t i = 0; i < n; i++)
        memcpy(to + i * head_dim, from + (first + i) * stride + column, (size_t)head_dim * sizeof(float));
}

static void product(const packed_job *job, const float *a, bool trans_a, const float *b, bool trans_b, float *c,
                    int64_t m, int64_t n, int64_t k, float beta) {
    gc_matmul_args args = {.a = a, .b = b, .c = c, .dtype = GC_F32, .batch = 1, .m = m, .n = n, .k = k,
                           .trans_a = trans_a, .trans_b = trans_b, .alpha = 1.0f, .beta = beta};
    gc_cpu_matmul_own(&args, job->isa);
}

/* The probabilities of the text's queries (P of them, n real) over its n real keys at the
 * places place[], left in s->probs. A text whose keys hold the first n places (padding on
 * the right, or none) has its logits made where they are placed, and its probabilities read
 * from there. */
static void text_probs(const packed_job *job, int64_t text, int64_t n, text_scratch *s) {
    const gc_attention_packed_args *a = job->args;
    int64_t length = a->length, queries = padded_queries(n);
    bool first_places = s->place[n - 1] == n - 1; /* the places increase */
    float *logits = first_places ? s->placed : s->logits;
    product(job, s->k, false, s->q, true, logits, n, queries, a->head_dim, 0.0f);
    if (first_places) {
        memset(s->placed + n * queries, 0, (size_t)((length - n) * queries) * sizeof(float));
    } else {
        memset(s->placed, 0, (size_t)(length * queries) * sizeof(float));
        for (int64_t j = 0; j < n; j++)
            memcpy(s->placed + s->place[j] * queries, logits + j * queries, (size_t)queries * sizeof(float));
    }
    const float *bias = a->bias ? (const float *)a->bias + text * length : NULL;
    bool staged = a->scale != 1.0 || bias; /* as gc_softmax_scaled decides it */
    gc_cpu_softmax_columns_f32_on(job->isa, s->placed, bias, (float)a->scale, staged, s->placed, (size_t)length,
                                  (size_t)queries, (size_t)queries);
    s->probs = s->placed;
    if (first_places) return;
    for (int64_t j = 0; j < n; j++)
        memcpy(s->logits + j * queries, s->placed + s->place[j] * queries, (size_t)queries * sizeof(float));
    s->probs = s->logits;
}

/* context [P, Dh] = probs @ v, the real keys of each GEMM depth block of places in turn. */
static void text_context(const packed_job *job, int64_t n, text_scratch *s) {
    const gc_attention_packed_args *a = job->args;
    int64_t queries = padded_queries(n), key = 0;
    for (int64_t block = 0; block == 0 || block * GC_GEMM_DEPTH_BLOCK < a->length; block++) {
        int64_t end = key; /* the keys [key, end) have places in this block */
        while (end < n && s->place[end] < (block + 1) * GC_GEMM_DEPTH_BLOCK) end++;
        /* the probabilities' rows [key, end), [end - key, P], are op(a) transposed */
        product(job, s->probs + key * queries, true, s->v + key * a->head_dim, false, s->context, queries,
                a->head_dim, end - key, block == 0 ? 0.0f : 1.0f);
        key = end;
    }
}

/* Items are taken head-major (item = head B + text), so that a range of them holds texts
 * short and long alike: a batch sorted by length, split text-major, gave the last thread
 * its longest texts. */
static void run_texts(void *arg, int64_t begin, int64_t end) {
    const packed_job *job = arg;
    const gc_attention_packed_args *a = job->args;
    int64_t length = a->length, dh = a->head_dim, groups = a->heads / a->kv_heads;
    int64_t q_stride = a->heads * dh, kv_stride = a->kv_heads * dh, most = padded_queries(length);
    size_t vectors = (size_t)(most * dh), square = (size_t)(length * most);
    float *block = gc_cpu_scratch(GC_SCRATCH_ATTENTION,
                                  (4 * vectors + 2 * square) * sizeof(float) + (size_t)length * sizeof(int64_t));
    text_scratch s = {.q = block, .context = block + vectors, .k = block + 2 * vectors, .v = block + 3 * vectors};
    s.logits = s.v + vectors;
    s.placed = s.logits + square;
    s.place = (int64_t *)(s.placed + square);
    for (int64_t item = begin; item < end; item++) {
        int64_t text = item % a->batch, head = item / a->batch, kv_head = head / groups;
        int64_t first = job->first[text], n = job->first[text + 1] - first;
        if (n == 0) continue;
        for (int64_t i = 0; i < n; i++) s.place[i] = a->positions ? a->positions[first + i] - text * length : i;
        copy_head(s.q, a->q, q_stride, head * dh, first, n, dh);
        memset(s.q + n * dh, 0, (size_t)((padded_queries(n) - n) * dh) * sizeof(float));
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
