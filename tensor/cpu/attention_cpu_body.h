/* The fused attention kernels' loops in one working type, included by attention_cpu.c once
 * for float (f32, f16, bf16) and once for double (f64) with:
 *   W              the working type;
 *   WNAME(name)    this variant's and type's copy of a function of this file;
 *   W_SHARED(name) the type's function of ../attention_impl.h;
 *   W_EXP(x)       e^x for x <= 0 (and a rounding above 0): the forward's and the
 *                  backward's probabilities;
 *   W_LOAD         load_float or load_double: n elements of a dtype array as W.
 *
 * (attention_cpu_variant.h defines them, once per instruction set.)
 *
 * Every loop over a row's keys or a head's dims is a plain loop over contiguous W arrays
 * that the compiler vectorises: the dot products run with the keys (and, in the backward,
 * the values) of a tile transposed, so that the inner loop goes along the keys. Each element
 * is summed in an order fixed by its row and the tiles (never by the thread that runs it). */

/* One tile of a key/value head's keys [start, start + count): the keys as rows [count, Dh]
 * and transposed [Dh, ATTENTION_KEY_TILE] for the dot products, the values as rows (the
 * forward's context) and transposed (the backward's probability gradients). */
typedef struct WNAME(key_tile) {
    W *keys, *keys_t, *values, *values_t;
    int64_t start, count;
} WNAME(key_tile);

/* y[d] += sum over m < count of a[m a_stride] x[m x_stride + d], for d < n: each y[d] one
 * chain of additions in the order of m, as adding one term at a time would make it (ISO C
 * does not contract a * b + c), eight terms per pass so that y is read and written once per
 * eight. So the order depends on nothing but the terms: not on a thread, an instruction set
 * or count (trailing zero terms, a padded batch's hidden keys, change no bit: a text's
 * vector is the same whatever its batch, tests/test_encode.c). Every product-sum of the
 * kernels (a row's logits, a context, each gradient) is one. */
static void WNAME(add_products)(W *y, const W *a, int64_t a_stride, const W *x, int64_t x_stride, int64_t count,
                                int64_t n) {
    int64_t m = 0;
    for (; m + 8 <= count; m += 8) {
        W c[8];
        const W *r[8];
        for (int e = 0; e < 8; e++) c[e] = a[(m + e) * a_stride], r[e] = x + (m + e) * x_stride;
        for (int64_t d = 0; d < n; d++)
            y[d] = y[d] + c[0] * r[0][d] + c[1] * r[1][d] + c[2] * r[2][d] + c[3] * r[3][d] + c[4] * r[4][d] +
                   c[5] * r[5][d] + c[6] * r[6][d] + c[7] * r[7][d];
    }
    for (; m < count; m++) {
        const W cm = a[m * a_stride], *xm = x + m * x_stride;
        for (int64_t d = 0; d < n; d++) y[d] += cm * xm[d];
    }
}

static void WNAME(key_tile_load)(const gc_attention_args *a, int64_t kv_row0 /* (b KVH + kvh) T */, int64_t start,
                                 WNAME(key_tile) *t) {
    int64_t dh = a->head_dim;
    t->start = start;
    t->count = a->length - start < ATTENTION_KEY_TILE ? a->length - start : ATTENTION_KEY_TILE;
    size_t first = (size_t)((kv_row0 + start) * dh), n = (size_t)(t->count * dh);
    W_LOAD(a->k, a->dtype, first, n, t->keys);
    W_LOAD(a->v, a->dtype, first, n, t->values);
    for (int64_t j = 0; j < t->count; j++)
        for (int64_t d = 0; d < dh; d++) {
            t->keys_t[d * ATTENTION_KEY_TILE + j] = t->keys[j * dh + d];
            t->values_t[d * ATTENTION_KEY_TILE + j] = t->values[j * dh + d];
        }
}

/* logits [count]: query i (row `row` of the [B, H, T, T] logits, its vector `query` [Dh])
 * against the tile's keys, scaled, biased and hidden as attention_impl.h says. bias [count]
 * is scratch. */
static void WNAME(tile_logits)(const gc_attention_args *a, const WNAME(key_tile) *t, const W *query, int64_t row,
                               int64_t i, W *bias, W *logits) {
    int64_t n = t->count;
    for (int64_t j = 0; j < n; j++) logits[j] = 0;
    WNAME(add_products)(logits, query, 1, t->keys_t, ATTENTION_KEY_TILE, a->head_dim, n);
    if (a->bias.data) W_LOAD(a->bias.data, a->dtype, gc_softmax_bias_offset(&a->bias, (size_t)row) + (size_t)t->start,
                             (size_t)n, bias);
    else for (int64_t j = 0; j < n; j++) bias[j] = 0;
    const W scale = (W)a->scale;
    if (a->causal || a->window) /* the hidden keys' bias first, so that the loop below has no branch */
        for (int64_t j = 0; j < n; j++)
            bias[j] = W_SHARED(gc_attention_bias)(bias[j], gc_attention_hidden(i, t->start + j, a->causal, a->window));
    for (int64_t j = 0; j < n; j++) logits[j] = W_SHARED(gc_attention_logit)(logits[j], scale, bias[j]);
}

