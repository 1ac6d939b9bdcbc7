/* Mining hard negatives (train/mine.c) against a brute-force oracle written plainly here, as
 * sentence-transformers' mine_hard_negatives defines it: every score of a query computed, all
 * sorted (ties: the lower row first), the first range_max + (most positives) kept, the
 * positives removed, the filters applied against the lowest positive score, the window
 * [range_min, range_max) of the survivors, then the first `negatives` (top) or any `negatives`
 * of them in rank order (random). Every embedding has components +-1 and D = 16, so its unit
 * vector has components +-1/4 and every score is a multiple of 1/16, exact in f32 and f64 in
 * any order of summation: the library's scores and the oracle's are equal, not close, and the
 * many ties (and filters hit exactly at their boundary) are compared exactly too. The corpus is
 * fed in blocks of 1, 7 and all rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcache/train.h"

enum { QUERIES = 29, CORPUS = 97, DIM = 16, MOST_POSITIVES = 3 };

static float queries[QUERIES * DIM], corpus[CORPUS * DIM];
static int64_t positive_start[QUERIES + 1], positive_rows[QUERIES * MOST_POSITIVES];
static uint32_t state = 12345;

static uint32_t next_random(void) {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
}

/* Rows of +-1; every fifth corpus row repeats an earlier one (equal scores). */
static void make_data(void) {
    for (int i = 0; i < QUERIES * DIM; i++) queries[i] = next_random() & 1 ? 1.0f : -1.0f;
    for (int r = 0; r < CORPUS; r++)
        for (int d = 0; d < DIM; d++)
            corpus[r * DIM + d] = r % 5 == 4 ? corpus[(r / 2) * DIM + d] : next_random() & 1 ? 1.0f : -1.0f;
    for (int q = 0; q < QUERIES; q++) {
        int n = 1 + (int)(next_random() % MOST_POSITIVES);
        positive_start[q + 1] = positive_start[q] + n;
        for (int i = 0; i < n; i++) positive_rows[positive_start[q] + i] = (int64_t)(next_random() % CORPUS);
    }
}

static double score(int64_t q, int64_t row) {
    double dot = 0;
    for (int d = 0; d < DIM; d++) dot += (double)queries[q * DIM + d] * corpus[row * DIM + d];
    return dot / DIM; /* both norms are 4 */
}

typedef struct scored {
    double score;
    int64_t row;
} scored;

static int best_first(const void *a, const void *b) {
    const scored *x = a, *y = b;
    return x->score > y->score ? -1 : x->score < y->score ? 1 : (x->row > y->row) - (x->row < y->row);
}

/* The oracle: query q's window of survivors, rows in rank order, into window; returns its size. */
static int64_t oracle_window(int64_t q, const gc_mine_options *o, int64_t range_max, int64_t *window) {
    scored all[CORPUS];
    for (int64_t r = 0; r < CORPUS; r++) all[r] = (scored){score(q, r), r};
    qsort(all, CORPUS, sizeof *all, best_first);
    int64_t kept = range_max + MOST_POSITIVES < CORPUS ? range_max + MOST_POSITIVES : CORPUS;
    double lowest = INFINITY;
    for (int64_t i = positive_start[q]; i < positive_start[q + 1]; i++)
        lowest = fmin(lowest, score(q, positive_rows[i]));
    int64_t survivors = 0, count = 0;
    for (int64_t i = 0; i < kept; i++) {
        bool positive = false;
        for (int64_t j = positive_start[q]; j < positive_start[q + 1]; j++) positive |= positive_rows[j] == all[i].row;
        double s = all[i].score;
        if (positive) continue;
        if (!isnan(o->margin) && s > lowest - o->margin) continue;
        if (!isnan(o->relative_margin) && s > lowest * (1 - o->relative_margin)) continue;
        if (!isnan(o->max_score) && s > o->max_score) continue;
        if (survivors >= range_max) break;
        if (survivors++ >= o->range_min) window[count++] = all[i].row;
    }
    return count;
}

static gc_tensor *rows_of(const float *values, int64_t rows) {
    int64_t shape[2] = {rows, DIM};
    gc_tensor *t = gc_from_host(values, 2, shape, GC_F32, gc_cpu());
    REQUIRE(t);
    return t;
}

/* Mines with options `o`, the corpus `block` rows at a time; chosen [QUERIES, negatives], found [QUERIES]. */
static void mine(const gc_mine_options *o, int64_t block, int64_t *chosen, int64_t *found, int64_t *range_max) {
    gc_tensor *q = rows_of(queries, QUERIES);
    gc_miner miner;
    REQUIRE(gc_miner_init(&miner, q, positive_start, positive_rows, o) == GC_OK);
    for (int64_t start = 0; start < CORPUS; start += block) {
        gc_tensor *b = rows_of(corpus + start * DIM, CORPUS - start < block ? CORPUS - start : block);
        REQUIRE(gc_miner_add(&miner, b) == GC_OK);
        gc_tensor_release(b);
    }
    for (int64_t i = 0; i < QUERIES; i++) found[i] = gc_miner_choose(&miner, i, chosen + i * o->negatives);
    for (int64_t i = 0; i < QUERIES; i++) /* the positives' own scores, exactly */
        for (int64_t j = positive_start[i]; j < positive_start[i + 1]; j++)
            CHECK_MSG(miner.positive_score[j] == score(i, positive_rows[j]), "query %lld positive %lld: %g, want %g",
                      (long long)i, (long long)j, miner.positive_score[j], score(i, positive_rows[j]));
    *range_max = miner.options.range_max;
    gc_miner_free(&miner);
    gc_tensor_release(q);
}

