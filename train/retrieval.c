/* Retrieval evaluation (see gradcache/train.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/autograd.h"
#include "gradcache/ops.h"
#include "gradcache/train.h"
#include "cosine_blocks.h"

/* Rows copied to the host at a time by the finiteness check. */
enum { QUERY_BLOCK = GC_COSINE_QUERY_BLOCK };

typedef struct indexed_text {
    const char *text;
    int64_t index;
} indexed_text;

static int compare_texts(const void *a, const void *b) {
    const indexed_text *x = a, *y = b;
    int order = strcmp(x->text, y->text);
    return order ? order : (x->index > y->index) - (x->index < y->index);
}

int64_t gc_distinct_texts(const char *const *texts, int64_t count, const char ***distinct, int64_t *index) {
    indexed_text *sorted = malloc((size_t)(count ? count : 1) * sizeof *sorted);
    *distinct = malloc((size_t)(count ? count : 1) * sizeof **distinct);
    if (!sorted || !*distinct) gc_fatal("distinct_texts: out of host memory for %lld texts", (long long)count);
    for (int64_t i = 0; i < count; i++) sorted[i] = (indexed_text){texts[i], i};
    qsort(sorted, (size_t)count, sizeof *sorted, compare_texts);
    int64_t unique = 0;
    for (int64_t i = 0; i < count; i++) {
        if (i == 0 || strcmp(sorted[i].text, sorted[i - 1].text) != 0) (*distinct)[unique++] = sorted[i].text;
        index[sorted[i].index] = unique - 1;
    }
    free(sorted);
    return unique;
}

/* The first row of x [N, D] (f32) holding a nan or an infinity, or -1; copied to the host
 * QUERY_BLOCK rows at a time. */
static int64_t first_nonfinite_row(const gc_tensor *x) {
    int64_t rows = x->shape[0], width = x->shape[1];
    float *values = malloc((size_t)(QUERY_BLOCK * width + 1) * sizeof *values);
    if (!values) gc_fatal("retrieval_evaluate: out of host memory for %d rows of %lld", QUERY_BLOCK, (long long)width);
    int64_t found = -1;
    for (int64_t start = 0; start < rows && found < 0; start += QUERY_BLOCK) {
        int64_t end = start + QUERY_BLOCK < rows ? start + QUERY_BLOCK : rows;
        gc_tensor *block = gc_slice0(x, start, end); /* a view: cannot fail */
        gc_copy_to_host(block, values);
        gc_tensor_release(block);
        for (int64_t i = 0; i < (end - start) * width && found < 0; i++)
            if (!isfinite(values[i])) found = start + i / width;
    }
    free(values);
    return found;
}

/* GC_ERR_FORMAT naming the first row of x [N, D] that is not finite: ranked, a nan would tie
 * with everything and an infinity beat it, so no number printed would mean anything. */
static gc_status check_finite(const gc_tensor *x, const char *what) {
    int64_t row = first_nonfinite_row(x);
    if (row < 0) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "the embedding of %s row %lld (of %lld, from 0) holds nan or inf: the model's "
                 "weights are broken", what, (long long)row, (long long)x->shape[0]);
    return GC_ERR_FORMAT;
}

/* What add_ranks needs besides the scores. */
typedef struct ranking {
    int64_t candidates;
    const int64_t *positive; /* [Nq] */
    gc_retrieval_metrics *metrics;
} ranking;

/* Adds the ranks of queries [start, start + rows) given their scores [rows, Nc] on the host.
 * A tie counts against the query: rank = 1 + the other candidates scored at least as high as
 * its positive, so a model that scores everything alike ranks every positive last. */
static gc_status add_ranks(void *user, const float *scores, int64_t start, int64_t rows) {
    const ranking *ranks = user;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = scores + r * ranks->candidates;
        int64_t positive = ranks->positive[start + r];
        float target = row[positive];
        int64_t rank = 1;
        for (int64_t c = 0; c < ranks->candidates; c++) rank += c != positive && row[c] >= target;
        ranks->metrics->recall_at_1 += rank == 1;
        ranks->metrics->recall_at_10 += rank <= 10;
        ranks->metrics->mrr += 1.0 / (double)rank;
    }
    return GC_OK;
}