/* Zeroes the probabilities of a row's tile that dropout drops (their words [n]:
 * dropout_words), and multiplies the kept ones by 1 / (1 - p) when `scaled`. */
static void WNAME(tile_dropout)(const gc_attention_args *a, const uint32_t *words, int64_t n, W *probs, bool scaled) {
    const W keep_scale = scaled ? (W)a->keep_scale : (W)1;
    /* a select of constants, then a product: a loop the compiler vectorises (a select of
     * computed values would stay a branch) */
    for (int64_t j = 0; j < n; j++) probs[j] *= gc_attention_kept(words[j], a->threshold) ? keep_scale : (W)0;
}

/* Points the key tile's four [KT, Dh] arrays into scratch at `base`; returns what follows. */
static W *WNAME(key_tile_carve)(WNAME(key_tile) *t, W *base, size_t tile) {
    t->keys = base;
    t->keys_t = t->keys + tile;
    t->values = t->keys_t + tile;
    t->values_t = t->values + tile;
    return t->values_t + tile;
}

/* The per-thread memory of a forward task: a query tile's queries and context [QT, Dh],
 * its rows' running max and sum, one key tile, a row's logits and bias. */
typedef struct WNAME(forward_scratch) {
    W *queries, *context, *max, *sum, *logits, *bias;
    uint32_t *words; /* [QT, KT]: the tile's dropout words */
    WNAME(key_tile) tile;
} WNAME(forward_scratch);

static WNAME(forward_scratch) WNAME(forward_scratch_take)(int64_t dh) {
    size_t tile = (size_t)(ATTENTION_KEY_TILE * dh), rows = (size_t)(ATTENTION_QUERY_TILE * dh);
    size_t pairs = (size_t)ATTENTION_QUERY_TILE * ATTENTION_KEY_TILE;
    W *base = gc_cpu_scratch(GC_SCRATCH_PACK_A, (2 * rows + 4 * tile + 2 * ATTENTION_QUERY_TILE +
                                                 2 * ATTENTION_KEY_TILE + pairs) * sizeof(W));
    WNAME(forward_scratch) s;
    s.queries = base;
    s.context = s.queries + rows;
    s.max = WNAME(key_tile_carve)(&s.tile, s.context + rows, tile);
    s.sum = s.max + ATTENTION_QUERY_TILE;
    s.logits = s.sum + ATTENTION_QUERY_TILE;
    s.bias = s.logits + ATTENTION_KEY_TILE;
    s.words = (uint32_t *)(s.bias + ATTENTION_KEY_TILE);
    return s;
}

/* Rows [row0, row0 + rows) of head h of text b (queries i0 ...): their context and lse. */
static void WNAME(forward_rows)(const gc_attention_args *a, int64_t b, int64_t h, int64_t i0, int64_t rows) {
    int64_t dh = a->head_dim, length = a->length, groups = a->heads / a->kv_heads;
    int64_t row0 = (b * a->heads + h) * length + i0, kv_row0 = (b * a->kv_heads + h / groups) * length;
    WNAME(forward_scratch) s = WNAME(forward_scratch_take)(dh);
    W_LOAD(a->q, a->dtype, (size_t)(row0 * dh), (size_t)(rows * dh), s.queries);
    for (int64_t e = 0; e < rows * dh; e++) s.context[e] = 0;
    for (int64_t r = 0; r < rows; r++) s.max[r] = (W)-INFINITY, s.sum[r] = 0;
    for (int64_t start = 0; start < length; start += ATTENTION_KEY_TILE) {
        WNAME(key_tile_load)(a, kv_row0, start, &s.tile);
        int64_t n = s.tile.count;
        if (a->threshold) ATTENTION_NAME(dropout_words)(a, row0, rows, start, n, s.words);
        for (int64_t r = 0; r < rows; r++) {
            W *p = s.logits, *context = s.context + r * dh;
            WNAME(tile_logits)(a, &s.tile, s.queries + r * dh, row0 + r, i0 + r, s.bias, p);
            W tile_max = p[0];
            for (int64_t j = 1; j < n; j++) tile_max = p[j] > tile_max ? p[j] : tile_max;
            W factor = W_SHARED(gc_attention_rescale)(&s.max[r], tile_max), max = s.max[r], tile_sum = 0;
            for (int64_t j = 0; j < n; j++) p[j] = W_EXP(p[j] - max);
            for (int64_t j = 0; j < n; j++) tile_sum += p[j];
            s.sum[r] = s.sum[r] * factor + tile_sum;
            if (a->threshold) WNAME(tile_dropout)(a, s.words + r * n, n, p, false); /* 1 / (1 - p): at the end */
            for (int64_t d = 0; d < dh; d++) context[d] *= factor;
            WNAME(add_products)(context, p, 1, s.tile.values, dh, n, dh);
        }
    }
    W *lse = a->lse;
    for (int64_t r = 0; r < rows; r++) {
        lse[row0 + r] = W_SHARED(gc_attention_lse)(s.max[r], s.sum[r]);
        const W normaliser = (W)a->keep_scale / s.sum[r];
        for (int64_t d = 0; d < dh; d++)
            gc_store(a->out, a->dtype, (size_t)((row0 + r) * dh + d), (double)(s.context[r * dh + d] * normaliser));
    }
}

