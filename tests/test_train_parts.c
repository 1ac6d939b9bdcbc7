/* The trainer's parts, against hand-computed values: retrieval ranks and metrics, the distinct
 * candidates, the epoch order and the batch sampler, the training batch layout, exact number
 * text and typed metadata. (The commands themselves are tested by test_cli_train.sh.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gradcache/train.h"
#include "train/metadata.h"
#include "train/numbers.h"

static void test_distinct_texts(void) {
    const char *texts[] = {"b", "a", "b", "c", "a"};
    const char **distinct;
    int64_t index[5];
    int64_t count = gc_distinct_texts(texts, 5, &distinct, index);
    CHECK(count == 3);
    CHECK(strcmp(distinct[0], "a") == 0 && strcmp(distinct[1], "b") == 0 && strcmp(distinct[2], "c") == 0);
    int64_t want[] = {1, 0, 1, 2, 0};
    for (int i = 0; i < 5; i++)
        CHECK_MSG(index[i] == want[i], "text %d: index %lld, want %lld", i, (long long)index[i], (long long)want[i]);
    free(distinct);
}

/* A positive outside the candidates is a programmer error. */
static void evaluate_out_of_range(void *unused) {
    (void)unused;
    gc_tensor *candidates = gc_zeros(GC_SHAPE(2, 3), GC_F32, gc_cpu());
    gc_tensor *queries = gc_zeros(GC_SHAPE(1, 3), GC_F32, gc_cpu());
    int64_t positive[] = {2};
    gc_retrieval_metrics metrics;
    gc_retrieval_evaluate(queries, candidates, positive, &metrics);
}

/* [count, 2] rows (scale cos a, scale sin a) for the angles in degrees */
static gc_tensor *at_angles(const double *degrees, const double *scales, int count) {
    float values[32];
    for (int i = 0; i < count; i++) {
        double radians = degrees[i] * acos(-1.0) / 180;
        values[2 * i] = (float)(scales[i] * cos(radians));
        values[2 * i + 1] = (float)(scales[i] * sin(radians));
    }
    return gc_from_host(values, GC_SHAPE(count, 2), GC_F32, gc_cpu());
}

/* Twelve candidates at 0, 10, ..., 110 degrees with lengths 1..12, so that ranking by dot
 * product instead of cosine would go wrong. Cosine ranks by angular distance:
 *   query at 0 degrees, positive at 0:    rank 1
 *   query at 0 degrees, positive at 110:  rank 12 (every other candidate is nearer)
 *   query at 47 degrees, positive at 30:  rank 4 (50, 40 and 60 are nearer: 3, 7, 13 < 17)
 * so Recall@1 = 1/3, Recall@10 = 2/3, MRR = (1 + 1/12 + 1/4) / 3 = 4/9. */
static void test_retrieval_metrics(void) {
    double candidate_degrees[12], candidate_scales[12];
    for (int k = 0; k < 12; k++) {
        candidate_degrees[k] = 10.0 * k;
        candidate_scales[k] = k + 1;
    }
    double query_degrees[] = {0, 0, 47}, query_scales[] = {1, 5, 0.5};
    gc_tensor *candidates = at_angles(candidate_degrees, candidate_scales, 12);
    gc_tensor *queries = at_angles(query_degrees, query_scales, 3);
    REQUIRE(candidates && queries);
    int64_t positive[] = {0, 11, 3};
    gc_retrieval_metrics metrics;
    CHECK(gc_retrieval_evaluate(queries, candidates, positive, &metrics) == GC_OK);
    CHECK(metrics.queries == 3 && metrics.candidates == 12);
    /* exact fractions of 3 queries, computed in double: 1e-12 covers their rounding */
    CHECK_NEAR(metrics.recall_at_1, 1.0 / 3, 1e-12, 0);
    CHECK_NEAR(metrics.recall_at_10, 2.0 / 3, 1e-12, 0);
    CHECK_NEAR(metrics.mrr, 4.0 / 9, 1e-12, 0);
    gc_test_expect_fatal(evaluate_out_of_range, NULL, "retrieval_evaluate: query 0 has positive 2 outside [0, 2)");
    RELEASE(candidates, queries);
}

/* Ties count against the query. A collapsed model scores every candidate alike (here zero
 * embeddings, what a projection of zeros gives): each positive ranks last, not first. A
 * candidate tied with the positive (the same direction) ranks ahead of it too. */
