/* Exact search (train/exact_search.c) against brute force: every score computed on the host in
 * f64 from the same f32 embeddings, every list sorted whole. The corpus is fed in blocks of
 * several sizes (one row, a size that does not divide it, all at once), so a running top-k
 * that lost or duplicated a row at a block's edge would show. Scores match to 1e-5: the
 * library's are f32 dot products of f32 unit vectors, D = 16 terms each; the rankings are
 * compared only where the brute force's neighbours differ by more than that. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcache/train.h"

enum { QUERIES = 37, CORPUS = 203, DIM = 16 };

static float queries[QUERIES * DIM], corpus[CORPUS * DIM];

static void fill(float *values, int64_t n, uint32_t seed) {
    uint32_t state = seed;
    for (int64_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        values[i] = (float)((state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
    }
}

static double cosine(const float *a, const float *b) {
    double dot = 0, na = 0, nb = 0;
    for (int d = 0; d < DIM; d++) dot += (double)a[d] * b[d], na += (double)a[d] * a[d], nb += (double)b[d] * b[d];
    return dot / sqrt(na * nb);
}

typedef struct scored {
    double score;
    int64_t index;
} scored;

static int best_first(const void *a, const void *b) {
    const scored *x = a, *y = b;
    return x->score > y->score ? -1 : x->score < y->score ? 1 : (x->index > y->index) - (x->index < y->index);
}

static gc_tensor *rows_of(const float *values, int64_t rows) {
    int64_t shape[2] = {rows, DIM};
    gc_tensor *t = gc_from_host(values, 2, shape, GC_F32, gc_cpu());
    REQUIRE(t);
    return t;
}

/* The top `k` of every query, the corpus fed `block` rows at a time, against brute force. */
static void check_search(int64_t k, int64_t block) {
    gc_top_k top;
    REQUIRE(gc_top_k_init(&top, QUERIES, k) == GC_OK);
    gc_tensor *q = rows_of(queries, QUERIES);
    for (int64_t start = 0; start < CORPUS; start += block) {
        int64_t rows = CORPUS - start < block ? CORPUS - start : block;
        gc_tensor *b = rows_of(corpus + start * DIM, rows);
        REQUIRE(gc_top_k_add(&top, q, b) == GC_OK);
        gc_tensor_release(b);
    }
    gc_top_k_finish(&top);
    int64_t want_k = k < CORPUS ? k : CORPUS;
    CHECK_MSG(top.k == want_k && top.seen == CORPUS, "k %lld, seen %lld", (long long)top.k, (long long)top.seen);
    scored all[CORPUS];
    for (int64_t i = 0; i < QUERIES; i++) {
        for (int64_t c = 0; c < CORPUS; c++) all[c] = (scored){cosine(queries + i * DIM, corpus + c * DIM), c};
        qsort(all, CORPUS, sizeof *all, best_first);
        for (int64_t r = 0; r < top.k; r++) {
            int64_t got = top.index[i * top.capacity + r];
            float score = top.score[i * top.capacity + r];
            bool clear = (r == 0 || all[r - 1].score - all[r].score > 1e-5) &&
                         (r + 1 == CORPUS || all[r].score - all[r + 1].score > 1e-5);
            CHECK_MSG(!clear || got == all[r].index, "k %lld block %lld query %lld rank %lld: row %lld, want %lld",
                      (long long)k, (long long)block, (long long)i, (long long)r, (long long)got,
                      (long long)all[r].index);
            CHECK_MSG(fabs(score - all[r].score) <= 1e-5, "query %lld rank %lld: score %g, want %g", (long long)i,
                      (long long)r, score, all[r].score);
            if (r > 0) CHECK(score <= top.score[i * top.capacity + r - 1]);
        }
    }
    gc_tensor_release(q);
    gc_top_k_free(&top);
}

static void test_against_brute_force(void) {
    const int64_t ks[] = {1, 10, 100, 500}, blocks[] = {1, 17, 64, CORPUS};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) check_search(ks[a], blocks[b]);
}

/* Equal scores: the lower corpus row is kept and ranked first, whatever the blocks. */
static void test_ties(void) {
    float same[6 * DIM];
    for (int r = 0; r < 6; r++)
        for (int d = 0; d < DIM; d++) same[r * DIM + d] = d == 0 ? 1.0f : 0.0f;
    for (int64_t block = 1; block <= 6; block++) {
        gc_top_k top;
        REQUIRE(gc_top_k_init(&top, 1, 3) == GC_OK);
        gc_tensor *q = rows_of(same, 1);
        for (int64_t start = 0; start < 6; start += block) {
            gc_tensor *b = rows_of(same + start * DIM, 6 - start < block ? 6 - start : block);
            REQUIRE(gc_top_k_add(&top, q, b) == GC_OK);
            gc_tensor_release(b);
        }
        gc_top_k_finish(&top);
        for (int r = 0; r < 3; r++) CHECK_MSG(top.index[r] == r, "block %lld rank %d: row %lld", (long long)block, r,
                                               (long long)top.index[r]);
        gc_tensor_release(q);
        gc_top_k_free(&top);
    }
}

/* A nan in the corpus is an error naming its row, not a ranking. */
static void test_nonfinite(void) {
    float bad[3 * DIM];
    memcpy(bad, corpus, sizeof bad);
    bad[1 * DIM + 4] = NAN;
    gc_top_k top;
    REQUIRE(gc_top_k_init(&top, QUERIES, 5) == GC_OK);
    gc_tensor *q = rows_of(queries, QUERIES), *b = rows_of(bad, 3);
    CHECK(gc_top_k_add(&top, q, b) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "corpus row 1"), "%s", gc_last_error());
    gc_clear_error();
    gc_tensor_release(q);
    gc_tensor_release(b);
    gc_top_k_free(&top);
}

int main(void) {
    fill(queries, QUERIES * DIM, 1);
    fill(corpus, CORPUS * DIM, 2);
    GC_TEST_CASE(test_against_brute_force);
    GC_TEST_CASE(test_ties);
    GC_TEST_CASE(test_nonfinite);
    return gc_test_result();
}
