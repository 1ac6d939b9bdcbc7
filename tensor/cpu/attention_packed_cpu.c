/* Attention over packed tokens on the CPU (backend_kernels.h, attention_packed): for each text
 * and head, its n real tokens' queries, keys and values are read where they lie in the
 * packed rows by the own GEMM (gc_cpu_matmul_strided), put through gc_softmax_scaled's
 * operations, and the context written into the packed rows. The composed path unpacks q, k
 * and v to [B, T, ...] (a cat and a gather each), permutes them to [B, H, T, Dh], multiplies
 * [T, T] per head and permutes and packs the context back: eleven copies the size of the
 * hidden states per layer that this one does not make, and no padded query is computed.
 *
 * The logits are made transposed, keys by queries (k q^T: each one the same chain of fused
 * multiply-adds as q k^T's, the factors swapped), so that the softmax takes all the queries
 * at once down the columns (gc_cpu_softmax_columns_f32_on, the row's bits): a text's rows
 * are a dozen or so keys long, which one at a time left most of the softmax to scalar
 * tails. The columns are padded to a multiple of eight with zeros, whose results are not
 * used.
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

/* One text and head: where its rows lie, and its buffers, sized for T places; P is the
 * queries rounded up to a whole vector. */
typedef struct text_head {
    const float *q, *k, *v; /* the text's first row of the head's columns: [n, Dh] at the row strides */
    float *out;             /* likewise, the context's */
    int64_t n, queries;     /* real tokens, and P */
    float *logits;          /* [n, P]: key j's logits for each query, where they are not placed at once */
    float *placed;          /* [T, P]: the logits laid over the places, 0 at the padded ones */
    int64_t *place;         /* [n]: each real token's place t in the text */
    const float *probs;     /* [n, P]: key j's probabilities for each query (in logits or placed) */
} text_head;

/* Queries rounded up to a whole AVX2 vector: the softmax's passes run along them, and a count
 * that is not a multiple of the width leaves a scalar tail in each. */
enum { QUERY_VECTOR = 8 };

static int64_t padded_queries(int64_t n) { return (n + QUERY_VECTOR - 1) / QUERY_VECTOR * QUERY_VECTOR; }

/* c [m, n] (row stride ldc) = op(a) op(b) + beta c, a and b at the row strides lda and ldb */
static void product(const packed_job *job, const float *a, int64_t lda, bool trans_a, const float *b, int64_t ldb,
                    bool trans_b, float *c, int64_t ldc, int64_t m, int64_t n, int64_t k, float beta) {
    gc_matmul_args args = {.a = a, .b = b, .c = c, .dtype = GC_F32, .batch = 1, .m = m, .n = n, .k = k,
                           .trans_a = trans_a, .trans_b = trans_b, .alpha = 1.0f, .beta = beta};
    gc_cpu_matmul_strided(&args, lda, ldb, ldc, job->isa);
}

/* The probabilities of the text's queries over its n real keys at the places place[], left
 * in h->probs. A text whose keys hold its first n places (padding on the right, or none) has
 * its logits made where they are placed, and its probabilities read from there. */
static void text_probs(const packed_job *job, int64_t text, text_head *h) {
    const gc_attention_packed_args *a = job->args;
    int64_t length = a->length, n = h->n, queries = h->queries;
    int64_t q_stride = a->heads * a->head_dim, kv_stride = a->kv_heads * a->head_dim;
    bool first_places = h->place[n - 1] == n - 1; /* the places increase */
    float *logits = first_places ? h->placed : h->logits;
    memset(h->placed, 0, (size_t)(length * queries) * sizeof(float));
    if (!first_places) memset(logits, 0, (size_t)(n * queries) * sizeof(float)); /* the padded columns */
    product(job, h->k, kv_stride, false, h->q, q_stride, true, logits, queries, n, n, a->head_dim, 0.0f);
    if (!first_places)
        for (int64_t j = 0; j < n; j++)
            memcpy(h->placed + h->place[j] * queries, logits + j * queries, (size_t)queries * sizeof(float));
    const float *bias = a->bias ? (const float *)a->bias + text * length : NULL;
    bool staged = a->scale != 1.0 || bias; /* as gc_softmax_scaled decides it */
    gc_cpu_softmax_columns_f32_on(job->isa, h->placed, bias, (float)a->scale, staged, h->placed, (size_t)length,
                                  (size_t)queries, (size_t)queries);
    h->probs = h->placed;
    if (first_places) return;
    for (int64_t j = 0; j < n; j++)
        memcpy(h->logits + j * queries, h->placed + h->place[j] * queries, (size_t)queries * sizeof(float));
    h->probs = h->logits;
}

/* The context [n, Dh] = probs @ v into the packed rows, the real keys of each GEMM depth block
 * of places in turn. */
static void text_context(const packed_job *job, text_head *h) {
    const gc_attention_packed_args *a = job->args;
    int64_t n = h->n, queries = h->queries, dh = a->head_dim, key = 0;
    int64_t q_stride = a->heads * dh, kv_stride = a->kv_heads * dh;
    for (int64_t block = 0; block == 0 || block * GC_GEMM_DEPTH_BLOCK < a->length; block++) {
        int64_t end = key; /* the keys [key, end) have places in this block */
        while (end < n && h->place[end] < (block + 1) * GC_GEMM_DEPTH_BLOCK) end++;
        /* the probabilities' rows [key, end), [end - key, P], are op(a) transposed */
        product(job, h->probs + key * queries, queries, true, h->v + key * kv_stride, kv_stride, false, h->out,
                q_stride, n, dh, end - key, block == 0 ? 0.0f : 1.0f);
        key = end;
    }
}

/* Items are taken head-major (item = head B + text), so that a range of them holds texts
 * short and long alike: a batch sorted by length, split text-major, gave the last thread
 * its longest texts. */
static void run_texts(void *arg, int64_t begin, int64_t end) {
    const packed_job *job = arg;
    const gc_attention_packed_args *a = job->args;
    int64_t length = a->length, dh = a->head_dim, groups = a->heads / a->kv_heads, most = padded_queries(length);
    int64_t q_stride = a->heads * dh, kv_stride = a->kv_heads * dh;
    size_t square = (size_t)(length * most);
    float *block = gc_cpu_scratch(GC_SCRATCH_ATTENTION, 2 * square * sizeof(float) + (size_t)length * sizeof(int64_t));
    text_head h = {.logits = block, .placed = block + square, .place = (int64_t *)(block + 2 * square)};
    for (int64_t item = begin; item < end; item++) {
        int64_t text = item % a->batch, head = item / a->batch, kv_head = head / groups;
        int64_t first = job->first[text];
        h.n = job->first[text + 1] - first;
        if (h.n == 0) continue;
        h.queries = padded_queries(h.n);
        for (int64_t i = 0; i < h.n; i++) h.place[i] = a->positions ? a->positions[first + i] - text * length : i;
        h.q = (const float *)a->q + first * q_stride + head * dh;
        h.k = (const float *)a->k + first * kv_stride + kv_head * dh;
        h.v = (const float *)a->v + first * kv_stride + kv_head * dh;
        h.out = (float *)a->out + first * q_stride + head * dh;
        text_probs(job, text, &h);
        text_context(job, &h);
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