static void test_retrieval_ties(void) {
    gc_tensor *zeros_q = gc_zeros(GC_SHAPE(3, 4), GC_F32, gc_cpu()), *zeros_c = gc_zeros(GC_SHAPE(3, 4), GC_F32, gc_cpu());
    REQUIRE(zeros_q && zeros_c);
    int64_t positive[] = {0, 1, 2};
    gc_retrieval_metrics metrics;
    CHECK(gc_retrieval_evaluate(zeros_q, zeros_c, positive, &metrics) == GC_OK);
    /* every rank 3: exact fractions, 1e-12 covers their rounding */
    CHECK_NEAR(metrics.recall_at_1, 0, 1e-12, 0);
    CHECK_NEAR(metrics.recall_at_10, 1, 1e-12, 0);
    CHECK_NEAR(metrics.mrr, 1.0 / 3, 1e-12, 0);

    /* candidates at 0, 0 (twice the length: the same cosine) and 90 degrees; the query at 0 */
    gc_tensor *query = at_angles((const double[]){0}, (const double[]){1}, 1);
    gc_tensor *candidates = at_angles((const double[]){0, 0, 90}, (const double[]){1, 2, 1}, 3);
    REQUIRE(query && candidates);
    CHECK(gc_retrieval_evaluate(query, candidates, (const int64_t[]){0}, &metrics) == GC_OK);
    CHECK_NEAR(metrics.mrr, 0.5, 1e-12, 0); /* rank 2: the other candidate at 0 degrees counts against it */
    CHECK(gc_retrieval_evaluate(query, candidates, (const int64_t[]){1}, &metrics) == GC_OK);
    CHECK_NEAR(metrics.mrr, 0.5, 1e-12, 0);
    RELEASE(zeros_q, zeros_c, query, candidates);
}

/* A nan or an infinity in an embedding is an error naming the row, never a score. */
static void test_retrieval_nonfinite(void) {
    gc_tensor *good = gc_full(GC_SHAPE(3, 2), GC_F32, gc_cpu(), 1.0);
    float values[] = {1, 0, NAN, 1, 0, 1};
    gc_tensor *with_nan = gc_from_host(values, GC_SHAPE(3, 2), GC_F32, gc_cpu());
    values[2] = 1;
    values[5] = INFINITY;
    gc_tensor *with_inf = gc_from_host(values, GC_SHAPE(3, 2), GC_F32, gc_cpu());
    REQUIRE(good && with_nan && with_inf);
    int64_t positive[] = {0, 1, 2};
    gc_retrieval_metrics metrics;
    CHECK(gc_retrieval_evaluate(with_nan, good, positive, &metrics) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "the embedding of query row 1 (of 3, from 0) holds nan or inf") != NULL,
              "message: %s", gc_last_error());
    CHECK(gc_retrieval_evaluate(good, with_inf, positive, &metrics) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "the embedding of candidate row 2 (of 3, from 0) holds nan or inf") != NULL,
              "message: %s", gc_last_error());
    gc_clear_error();
    RELEASE(good, with_nan, with_inf);
}

static bool is_permutation(const int64_t *order, int64_t count) {
    bool *seen = calloc((size_t)count + 1, 1);
    bool ok = true;
    for (int64_t i = 0; i < count && ok; i++) {
        ok = order[i] >= 0 && order[i] < count && !seen[order[i]];
        if (ok) seen[order[i]] = true;
    }
    free(seen);
    return ok;
}

static void test_epoch_order(void) {
    enum { N = 50 };
    int64_t a[N], b[N], c[N], d[N];
    gc_epoch_order(7, 0, N, a);
    gc_epoch_order(7, 0, N, b);
    gc_epoch_order(7, 1, N, c);
    gc_epoch_order(8, 0, N, d);
    CHECK(is_permutation(a, N) && is_permutation(c, N) && is_permutation(d, N));
    CHECK(memcmp(a, b, sizeof a) == 0);    /* a function of (seed, epoch) alone */
    CHECK(memcmp(a, c, sizeof a) != 0);    /* each epoch its own order */
    CHECK(memcmp(a, d, sizeof a) != 0);    /* each seed its own orders */
    int64_t identity = 0;
    for (int i = 0; i < N; i++) identity += a[i] == i;
    CHECK_MSG(identity < N / 2, "%lld of %d examples stayed in place", (long long)identity, N); /* shuffled */
    int64_t one[1];
    gc_epoch_order(7, 3, 1, one);
    CHECK(one[0] == 0);
}

