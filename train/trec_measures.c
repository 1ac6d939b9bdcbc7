/* trec_eval's measures (see gradcache/train.h), written from trec_eval's definitions
 * (form_res_rels.c, m_ndcg_cut.c, m_recall.c, m_map_cut.c, m_recip_rank.c of usnistgov/trec_eval
 * 9.0.8 and later) and checked against pytrec_eval in tests/test_trec_measures.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"

/* Only these cut-offs are reported; the ranking is read no further than the largest. */
enum { NDCG_CUT = 10, RECALL_CUT_SMALL = 10, RECALL_CUT_LARGE = 100, MRR_CUT = 10, MAP_CUT = 100 };

/* trec_eval's comp_sim_docno: the higher score first; a tie, the larger document id first. */
static int compare_hits(const void *a, const void *b) {
    const gc_trec_hit *x = a, *y = b;
    if (x->score > y->score) return -1;
    if (x->score < y->score) return 1;
    return strcmp(y->doc, x->doc);
}

void gc_trec_order(gc_trec_hit *hits, int64_t count) {
    if (count > 1) qsort(hits, (size_t)count, sizeof *hits, compare_hits);
}

static int compare_grades_descending(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* The discount of (1-based) rank r: log2(r + 1), trec_eval's log2(i + 2) of index i. */
static double discount(int64_t rank) { return log2((double)(rank + 1)); }

/* The ideal DCG at NDCG_CUT: the query's grades, the largest first. */
static double ideal_dcg(const int64_t *grades, int64_t judged) {
    int64_t *sorted = malloc((size_t)(judged ? judged : 1) * sizeof *sorted);
    if (!sorted) gc_fatal("trec_query_measures: out of host memory for %lld grades", (long long)judged);
    memcpy(sorted, grades, (size_t)judged * sizeof *sorted);
    qsort(sorted, (size_t)judged, sizeof *sorted, compare_grades_descending);
    double ideal = 0.0;
    for (int64_t i = 0; i < judged && i < NDCG_CUT && sorted[i] > 0; i++) ideal += (double)sorted[i] / discount(i + 1);
    free(sorted);
    return ideal;
}

gc_trec_measures gc_trec_query_measures(gc_trec_hit *hits, int64_t count, const int64_t *grades, int64_t judged) {
    gc_trec_measures m = {0};
    int64_t relevant = 0;
    for (int64_t i = 0; i < judged; i++) relevant += grades[i] >= 1;
    if (relevant == 0) return m; /* trec_eval: every measure stays 0, the query still counts */
    gc_trec_order(hits, count);
    double dcg = 0.0, precision_sum = 0.0;
    int64_t found = 0; /* relevant documents so far */
    for (int64_t i = 0; i < count && i < RECALL_CUT_LARGE; i++) {
        int64_t rank = i + 1, grade = hits[i].grade;
        if (rank <= NDCG_CUT && grade > 0) dcg += (double)grade / discount(rank);
        if (grade < 1) continue;
        found++;
        if (rank <= MRR_CUT && found == 1) m.mrr_at_10 = 1.0 / (double)rank;
        if (rank <= RECALL_CUT_SMALL) m.recall_at_10 = (double)found / (double)relevant;
        if (rank <= MAP_CUT) precision_sum += (double)found / (double)rank;
        m.recall_at_100 = (double)found / (double)relevant;
    }
    m.ndcg_at_10 = dcg / ideal_dcg(grades, judged);
    m.map_at_100 = precision_sum / (double)relevant;
    return m;
}

gc_trec_measures gc_trec_mean(const gc_trec_measures *per_query, int64_t count) {
    gc_trec_measures sum = {0};
    for (int64_t i = 0; i < count; i++) {
        sum.ndcg_at_10 += per_query[i].ndcg_at_10;
        sum.recall_at_10 += per_query[i].recall_at_10;
        sum.recall_at_100 += per_query[i].recall_at_100;
        sum.mrr_at_10 += per_query[i].mrr_at_10;
        sum.map_at_100 += per_query[i].map_at_100;
    }
    if (count == 0) return sum;
    double n = (double)count;
    return (gc_trec_measures){sum.ndcg_at_10 / n, sum.recall_at_10 / n, sum.recall_at_100 / n, sum.mrr_at_10 / n,
                              sum.map_at_100 / n};
}
