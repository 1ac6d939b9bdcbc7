/* Retrieval evaluation: each query's positive ranked among every distinct candidate by
 * cosine similarity. The rank of a positive is 1 + the number of other candidates scored at
 * least as high: a tie counts against the query (the pessimistic convention), so a collapsed
 * model -- every score alike, as when its projection is all zeros -- ranks every positive
 * last instead of first. Recall@k is the fraction of queries whose positive ranks k or
 * better, MRR the mean of 1 / rank. */
#ifndef GC_CLI_RETRIEVAL_H
#define GC_CLI_RETRIEVAL_H

#include "gradcache/gradcache.h"

typedef struct gc_retrieval_metrics {
    int64_t queries, candidates;
    double recall_at_1, recall_at_10, mrr;
} gc_retrieval_metrics;

/* The distinct texts among texts[0..count), in byte order, written to *distinct (an array the
 * caller frees, pointing into texts); index[i] receives the position of texts[i] among them.
 * Returns how many there are. */
int64_t gc_distinct_texts(const char *const *texts, int64_t count, const char ***distinct, int64_t *index);

/* queries [Nq, D], candidates [Nc, D] on one device; positive[i] in [0, Nc) is query i's.
 * GC_OK; GC_ERR_FORMAT naming the first query or candidate whose embedding holds a nan or
 * an infinity (nothing is ranked then); or an allocation error. */
gc_status gc_retrieval_evaluate(const gc_tensor *queries, const gc_tensor *candidates, const int64_t *positive,
                                gc_retrieval_metrics *metrics);

#endif
