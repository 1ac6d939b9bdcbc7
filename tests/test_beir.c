/* BEIR-format datasets (train/beir.c): what the reader accepts (titles joined to texts, ids
 * looked up, judgements sorted) and one case per kind of malformed input, each refused with
 * its status, file and line; then a folder read whole and its training pairs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gradcache/train.h"

static gc_status read_texts(const char *text, size_t size, bool corpus, gc_beir_texts *texts) {
    FILE *in = size ? fmemopen((void *)text, size, "rb") : fopen("/dev/null", "rb");
    REQUIRE(in);
    gc_status status = gc_beir_texts_read_stream(in, "in.jsonl", corpus, texts);
    fclose(in);
    return status;
}

/* `text` must be refused with GC_ERR_FORMAT, a message starting with `location` and holding
 * `problem`, on one line, nothing kept. */
static void expect_texts_refused(const char *text, size_t size, bool corpus, const char *location,
                                 const char *problem) {
    gc_beir_texts texts;
    gc_status status = read_texts(text, size, corpus, &texts);
    const char *message = gc_last_error();
    CHECK_MSG(status == GC_ERR_FORMAT, "%s: status %s", problem, gc_status_name(status));
    CHECK_MSG(strncmp(message, location, strlen(location)) == 0 && strstr(message, problem), "want '%s ... %s', got '%s'",
              location, problem, message);
    CHECK(strchr(message, '\n') == NULL);
    CHECK(texts.count == 0 && texts.ids == NULL);
    gc_clear_error();
}
#define REFUSED(text, corpus, location, problem) expect_texts_refused(text, sizeof text - 1, corpus, location, problem)

static void test_texts(void) {
    const char corpus[] = "{\"_id\": \"d2\", \"title\": \"A title\", \"text\": \"and a text \", \"metadata\": {}}\n"
                          "{\"_id\": \"d1\", \"title\": \"\", \"text\": \"  no title\"}\r\n"
                          "{\"text\": \"the text\", \"_id\": \"d10\"}";
    gc_beir_texts texts;
    REQUIRE(read_texts(corpus, sizeof corpus - 1, true, &texts) == GC_OK);
    CHECK(texts.count == 3);
    CHECK(strcmp(texts.ids[0], "d2") == 0 && strcmp(texts.texts[0], "A title and a text") == 0);
    CHECK(strcmp(texts.ids[1], "d1") == 0 && strcmp(texts.texts[1], "no title") == 0);
    CHECK(strcmp(texts.ids[2], "d10") == 0 && strcmp(texts.texts[2], "the text") == 0);
    CHECK(gc_beir_find(&texts, "d1") == 1 && gc_beir_find(&texts, "d10") == 2 && gc_beir_find(&texts, "d2") == 0);
    CHECK(gc_beir_find(&texts, "d3") == -1 && gc_beir_find(&texts, "") == -1);
    gc_beir_texts_free(&texts);
}

static void test_texts_refused(void) {
    REFUSED("", true, "in.jsonl:1:", "no entries");
    REFUSED("{\"_id\": \"a\", \"text\": \"x\"}\n\n", true, "in.jsonl:2:", "empty line");
    REFUSED("{\"_id\": \"a\", \"text\": \"x\"}\n{\"_id\": \"a\"", true, "in.jsonl:2:", "at byte");
    REFUSED("[1, 2]\n", true, "in.jsonl:1:", "not an object");
    REFUSED("{\"text\": \"x\"}\n", true, "in.jsonl:1:", "no \"_id\"");
    REFUSED("{\"_id\": 7, \"text\": \"x\"}\n", true, "in.jsonl:1:", "\"_id\" is");
    REFUSED("{\"_id\": \"\", \"text\": \"x\"}\n", true, "in.jsonl:1:", "empty \"_id\"");
    REFUSED("{\"_id\": \"a b\", \"text\": \"x\"}\n", true, "in.jsonl:1:", "whitespace");
    REFUSED("{\"_id\": \"a\"}\n", false, "in.jsonl:1:", "no \"text\"");
    REFUSED("{\"_id\": \"a\", \"text\": \"x\", \"title\": 3}\n", true, "in.jsonl:1:", "\"title\" is");
    REFUSED("{\"_id\": \"a\", \"text\": \"x\", \"_id\": \"b\"}\n", true, "in.jsonl:1:", "at byte");
    REFUSED("{\"_id\": \"a\", \"text\": \"\xff\"}\n", true, "in.jsonl:1:", "at byte");
    REFUSED("{\"_id\": \"b\", \"text\": \"x\"}\n{\"_id\": \"a\", \"text\": \"y\"}\n{\"_id\": \"b\", \"text\": \"z\"}\n",
            false, "in.jsonl:3:", "\"b\" again (first on line 1)");
    const char nul[] = "{\"_id\": \"a\", \"text\": \"x\"}\0\n";
    expect_texts_refused(nul, sizeof nul - 1, true, "in.jsonl:1:", "at byte");
    /* a line past the limit is refused without reading the rest of it */
    size_t size = GC_BEIR_MAX_LINE + 2;
    char *long_line = malloc(size);
    REQUIRE(long_line);
    memset(long_line, ' ', size);
    expect_texts_refused(long_line, size, true, "in.jsonl:1:", "longer than the limit");
    free(long_line);
}

