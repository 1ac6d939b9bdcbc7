/* libFuzzer target for the BEIR-format reader (train/beir.c). The first byte picks the file the
 * rest is read as: corpus.jsonl, queries.jsonl, or a qrels TSV judged against a fixed corpus
 * ("d1", "d2") and queries ("q1", "q2"). Any input must either be refused with GC_ERR_FORMAT and
 * a one-line message naming the input, nothing kept, or be accepted as entries whose ids are
 * non-empty, free of whitespace, distinct and found again by gc_beir_find, whose texts have no
 * whitespace at either end; or as judgements sorted by (query, doc), none twice, each grade in
 * [0, GC_BEIR_MAX_GRADE]. The sanitizers built in with it catch out-of-bounds reads and leaks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char corpus[] = "{\"_id\": \"d1\", \"text\": \"one\"}\n{\"_id\": \"d2\", \"text\": \"two\"}\n";
static const char queries[] = "{\"_id\": \"q1\", \"text\": \"first\"}\n{\"_id\": \"q2\", \"text\": \"second\"}\n";

static FILE *open_bytes(const void *bytes, size_t size) {
    FILE *in = size ? fmemopen((void *)bytes, size, "rb") : fopen("/dev/null", "rb");
    if (!in) abort();
    return in;
}

static void read_fixed(const char *text, bool is_corpus, gc_beir_texts *texts) {
    FILE *in = open_bytes(text, strlen(text));
    if (gc_beir_texts_read_stream(in, "fixed", is_corpus, texts) != GC_OK) abort();
    fclose(in);
}

static void check_refusal(gc_status status) {
    const char *message = gc_last_error();
    if (status != GC_ERR_FORMAT || strncmp(message, "fuzz:", 5) != 0 || strchr(message, '\n')) abort();
    gc_clear_error();
}

static void check_texts(const gc_beir_texts *texts) {
    if (texts->count < 1) abort();
    for (int64_t i = 0; i < texts->count; i++) {
        const char *id = texts->ids[i], *text = texts->texts[i];
        size_t length = strlen(text);
        if (!*id || strpbrk(id, " \t\n\r\f\v") || gc_beir_find(texts, id) != i) abort();
        if (length && (strchr(" \t\n\r\f\v", text[0]) || strchr(" \t\n\r\f\v", text[length - 1]))) abort();
    }
}

static void check_qrels(const gc_beir *beir) {
    if (beir->qrel_count < 1) abort();
    for (int64_t i = 0; i < beir->qrel_count; i++) {
        const gc_beir_qrel *r = &beir->qrels[i];
        if (r->query < 0 || r->query >= beir->queries.count || r->doc < 0 || r->doc >= beir->corpus.count ||
            r->grade < 0 || r->grade > GC_BEIR_MAX_GRADE)
            abort();
        if (i > 0 && (r->query < r[-1].query || (r->query == r[-1].query && r->doc <= r[-1].doc))) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int which = data[0] % 3;
    FILE *in = open_bytes(data + 1, size - 1);
    if (which < 2) {
        gc_beir_texts texts;
        gc_status status = gc_beir_texts_read_stream(in, "fuzz", which == 0, &texts);
        if (status == GC_OK) check_texts(&texts);
        else if (texts.count || texts.ids) abort();
        else check_refusal(status);
        gc_beir_texts_free(&texts);
    } else {
        gc_beir beir = {0};
        read_fixed(corpus, true, &beir.corpus);
        read_fixed(queries, false, &beir.queries);
        gc_status status = gc_beir_qrels_read_stream(in, "fuzz", &beir);
        if (status == GC_OK) check_qrels(&beir);
        else if (beir.qrels) abort();
        else check_refusal(status);
        gc_beir_free(&beir);
    }
    fclose(in);
    return 0;
}