gc_status gc_retrieval_evaluate(const gc_tensor *queries, const gc_tensor *candidates, const int64_t *positive,
                                gc_retrieval_metrics *metrics) {
    char tq[128], tc[128];
    if (queries->dtype != GC_F32 || candidates->dtype != GC_F32 || queries->ndim != 2 || candidates->ndim != 2 ||
        queries->shape[1] != candidates->shape[1])
        gc_fatal("retrieval_evaluate: needs f32 queries [Nq, D] and candidates [Nc, D], got %s and %s",
                 gc_tensor_str(queries, tq, sizeof tq), gc_tensor_str(candidates, tc, sizeof tc));
    int64_t n_queries = queries->shape[0], n_candidates = candidates->shape[0];
    *metrics = (gc_retrieval_metrics){.queries = n_queries, .candidates = n_candidates};
    for (int64_t i = 0; i < n_queries; i++)
        if (positive[i] < 0 || positive[i] >= n_candidates)
            gc_fatal("retrieval_evaluate: query %lld has positive %lld outside [0, %lld)", (long long)i,
                     (long long)positive[i], (long long)n_candidates);
    gc_status status = check_finite(queries, "query");
    if (status == GC_OK) status = check_finite(candidates, "candidate");
    ranking ranks = {n_candidates, positive, metrics};
    if (status == GC_OK) status = gc_cosine_score_blocks(queries, candidates, add_ranks, &ranks);
    if (status == GC_OK && n_queries > 0) {
        metrics->recall_at_1 /= (double)n_queries;
        metrics->recall_at_10 /= (double)n_queries;
        metrics->mrr /= (double)n_queries;
    }
    return status;
}

/* metrics[j]: the ranking at prefix dims[j] of queries [Nq, D] and candidates [Nc, D] */
static gc_status evaluate_prefixes(const gc_tensor *queries, const gc_tensor *candidates, const int64_t *positive,
                                   const int64_t *dims, int n_dims, gc_retrieval_metrics *metrics) {
    int64_t embedding = queries->shape[1];
    gc_status status = GC_OK;
    for (int j = 0; j < n_dims && status == GC_OK; j++) {
        int64_t d = dims[j] ? dims[j] : embedding;
        if (d < 1 || d > embedding) {
            gc_set_error(GC_ERR_CONFIG, "--matryoshka %lld: the embedding has %lld dimensions", (long long)d,
                         (long long)embedding);
            return GC_ERR_CONFIG;
        }
        bool previous = gc_set_grad_enabled(false);
        gc_tensor *q = gc_matryoshka_prefix(queries, d), *c = gc_matryoshka_prefix(candidates, d);
        gc_set_grad_enabled(previous);
        status = q && c ? gc_retrieval_evaluate(q, c, positive, &metrics[j]) : gc_last_status();
        gc_tensor_release(q);
        gc_tensor_release(c);
    }
    return status;
}

gc_status gc_retrieval_evaluate_pairs(gc_dual_encoder *model, const gc_pairs *pairs, int64_t count, int64_t batch,
                                      gc_retrieval_metrics *metrics) {
    const int64_t all[1] = {0};
    return gc_retrieval_evaluate_pairs_at(model, pairs, count, batch, all, 1, metrics);
}

gc_status gc_retrieval_evaluate_pairs_at(gc_dual_encoder *model, const gc_pairs *pairs, int64_t count, int64_t batch,
                                         const int64_t *dims, int n_dims, gc_retrieval_metrics *metrics) {
    const char **queries = malloc((size_t)count * sizeof *queries);
    const char **positives = malloc((size_t)count * sizeof *positives);
    int64_t *positive_index = malloc((size_t)count * sizeof *positive_index);
    if (!queries || !positives || !positive_index)
        gc_fatal("retrieval_evaluate_pairs: out of host memory for %lld pairs", (long long)count);
    for (int64_t i = 0; i < count; i++) {
        queries[i] = gc_pairs_text(pairs, i, 0);
        positives[i] = gc_pairs_text(pairs, i, 1);
    }
    const char **words;
    int64_t n_words = gc_distinct_texts(positives, count, &words, positive_index);
    /* [count, D] */
    gc_tensor *query_reps = gc_dual_encoder_encode(model, 0, queries, count, batch);
    gc_tensor *word_reps = query_reps ? gc_dual_encoder_encode(model, 1, words, n_words, batch) : NULL; /* [n_words, D] */
    gc_status status = word_reps ? evaluate_prefixes(query_reps, word_reps, positive_index, dims, n_dims, metrics)
                                 : gc_last_status();
    gc_tensor_release(query_reps);
    gc_tensor_release(word_reps);
    free(words);
    free(queries);
    free(positives);
    free(positive_index);
    return status;
}