static const char queries_text[] = "{\"_id\": \"q1\", \"text\": \"first\"}\n{\"_id\": \"q2\", \"text\": \"second\"}\n"
                                   "{\"_id\": \"q3\", \"text\": \"third\"}\n";
static const char corpus_text[] = "{\"_id\": \"d1\", \"text\": \"one\"}\n{\"_id\": \"d2\", \"text\": \"two\"}\n"
                                  "{\"_id\": \"d3\", \"title\": \"t\", \"text\": \"three\"}\n";

static void read_dataset(gc_beir *data) {
    *data = (gc_beir){0};
    REQUIRE(read_texts(corpus_text, sizeof corpus_text - 1, true, &data->corpus) == GC_OK);
    REQUIRE(read_texts(queries_text, sizeof queries_text - 1, false, &data->queries) == GC_OK);
}

static gc_status read_qrels(const char *text, gc_beir *data) {
    FILE *in = fmemopen((void *)text, strlen(text), "rb");
    REQUIRE(in);
    gc_status status = gc_beir_qrels_read_stream(in, "test.tsv", data);
    fclose(in);
    return status;
}

static void expect_qrels_refused(const char *text, const char *location, const char *problem) {
    gc_beir data;
    read_dataset(&data);
    gc_status status = read_qrels(text, &data);
    const char *message = gc_last_error();
    CHECK_MSG(status == GC_ERR_FORMAT, "%s: status %s", problem, gc_status_name(status));
    CHECK_MSG(strncmp(message, location, strlen(location)) == 0 && strstr(message, problem), "want '%s ... %s', got '%s'",
              location, problem, message);
    CHECK(data.qrels == NULL && data.qrel_count == 0);
    gc_clear_error();
    gc_beir_free(&data);
}

#define HEADER "query-id\tcorpus-id\tscore\n"

static void test_qrels(void) {
    gc_beir data;
    read_dataset(&data);
    REQUIRE(read_qrels(HEADER "q2\td3\t2\nq1\td2\t0\r\nq2\td1\t1\nq1\td1\t1", &data) == GC_OK);
    CHECK(data.qrel_count == 4);
    const gc_beir_qrel want[] = {{0, 0, 1}, {0, 1, 0}, {1, 0, 1}, {1, 2, 2}}; /* by query, then doc */
    for (int i = 0; i < 4 && i < data.qrel_count; i++)
        CHECK_MSG(data.qrels[i].query == want[i].query && data.qrels[i].doc == want[i].doc &&
                      data.qrels[i].grade == want[i].grade,
                  "qrel %d: %lld %lld %lld", i, (long long)data.qrels[i].query, (long long)data.qrels[i].doc,
                  (long long)data.qrels[i].grade);
    gc_pairs pairs;
    REQUIRE(gc_beir_pairs(&data, "test", &pairs) == GC_OK);
    CHECK(pairs.count == 3 && pairs.negatives == 0); /* the grade-0 judgement is no pair */
    CHECK(strcmp(gc_pairs_text(&pairs, 0, 0), "first") == 0 && strcmp(gc_pairs_text(&pairs, 0, 1), "one") == 0);
    CHECK(strcmp(gc_pairs_text(&pairs, 2, 0), "second") == 0 && strcmp(gc_pairs_text(&pairs, 2, 1), "t three") == 0);
    gc_pairs_free(&pairs);
    gc_beir_free(&data);

    read_dataset(&data);
    REQUIRE(read_qrels(HEADER "q1\td1\t0\n", &data) == GC_OK);
    CHECK(gc_beir_pairs(&data, "test", &pairs) == GC_ERR_FORMAT && strstr(gc_last_error(), "no judgement of grade 1"));
    gc_clear_error();
    gc_beir_free(&data);
}