/* A batch larger than the data is a programmer error (the trainer checks the setting). */
static void sampler_with_too_large_a_batch(void *unused) {
    (void)unused;
    gc_batch_sampler sampler;
    gc_batch_sampler_init(&sampler, 7, 10, 11);
}

/* A step's examples follow from the step alone: positions [s B, (s + 1) B) of its epoch's
 * order, the examples left over at an epoch's end skipped. */
static void test_batch_sampler(void) {
    gc_batch_sampler sampler;
    gc_batch_sampler_init(&sampler, 7, 10, 3); /* 3 steps per epoch, 1 example left over */
    CHECK(sampler.steps_per_epoch == 3);
    int64_t epoch, position, order[10];
    gc_batch_sampler_locate(&sampler, 4, &epoch, &position);
    CHECK(epoch == 1 && position == 3);
    gc_epoch_order(7, 1, 10, order);
    const int64_t *batch = gc_batch_sampler_batch(&sampler, 4, &epoch);
    CHECK(epoch == 1 && memcmp(batch, order + 3, 3 * sizeof *batch) == 0);
    /* another epoch, earlier or later (a resumed run starts anywhere): that epoch's order */
    gc_epoch_order(7, 0, 10, order);
    batch = gc_batch_sampler_batch(&sampler, 2, &epoch);
    CHECK(epoch == 0 && memcmp(batch, order + 6, 3 * sizeof *batch) == 0);
    gc_batch_sampler_free(&sampler);
    gc_test_expect_fatal(sampler_with_too_large_a_batch, NULL, "batch_sampler_init: a batch of 11 from 10 examples");
}

/* Row `row` of ids [rows, length] is [CLS] followed by text's bytes. */
static bool row_spells(const gc_tensor *ids, int64_t row, const char *text) {
    int32_t values[64];
    int64_t length = ids->shape[1];
    gc_copy_to_host(ids, values);
    if (values[row * length] != GC_TOKEN_CLS) return false;
    for (int64_t t = 1; t < length && text[t - 1]; t++)
        if (values[row * length + t] != GC_TOKEN_FIRST_BYTE + (unsigned char)text[t - 1]) return false;
    return true;
}

/* More negatives than the pairs have is a programmer error (the command checks the flag). */
static void batch_with_missing_negatives(void *pairs) {
    int64_t examples[] = {0};
    gc_training_batch batch;
    gc_training_batch_make(pairs, examples, 1, 2, gc_tokenizer_bytes(), NULL, 4, GC_F32, gc_cpu(), &batch);
}

static void test_training_batch(void) {
    const char data[] = "q0\tp0\tn0\nq1\tp1\tn1\nq2\tp2\tn2\n";
    gc_pairs pairs;
    REQUIRE(gc_pairs_parse(data, sizeof data - 1, "memory", &pairs) == GC_OK);
    int64_t examples[] = {2, 0};
    gc_training_batch batch;
    REQUIRE(gc_training_batch_make(&pairs, examples, 2, 1, gc_tokenizer_bytes(), NULL, 4, GC_BF16, gc_cpu(),
                                   &batch) == GC_OK);
    CHECK(batch.query_ids->shape[0] == 2 && batch.query_ids->shape[1] == 3); /* [CLS] + 2 bytes: the longest */
    CHECK(batch.passage_ids->shape[0] == 4 && batch.passage_mask->shape[0] == 4);
    CHECK(batch.query_mask->dtype == GC_BF16 && batch.passage_mask->dtype == GC_BF16); /* the model's dtype */
    CHECK(row_spells(batch.query_ids, 0, "q2") && row_spells(batch.query_ids, 1, "q0"));
    /* each positive followed by its negatives: the layout the contrastive loss expects */
    CHECK(row_spells(batch.passage_ids, 0, "p2") && row_spells(batch.passage_ids, 1, "n2"));
    CHECK(row_spells(batch.passage_ids, 2, "p0") && row_spells(batch.passage_ids, 3, "n0"));
    CHECK(batch.inputs[0].tensors[0] == batch.query_ids && batch.inputs[1].tensors[1] == batch.passage_mask);
    gc_training_batch_release(&batch);
    /* a decoder embedder's prompts (gc_dual_encoder.prompts): each side's texts after its own */
    char query_prompt[] = "Q:", passage_prompt[] = "D", *prompts[2] = {query_prompt, passage_prompt};
    REQUIRE(gc_training_batch_make(&pairs, examples, 2, 1, gc_tokenizer_bytes(), prompts, 8, GC_F32, gc_cpu(),
                                   &batch) == GC_OK);
    CHECK(row_spells(batch.query_ids, 0, "Q:q2") && row_spells(batch.query_ids, 1, "Q:q0"));
    CHECK(row_spells(batch.passage_ids, 0, "Dp2") && row_spells(batch.passage_ids, 3, "Dn0"));
    gc_training_batch_release(&batch);
    gc_test_expect_fatal(batch_with_missing_negatives, &pairs, "training_batch: 2 negatives asked, the pairs have 1");
    gc_pairs_free(&pairs);
}