/* Task t of the forward: query tile t % tiles of head (t / tiles) % H of text t / (tiles H). */
static void WNAME(forward_range)(void *ctx, int64_t begin, int64_t end) {
    const gc_attention_args *a = ctx;
    int64_t tiles = (a->length + ATTENTION_QUERY_TILE - 1) / ATTENTION_QUERY_TILE;
    for (int64_t task = begin; task < end; task++) {
        int64_t i0 = task % tiles * ATTENTION_QUERY_TILE, head = task / tiles;
        int64_t rows = a->length - i0 < ATTENTION_QUERY_TILE ? a->length - i0 : ATTENTION_QUERY_TILE;
        WNAME(forward_rows)(a, head / a->heads, head % a->heads, i0, rows);
    }
}

/* The per-thread memory of a backward task: one key tile and its keys' and values'
 * gradient sums [KT, Dh], a query tile's queries and output gradients [QT, Dh], its rows'
 * dropped probabilities and logit gradients [QT, KT], a row's bias [KT]. */
typedef struct WNAME(backward_scratch) {
    W *dk, *dv, *queries, *grads, *probs, *logit_grads, *bias;
    uint32_t *words; /* [QT, KT]: the tile's dropout words */
    WNAME(key_tile) tile;
} WNAME(backward_scratch);

static WNAME(backward_scratch) WNAME(backward_scratch_take)(int64_t dh) {
    size_t tile = (size_t)(ATTENTION_KEY_TILE * dh), rows = (size_t)(ATTENTION_QUERY_TILE * dh);
    size_t pairs = (size_t)ATTENTION_QUERY_TILE * ATTENTION_KEY_TILE;
    W *base = gc_cpu_scratch(GC_SCRATCH_PACK_A, (6 * tile + 2 * rows + 3 * pairs + ATTENTION_KEY_TILE) * sizeof(W));
    WNAME(backward_scratch) s;
    s.dk = WNAME(key_tile_carve)(&s.tile, base, tile);
    s.dv = s.dk + tile;
    s.queries = s.dv + tile;
    s.grads = s.queries + rows;
    s.probs = s.grads + rows;
    s.logit_grads = s.probs + pairs;
    s.bias = s.logit_grads + pairs;
    s.words = (uint32_t *)(s.bias + ATTENTION_KEY_TILE);
    return s;
}

/* One query row against the key tile (FlashAttention-2): its probabilities p [KT] from the
 * lse, their gradients dO . v dropped as the forward dropped them, and from them the logit
 * gradients ds [KT] (times the scale, as dq and dk want them); p is left dropped and times
 * 1 / (1 - p), the probabilities the context saw (dv's). */
static void WNAME(backward_row)(const gc_attention_args *a, WNAME(backward_scratch) *s, const W *query,
                                const W *grad, const uint32_t *words, int64_t row, int64_t i, W *p, W *ds) {
    const WNAME(key_tile) *t = &s->tile;
    int64_t n = t->count;
    WNAME(tile_logits)(a, t, query, row, i, s->bias, p);
    const W lse = ((const W *)a->lse)[row], row_dot = ((const W *)a->row_dot)[row], scale = (W)a->scale;
    for (int64_t j = 0; j < n; j++) p[j] = W_EXP(p[j] - lse);
    for (int64_t j = 0; j < n; j++) ds[j] = 0;
    WNAME(add_products)(ds, grad, 1, t->values_t, ATTENTION_KEY_TILE, a->head_dim, n);
    if (a->threshold) WNAME(tile_dropout)(a, words, n, ds, true); /* d loss / d p: through the kept ones only */
    for (int64_t j = 0; j < n; j++) ds[j] = W_SHARED(gc_attention_logit_grad)(p[j], ds[j], row_dot) * scale;
    if (a->threshold) WNAME(tile_dropout)(a, words, n, p, true);
}