static void test_qrels_refused(void) {
    expect_qrels_refused("", "test.tsv:2:", "no judgements");
    expect_qrels_refused(HEADER, "test.tsv:2:", "no judgements");
    expect_qrels_refused("query-id\tdoc-id\tscore\nq1\td1\t1\n", "test.tsv:1:", "not the header");
    expect_qrels_refused(HEADER "q1\td1\n", "test.tsv:2:", "not 3 fields");
    expect_qrels_refused(HEADER "q1\td1\t1\t0\n", "test.tsv:2:", "not 3 fields");
    expect_qrels_refused(HEADER "q1\td1\t1\nq9\td1\t1\n", "test.tsv:3:", "query \"q9\" is not in queries.jsonl");
    expect_qrels_refused(HEADER "q1\td9\t1\n", "test.tsv:2:", "document \"d9\" is not in corpus.jsonl");
    expect_qrels_refused(HEADER "q1\td1\t-1\n", "test.tsv:2:", "not an integer grade");
    expect_qrels_refused(HEADER "q1\td1\t1.5\n", "test.tsv:2:", "not an integer grade");
    expect_qrels_refused(HEADER "q1\td1\t\n", "test.tsv:2:", "not an integer grade");
    expect_qrels_refused(HEADER "q1\td1\t99999999\n", "test.tsv:2:", "not an integer grade");
    expect_qrels_refused(HEADER "q1\td1\t1\nq2\td1\t1\nq1\td1\t2\n", "test.tsv:4:", "judged again (first on line 2)");
    gc_beir data;
    read_dataset(&data);
    const char nul[] = HEADER "q1\td1\0\t1\n";
    FILE *in = fmemopen((void *)nul, sizeof nul - 1, "rb");
    REQUIRE(in);
    CHECK(gc_beir_qrels_read_stream(in, "test.tsv", &data) == GC_ERR_FORMAT && strstr(gc_last_error(), "test.tsv:2: NUL"));
    fclose(in);
    gc_clear_error();
    gc_beir_free(&data);
}

static void write_file(const char *path, const char *text) {
    FILE *out = fopen(path, "wb");
    REQUIRE(out && fputs(text, out) >= 0 && fclose(out) == 0);
}

/* A folder read whole; a missing file is GC_ERR_IO naming it. */
static void test_folder(void) {
    char dir[] = "/tmp/test_beir_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char *corpus = gc_path_join(dir, "corpus.jsonl"), *queries = gc_path_join(dir, "queries.jsonl");
    char *qrels_dir = gc_path_join(dir, "qrels"), *qrels = gc_path_join(qrels_dir, "test.tsv");
    write_file(corpus, corpus_text);
    write_file(queries, queries_text);
    gc_beir data;
    CHECK(gc_beir_read(dir, "test", &data) == GC_ERR_IO && strstr(gc_last_error(), "qrels/test.tsv"));
    CHECK(data.corpus.count == 0 && data.queries.count == 0);
    gc_clear_error();
    REQUIRE(gc_make_directories(qrels_dir) == GC_OK);
    write_file(qrels, HEADER "q3\td2\t1\n");
    REQUIRE(gc_beir_read(dir, "test", &data) == GC_OK);
    CHECK(data.corpus.count == 3 && data.queries.count == 3 && data.qrel_count == 1);
    CHECK(data.qrels[0].query == 2 && data.qrels[0].doc == 1 && data.qrels[0].grade == 1);
    gc_beir_free(&data);
    CHECK(unlink(qrels) == 0 && unlink(corpus) == 0 && unlink(queries) == 0 && rmdir(qrels_dir) == 0 && rmdir(dir) == 0);
    free(corpus);
    free(queries);
    free(qrels);
    free(qrels_dir);
}

int main(void) {
    GC_TEST_CASE(test_texts);
    GC_TEST_CASE(test_texts_refused);
    GC_TEST_CASE(test_qrels);
    GC_TEST_CASE(test_qrels_refused);
    GC_TEST_CASE(test_folder);
    return gc_test_result();
}