/* The library's choice equals the oracle's for every query and every block size; `name` in
 * messages. Returns how many queries (of the last block size) got no negatives. */
static int64_t check_case(const char *name, const gc_mine_options *o) {
    int64_t blocks[] = {1, 7, CORPUS};
    int64_t n = o->negatives, chosen[QUERIES * 40], found[QUERIES], window[CORPUS], range_max, complete = 0, none = 0;
    for (int b = 0; b < 3; b++) {
        none = 0;
        mine(o, blocks[b], chosen, found, &range_max);
        for (int64_t q = 0; q < QUERIES; q++) {
            int64_t count = oracle_window(q, o, range_max, window);
            int64_t want = count >= n ? n : 0;
            CHECK_MSG(found[q] == want, "%s, block %lld, query %lld: %lld negatives, want %lld", name,
                      (long long)blocks[b], (long long)q, (long long)found[q], (long long)want);
            if (found[q] != want) continue;
            complete += want > 0;
            none += want == 0;
            int64_t position = -1; /* in the window: strictly rising (rank order) */
            for (int64_t i = 0; i < want; i++) {
                int64_t got = chosen[q * n + i], at = position + 1;
                if (o->sampling == GC_MINE_TOP) {
                    CHECK_MSG(got == window[i], "%s, block %lld, query %lld, negative %lld: row %lld, want %lld", name,
                              (long long)blocks[b], (long long)q, (long long)i, (long long)got, (long long)window[i]);
                    continue;
                }
                while (at < count && window[at] != got) at++;
                CHECK_MSG(at < count, "%s, query %lld: row %lld is not after position %lld of the window", name,
                          (long long)q, (long long)got, (long long)position);
                position = at;
            }
        }
    }
    CHECK_MSG(complete > 0, "%s: no query got its negatives (the case tests nothing)", name);
    return none;
}

static gc_mine_options options(int64_t negatives) {
    gc_mine_options o = gc_mine_options_default();
    o.negatives = negatives;
    return o;
}

/* Random sampling: the same seed the same picks, whatever the blocks; over many seeds, every
 * position of a window of 12 is picked (a sampler stuck on some would not). */
static void check_random_spread(void) {
    gc_mine_options o = options(3);
    o.sampling = GC_MINE_RANDOM, o.range_max = 12 + MOST_POSITIVES;
    int64_t a[QUERIES * 3], b[QUERIES * 3], found[QUERIES], range_max, window[CORPUS];
    o.seed = 5;
    mine(&o, 1, a, found, &range_max);
    mine(&o, CORPUS, b, found, &range_max);
    CHECK(memcmp(a, b, sizeof a) == 0);
    int64_t count = oracle_window(0, &o, range_max, window);
    REQUIRE(count >= 10);
    bool seen[CORPUS] = {0};
    for (uint64_t seed = 0; seed < 60; seed++) {
        o.seed = seed;
        mine(&o, CORPUS, a, found, &range_max);
        for (int i = 0; i < 3; i++) seen[a[i]] = true;
    }
    for (int64_t i = 0; i < count; i++)
        CHECK_MSG(seen[window[i]], "position %lld of query 0's window never drawn in 60 seeds", (long long)i);
}

/* A bad option is GC_ERR_CONFIG naming the flag, nothing allocated. */
static void test_refusals(void) {
    gc_tensor *q = rows_of(queries, QUERIES);
    gc_miner miner;
    struct {
        gc_mine_options o;
        const char *flag;
    } cases[] = {{options(0), "--num-negatives"}, {options(3), "--range-min"}, {options(3), "--range-max"},
                 {options(3), "--margin"}};
    cases[1].o.range_min = -1;
    cases[2].o.range_min = 5, cases[2].o.range_max = 7;
    cases[3].o.margin = INFINITY;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CHECK(gc_miner_init(&miner, q, positive_start, positive_rows, &cases[i].o) == GC_ERR_CONFIG);
        CHECK_MSG(strstr(gc_last_error(), cases[i].flag) != NULL, "%s", gc_last_error());
    }
    gc_tensor_release(q);
}

static void test_top_and_ranges(void) {
    gc_mine_options o = options(3);
    check_case("top 3", &o);
    o = options(4), o.range_min = 2, o.range_max = 12;
    check_case("range 2..12", &o);
    o = options(16), o.range_max = 24, o.max_score = 0.125;
    CHECK(check_case("more negatives than some windows hold", &o) > 0);
}

static void test_filters(void) {
    gc_mine_options o = options(2);
    o.margin = 0.125;
    check_case("margin 1/8", &o);
    o = options(2), o.relative_margin = 0.25;
    check_case("relative margin 1/4", &o);
    o = options(2), o.max_score = 0.25;
    check_case("max score 1/4", &o);
    o = options(3), o.margin = 0.0, o.max_score = 0.5, o.range_min = 1;
    check_case("margin 0, max score 1/2, range min 1", &o);
}

static void test_random(void) {
    gc_mine_options o = options(3);
    o.sampling = GC_MINE_RANDOM, o.seed = 9, o.range_max = 30;
    check_case("random 3 of 30", &o);
    o = options(2), o.sampling = GC_MINE_RANDOM, o.seed = 3, o.relative_margin = 0.1, o.range_min = 1;
    check_case("random, relative margin, range min", &o);
    check_random_spread();
}

int main(void) {
    make_data();
    GC_TEST_CASE(test_top_and_ranges);
    GC_TEST_CASE(test_filters);
    GC_TEST_CASE(test_random);
    GC_TEST_CASE(test_refusals);
    return gc_test_result();
}