/* D = rowsum(dO o O) of rows [first, first + count): their grads and outputs through the
 * scratch's query tile. */
static void WNAME(row_dots)(const gc_attention_args *a, WNAME(backward_scratch) *s, int64_t first, int64_t count) {
    int64_t dh = a->head_dim;
    W *row_dot = a->row_dot;
    for (int64_t r = first; r < first + count; r += ATTENTION_QUERY_TILE) {
        int64_t rows = first + count - r < ATTENTION_QUERY_TILE ? first + count - r : ATTENTION_QUERY_TILE;
        W_LOAD(a->grad_out, a->dtype, (size_t)(r * dh), (size_t)(rows * dh), s->grads);
        W_LOAD(a->out, a->dtype, (size_t)(r * dh), (size_t)(rows * dh), s->queries);
        for (int64_t e = 0; e < rows; e++) { /* summed as dO . v is (backward_row): one key gives ds = 0 exactly */
            W sum = 0;
            WNAME(add_products)(&sum, s->grads + e * dh, 1, s->queries + e * dh, 1, dh, 1);
            row_dot[r + e] = sum;
        }
    }
}

/* Task t of the backward: every row of the G query heads of key/value head t % KVH of text
 * t / KVH. It alone writes their dq rows and the key head's dk and dv rows. */
static void WNAME(backward_range)(void *ctx, int64_t begin, int64_t end) {
    const gc_attention_args *a = ctx;
    int64_t dh = a->head_dim, length = a->length, groups = a->heads / a->kv_heads;
    WNAME(backward_scratch) s = WNAME(backward_scratch_take)(dh);
    W *dq = a->dq, *dk = a->dk, *dv = a->dv;
    for (int64_t task = begin; task < end; task++) {
        int64_t b = task / a->kv_heads, kv_head = task % a->kv_heads, kv_row0 = task * length;
        int64_t row0 = (b * a->heads + kv_head * groups) * length, row_end = row0 + groups * length;
        WNAME(row_dots)(a, &s, row0, row_end - row0);
        for (int64_t e = row0 * dh; e < row_end * dh; e++) dq[e] = 0;
        for (int64_t start = 0; start < length; start += ATTENTION_KEY_TILE) {
            WNAME(key_tile_load)(a, kv_row0, start, &s.tile);
            int64_t n = s.tile.count;
            for (int64_t e = 0; e < n * dh; e++) s.dk[e] = 0, s.dv[e] = 0;
            for (int64_t r = row0; r < row_end; r += ATTENTION_QUERY_TILE) {
                int64_t rows = row_end - r < ATTENTION_QUERY_TILE ? row_end - r : ATTENTION_QUERY_TILE;
                W_LOAD(a->q, a->dtype, (size_t)(r * dh), (size_t)(rows * dh), s.queries);
                W_LOAD(a->grad_out, a->dtype, (size_t)(r * dh), (size_t)(rows * dh), s.grads);
                if (a->threshold) ATTENTION_NAME(dropout_words)(a, r, rows, start, n, s.words);
                for (int64_t e = 0; e < rows; e++)
                    WNAME(backward_row)(a, &s, s.queries + e * dh, s.grads + e * dh, s.words + e * n, r + e,
                                        (r + e) % length, s.probs + e * ATTENTION_KEY_TILE,
                                        s.logit_grads + e * ATTENTION_KEY_TILE);
                /* dv_j += p_ij dO_i, dk_j += ds_ij q_i over the tile's rows i in order; dq_i += ds_ij k_j */
                for (int64_t j = 0; j < n; j++) {
                    WNAME(add_products)(s.dv + j * dh, s.probs + j, ATTENTION_KEY_TILE, s.grads, dh, rows, dh);
                    WNAME(add_products)(s.dk + j * dh, s.logit_grads + j, ATTENTION_KEY_TILE, s.queries, dh, rows, dh);
                }
                for (int64_t e = 0; e < rows; e++)
                    WNAME(add_products)(dq + (r + e) * dh, s.logit_grads + e * ATTENTION_KEY_TILE, 1, s.tile.keys, dh,
                                        n, dh);
            }
            memcpy(dk + (kv_row0 + start) * dh, s.dk, (size_t)(n * dh) * sizeof(W));
            memcpy(dv + (kv_row0 + start) * dh, s.dv, (size_t)(n * dh) * sizeof(W));
        }
    }
}