static void test_format_exact(void) {
    char text[32];
    CHECK(strcmp(gc_format_exact(0.0005, text, sizeof text), "0.0005") == 0);
    CHECK(strcmp(gc_format_exact(0.1, text, sizeof text), "0.1") == 0);
    CHECK(strcmp(gc_format_exact(-2.5e-300, text, sizeof text), "-2.5e-300") == 0);
    CHECK(strcmp(gc_format_exact(3.271113157272339, text, sizeof text), "3.271113157272339") == 0);
    CHECK(strcmp(gc_format_exact(1.0 / 3, text, sizeof text), "0.3333333333333333") == 0);
    CHECK(strcmp(gc_format_exact(0.1 + 0.2, text, sizeof text), "0.30000000000000004") == 0); /* needs all 17 */
}

static void test_metadata(void) {
    gc_metadata m = {0};
    CHECK(gc_metadata_entries(&m) == NULL); /* no metadata at all */
    gc_metadata_set(&m, "int", "%d", 42);
    gc_metadata_set(&m, "big", "%s", "18446744073709551615");
    gc_metadata_set(&m, "negative", "%d", -1);
    gc_metadata_set(&m, "number", "%s", "0.25");
    gc_metadata_set(&m, "nan", "%s", "nan");
    gc_metadata_set(&m, "int", "%d", 43); /* replaces */
    CHECK(strcmp(gc_metadata_get(&m, "int"), "43") == 0 && gc_metadata_get(&m, "none") == NULL);
    CHECK(m.count == 10 && gc_metadata_entries(&m)[10] == NULL);

    char path[] = "/tmp/test_cli_train_parts_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    gc_param_list none = {0};
    REQUIRE(gc_safetensors_save(path, &none, gc_metadata_entries(&m)) == GC_OK);
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open(path, &file) == GC_OK);
    int64_t integer = 0;
    uint64_t unsigned_integer = 0;
    double number = 0;
    const char *string;
    CHECK(gc_metadata_read_int(file, path, "int", 0, 100, &integer) == GC_OK && integer == 43);
    CHECK(gc_metadata_read_int(file, path, "int", 0, 10, &integer) == GC_ERR_FORMAT);
    CHECK(strstr(gc_last_error(), "metadata 'int' is '43', expected an integer in [0, 10]") != NULL);
    CHECK(gc_metadata_read_u64(file, path, "big", &unsigned_integer) == GC_OK && unsigned_integer == UINT64_MAX);
    CHECK(gc_metadata_read_u64(file, path, "negative", &unsigned_integer) == GC_ERR_FORMAT);
    CHECK(gc_metadata_read_double(file, path, "number", &number) == GC_OK && number == 0.25);
    CHECK(gc_metadata_read_double(file, path, "nan", &number) == GC_ERR_FORMAT);
    CHECK(gc_metadata_read_string(file, path, "missing", &string) == GC_ERR_FORMAT);
    CHECK(strstr(gc_last_error(), "no metadata 'missing'") != NULL && strstr(gc_last_error(), path) != NULL);
    gc_safetensors_close(file);
    unlink(path);
    gc_metadata_free(&m);
}

int main(void) {
    test_distinct_texts();
    test_retrieval_metrics();
    test_retrieval_ties();
    test_retrieval_nonfinite();
    test_epoch_order();
    test_batch_sampler();
    test_training_batch();
    test_format_exact();
    test_metadata();
    return gc_test_result();
}
