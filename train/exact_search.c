/* Exact search (see gradcache/train.h): a running top-k per query, kept as a binary min-heap
 * whose root is the worst of the k kept, so that a candidate costs one comparison unless it
 * beats that one. The scores come a block of queries at a time to the host (cosine_blocks.h). */
#include <math.h>
#include <stdlib.h>

#include "cosine_blocks.h"
#include "gradcache/train.h"

gc_status gc_top_k_init(gc_top_k *top, int64_t queries, int64_t capacity) {
    if (capacity < 1 || queries < 0)
        gc_fatal("top_k_init: needs queries >= 0 and capacity >= 1, got %lld and %lld", (long long)queries,
                 (long long)capacity);
    *top = (gc_top_k){.queries = queries, .capacity = capacity};
    size_t n = (size_t)(queries * capacity + 1);
    top->index = malloc(n * sizeof *top->index);
    top->score = malloc(n * sizeof *top->score);
    if (top->index && top->score) return GC_OK;
    gc_top_k_free(top);
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "exact search: out of host memory for %lld lists of %lld", (long long)queries,
                 (long long)capacity);
    return GC_ERR_OUT_OF_MEMORY;
}

void gc_top_k_free(gc_top_k *top) {
    free(top->index);
    free(top->score);
    *top = (gc_top_k){0};
}

/* Whether (score a, row ia) ranks below (score b, row ib): a lower score, or a tie and a
 * higher corpus row. */
static int worse(float a, int64_t ia, float b, int64_t ib) { return a < b || (a == b && ia > ib); }

/* Restores the heap below position i of a list of n, its root the worst. */
static void sift_down(float *score, int64_t *index, int64_t n, int64_t i) {
    for (;;) {
        int64_t child = 2 * i + 1, smallest = i;
        if (child < n && worse(score[child], index[child], score[smallest], index[smallest])) smallest = child;
        if (child + 1 < n && worse(score[child + 1], index[child + 1], score[smallest], index[smallest]))
            smallest = child + 1;
        if (smallest == i) return;
        float s = score[i];
        int64_t x = index[i];
        score[i] = score[smallest], index[i] = index[smallest];
        score[smallest] = s, index[smallest] = x;
        i = smallest;
    }
}

static void sift_up(float *score, int64_t *index, int64_t i) {
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!worse(score[i], index[i], score[parent], index[parent])) return;
        float s = score[i];
        int64_t x = index[i];
        score[i] = score[parent], index[i] = index[parent];
        score[parent] = s, index[parent] = x;
        i = parent;
    }
}

/* Offers corpus row `row` scored `s` to query q's list, which holds `held` entries. */
static void offer(gc_top_k *top, int64_t q, int64_t held, float s, int64_t row) {
    float *score = top->score + q * top->capacity;
    int64_t *index = top->index + q * top->capacity;
    if (held < top->capacity) {
        score[held] = s, index[held] = row;
        sift_up(score, index, held);
    } else if (worse(score[0], index[0], s, row)) {
        score[0] = s, index[0] = row;
        sift_down(score, index, top->capacity, 0);
    }
}

/* The scores of queries [start, start + rows) against the block's width corpus rows from
 * `first`, [rows, width] on the host, offered to the lists; GC_ERR_FORMAT at the first score
 * that is not finite. */
typedef struct block_scores {
    gc_top_k *top;
    int64_t first, width;
} block_scores;

static gc_status add_scores(void *user, const float *scores, int64_t start, int64_t rows) {
    block_scores *b = user;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < b->width; c++) {
            float s = scores[r * b->width + c];
            int64_t row = b->first + c;
            if (!isfinite(s)) {
                gc_set_error(GC_ERR_FORMAT, "exact search: the score of query row %lld and corpus row %lld is %g "
                             "(an embedding holds nan or inf: the model's weights are broken)",
                             (long long)(start + r), (long long)row, (double)s);
                return GC_ERR_FORMAT;
            }
            offer(b->top, start + r, row < b->top->capacity ? row : b->top->capacity, s, row); /* row: rows before it */
        }
    return GC_OK;
}

gc_status gc_top_k_add(gc_top_k *top, const gc_tensor *queries, const gc_tensor *block) {
    char tq[128], tb[128];
    if (queries->dtype != GC_F32 || block->dtype != GC_F32 || queries->ndim != 2 || block->ndim != 2 ||
        queries->shape[1] != block->shape[1] || queries->shape[0] != top->queries)
        gc_fatal("top_k_add: needs f32 queries [%lld, D] and a block [Nb, D], got %s and %s", (long long)top->queries,
                 gc_tensor_str(queries, tq, sizeof tq), gc_tensor_str(block, tb, sizeof tb));
    block_scores b = {top, top->seen, block->shape[0]};
    if (b.width == 0) return GC_OK;
    gc_status status = gc_cosine_score_blocks(queries, block, add_scores, &b);
    if (status != GC_OK) return status;
    top->seen += b.width;
    top->k = top->seen < top->capacity ? top->seen : top->capacity;
    return GC_OK;
}

typedef struct scored_row {
    float score;
    int64_t index;
} scored_row;

static int best_first(const void *a, const void *b) {
    const scored_row *x = a, *y = b;
    return worse(x->score, x->index, y->score, y->index) ? 1 : worse(y->score, y->index, x->score, x->index) ? -1 : 0;
}

void gc_top_k_finish(gc_top_k *top) {
    scored_row *rows = malloc((size_t)(top->k + 1) * sizeof *rows);
    if (!rows) gc_fatal("top_k_finish: out of host memory for %lld rows", (long long)top->k);
    for (int64_t q = 0; q < top->queries; q++) {
        float *score = top->score + q * top->capacity;
        int64_t *index = top->index + q * top->capacity;
        for (int64_t i = 0; i < top->k; i++) rows[i] = (scored_row){score[i], index[i]};
        qsort(rows, (size_t)top->k, sizeof *rows, best_first);
        for (int64_t i = 0; i < top->k; i++) score[i] = rows[i].score, index[i] = rows[i].index;
    }
    free(rows);
}
