/* trec_eval's measures (train/trec_measures.c) against pytrec_eval, which runs trec_eval's own
 * C code: tests/fixtures/trec_measures_v1.txt (written by tests/make_trec_fixture.py) holds
 * rankings with ties, graded judgements, a query with no relevant document, queries with
 * fewer than 10 and more than 100 documents retrieved, and the figures pytrec_eval gave per
 * query and on average. Tolerance 1e-12: both sides sum the same few terms (at most 100
 * ratios of small integers and logarithms) in the same order but for the mean's, so they
 * differ by rounding only, a few ulps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcache/train.h"

enum { MAX_LINES = 4096, MEASURES = 5 };
static const double TOLERANCE = 1e-12;

typedef struct entry {
    char query[32], doc[32];
    double value; /* a run's score, a judgement's grade */
} entry;

typedef struct fixture {
    entry qrels[MAX_LINES], run[MAX_LINES];
    int n_qrels, n_run;
    char expected_query[64][32];
    double expected[64][MEASURES];
    int n_expected;
    double all[MEASURES];
} fixture;

static void read_fixture(fixture *f) {
    const char *path = GC_TEST_FIXTURES "/trec_measures_v1.txt";
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(GC_TEST_SETUP_ERROR);
    }
    char line[512], kind[16], query[32];
    while (fgets(line, sizeof line, in)) {
        double *v = NULL;
        if (line[0] == '#') continue;
        if (sscanf(line, "%15s", kind) != 1) exit(GC_TEST_SETUP_ERROR);
        if (strcmp(kind, "qrel") == 0 || strcmp(kind, "run") == 0) {
            entry *e = kind[0] == 'q' ? &f->qrels[f->n_qrels++] : &f->run[f->n_run++];
            if (f->n_qrels >= MAX_LINES || f->n_run >= MAX_LINES ||
                sscanf(line, "%*s %31s %31s %lf", e->query, e->doc, &e->value) != 3)
                exit(GC_TEST_SETUP_ERROR);
            continue;
        }
        if (strcmp(kind, "query") == 0) {
            if (f->n_expected >= 64 || sscanf(line, "%*s %31s", query) != 1) exit(GC_TEST_SETUP_ERROR);
            strcpy(f->expected_query[f->n_expected], query);
            v = f->expected[f->n_expected++];
            if (sscanf(line, "%*s %*s %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4]) != MEASURES)
                exit(GC_TEST_SETUP_ERROR);
        } else if (strcmp(kind, "all") == 0) {
            v = f->all;
            if (sscanf(line, "%*s %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4]) != MEASURES)
                exit(GC_TEST_SETUP_ERROR);
        } else {
            exit(GC_TEST_SETUP_ERROR);
        }
    }
    fclose(in);
}

/* The grade of (query, doc) in the qrels, or -1. */
static int64_t grade_of(const fixture *f, const char *query, const char *doc) {
    for (int i = 0; i < f->n_qrels; i++)
        if (strcmp(f->qrels[i].query, query) == 0 && strcmp(f->qrels[i].doc, doc) == 0) return (int64_t)f->qrels[i].value;
    return -1;
}

/* The query's measures from the fixture's run and qrels, the run's lines given in `reverse`
 * order or not (trec_eval's order must not depend on the run file's). */
static gc_trec_measures measure_query(const fixture *f, const char *query, bool reverse) {
    gc_trec_hit hits[MAX_LINES];
    int64_t grades[MAX_LINES], count = 0, judged = 0;
    for (int k = 0; k < f->n_run; k++) {
        const entry *e = &f->run[reverse ? f->n_run - 1 - k : k];
        if (strcmp(e->query, query) == 0) hits[count++] = (gc_trec_hit){e->doc, e->value, grade_of(f, query, e->doc)};
    }
    for (int i = 0; i < f->n_qrels; i++)
        if (strcmp(f->qrels[i].query, query) == 0) grades[judged++] = (int64_t)f->qrels[i].value;
    return gc_trec_query_measures(hits, count, grades, judged);
}

static void values_of(gc_trec_measures m, double v[MEASURES]) {
    v[0] = m.ndcg_at_10, v[1] = m.recall_at_10, v[2] = m.recall_at_100, v[3] = m.mrr_at_10, v[4] = m.map_at_100;
}

static const char *const names[MEASURES] = {"ndcg@10", "recall@10", "recall@100", "mrr@10", "map@100"};

static fixture f;

/* Every query pytrec_eval evaluated (those both judged and retrieved), and the mean. */
static void test_against_pytrec_eval(void) {
    gc_trec_measures per_query[64];
    for (int reverse = 0; reverse < 2; reverse++) {
        for (int q = 0; q < f.n_expected; q++) {
            per_query[q] = measure_query(&f, f.expected_query[q], reverse);
            double got[MEASURES];
            values_of(per_query[q], got);
            for (int m = 0; m < MEASURES; m++)
                CHECK_MSG(fabs(got[m] - f.expected[q][m]) <= TOLERANCE, "%s %s: %.17g, pytrec_eval %.17g",
                          f.expected_query[q], names[m], got[m], f.expected[q][m]);
        }
        double mean[MEASURES];
        values_of(gc_trec_mean(per_query, f.n_expected), mean);
        for (int m = 0; m < MEASURES; m++)
            CHECK_MSG(fabs(mean[m] - f.all[m]) <= TOLERANCE, "all %s: %.17g, pytrec_eval %.17g", names[m], mean[m],
                      f.all[m]);
    }
    CHECK(f.n_expected == 11); /* the cases the generator made, less the run-only and qrels-only ones */
}

/* The order itself: score descending, a tie by document id descending. */
static void test_order(void) {
    gc_trec_hit hits[] = {{"a", 1.0, -1}, {"c", 2.0, -1}, {"b", 1.0, -1}, {"ab", 1.0, -1}, {"d", 0.5, -1}};
    gc_trec_order(hits, 5);
    const char *want[] = {"c", "b", "ab", "a", "d"};
    for (int i = 0; i < 5; i++) CHECK_MSG(strcmp(hits[i].doc, want[i]) == 0, "rank %d: %s", i + 1, hits[i].doc);
}

/* A hand-computed case: ties decide which relevant document comes first. Docs d3, d2, d1 all
 * score 0.5 (order d3, d2, d1); d1 grade 2, d3 grade 1, d2 unjudged. DCG = 1/log2(2) +
 * 2/log2(4) = 2; ideal = 2 + 1/log2(3); recall 1; MRR 1 (d3 first); AP = (1/1 + 2/3) / 2. */
static void test_by_hand(void) {
    gc_trec_hit hits[] = {{"d1", 0.5, 2}, {"d2", 0.5, -1}, {"d3", 0.5, 1}};
    int64_t grades[] = {2, 1};
    gc_trec_measures m = gc_trec_query_measures(hits, 3, grades, 2);
    CHECK_NEAR(m.ndcg_at_10, 2.0 / (2.0 + 1.0 / log2(3.0)), 1e-15, 0);
    CHECK_NEAR(m.recall_at_10, 1.0, 0, 0);
    CHECK_NEAR(m.mrr_at_10, 1.0, 0, 0);
    CHECK_NEAR(m.map_at_100, (1.0 + 2.0 / 3.0) / 2.0, 1e-15, 0);
    /* a relevant document at rank 11 counts for recall@100 and MAP, not for the cut at 10 */
    gc_trec_hit deep[11];
    char ids[11][4];
    for (int i = 0; i < 11; i++) {
        snprintf(ids[i], sizeof ids[i], "%c", 'a' + i);
        deep[i] = (gc_trec_hit){ids[i], 11.0 - i, i == 10 ? 1 : 0};
    }
    int64_t one[] = {1};
    m = gc_trec_query_measures(deep, 11, one, 1);
    CHECK(m.ndcg_at_10 == 0 && m.recall_at_10 == 0 && m.mrr_at_10 == 0);
    CHECK_NEAR(m.recall_at_100, 1.0, 0, 0);
    CHECK_NEAR(m.map_at_100, 1.0 / 11.0, 1e-15, 0);
}

int main(void) {
    read_fixture(&f);
    GC_TEST_CASE(test_against_pytrec_eval);
    GC_TEST_CASE(test_order);
    GC_TEST_CASE(test_by_hand);
    return gc_test_result();
}
