/* BEIR-format datasets (see gradcache/train.h): corpus.jsonl and queries.jsonl a line at a
 * time, each line one JSON object (base/json.h's full grammar), and the qrels TSV, its ids
 * looked up among the texts' by binary search over their sorted order. Outside input: every
 * line is bounded and checked, every problem is an error naming the file and the line. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcache/train.h"
#include "lines.h"
#include "base/json.h"

/* Objects nest at most this deep in a line (BEIR's metadata members are flat). */
enum { MAX_DEPTH = 16 };

static gc_status out_of_memory(const char *name, long long number) {
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory at line %lld", name, number);
    return GC_ERR_OUT_OF_MEMORY;
}

/* Reads line `number` of `in` into buf[GC_BEIR_MAX_LINE + 1] (its "\r\n" or "\n" dropped);
 * *done at the end of the stream. */
static gc_status next_line(FILE *in, const char *name, long long number, char *buf, size_t *length, bool *done) {
    *done = false;
    switch (gc_read_line(in, buf, GC_BEIR_MAX_LINE + 1, length)) {
    case GC_LINE_END: *done = true; return GC_OK;
    case GC_LINE_TOO_LONG: return gc_line_error(name, number, "line longer than the limit of %d bytes", GC_BEIR_MAX_LINE);
    case GC_LINE_ERROR:
        gc_set_error(GC_ERR_IO, "%s: cannot read: %s", name, strerror(errno));
        return GC_ERR_IO;
    case GC_LINE_OK:
        if (*length > 0 && buf[*length - 1] == '\r') --*length;
        break;
    case GC_LINE_LAST: break;
    }
    if (*length > GC_BEIR_MAX_LINE)
        return gc_line_error(name, number, "line longer than the limit of %d bytes", GC_BEIR_MAX_LINE);
    return GC_OK;
}

/* Calls add(reader, name, number, line, length) for every line of `in` (line[length] may be
 * written: the buffer has room), each read into one buffer of GC_BEIR_MAX_LINE + 1 bytes,
 * until the end or the first error. */
static gc_status each_line(FILE *in, const char *name,
                           gc_status (*add)(void *reader, const char *name, long long number, char *line, size_t length),
                           void *reader) {
    char *line = malloc(GC_BEIR_MAX_LINE + 1);
    if (!line) return out_of_memory(name, 1);
    gc_status status = GC_OK;
    for (long long number = 1; status == GC_OK; number++) {
        size_t length;
        bool done;
        status = next_line(in, name, number, line, &length, &done);
        if (status != GC_OK || done) break;
        status = add(reader, name, number, line, length);
    }
    free(line);
    return status;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* A problem with `id` (empty, or holding whitespace), or NULL. */
static const char *id_problem(const char *id) {
    if (!*id) return "an empty \"_id\"";
    for (const char *c = id; *c; c++)
        if (is_space(*c)) return "whitespace in \"_id\" (a TREC run file could not carry it)";
    return NULL;
}

/* The string member `key` of `object` into *value (NULL when absent and `optional`). */
static gc_status string_member(const gc_json *object, const char *key, bool optional, const char *name,
                               long long number, const char **value) {
    const gc_json *member = gc_json_member(object, key);
    *value = NULL;
    if (!member && optional) return GC_OK;
    if (!member) return gc_line_error(name, number, "no \"%s\"", key);
    if (member->type != GC_JSON_STRING)
        return gc_line_error(name, number, "\"%s\" is %s, not a string", key, gc_json_type_name(member->type));
    *value = member->string;
    return GC_OK;
}

/* "id\0passage\0" in one allocation: the title, a space and the text, stripped of ASCII
 * whitespace at both ends (BEIR's `(title + " " + text).strip()`); the text alone without a
 * title. */
static char *make_entry(const char *id, const char *title, const char *text) {
    size_t id_length = strlen(id), title_length = title ? strlen(title) : 0, text_length = strlen(text);
    char *entry = malloc(id_length + title_length + text_length + 3);
    if (!entry) return NULL;
    memcpy(entry, id, id_length + 1);
    char *joined = entry + id_length + 1, *end = joined;
    if (title) {
        memcpy(end, title, title_length);
        end += title_length;
        *end++ = ' ';
    }
    memcpy(end, text, text_length);
    end += text_length;
    char *start = joined;
    while (start < end && is_space(*start)) start++;
    while (end > start && is_space(end[-1])) end--;
    memmove(joined, start, (size_t)(end - start));
    joined[end - start] = '\0';
    return entry;
}

/* Appends an entry ("id\0text\0"), growing the arrays. */
static bool append_entry(gc_beir_texts *texts, int64_t *capacity, char *entry) {
    if (texts->count == *capacity) {
        int64_t bigger = *capacity ? 2 * *capacity : 1024;
        char **ids = realloc(texts->ids, (size_t)bigger * sizeof *ids);
        if (!ids) return false;
        texts->ids = ids;
        char **more = realloc(texts->texts, (size_t)bigger * sizeof *more);
        if (!more) return false;
        texts->texts = more;
        *capacity = bigger;
    }
    texts->ids[texts->count] = entry;
    texts->texts[texts->count++] = entry + strlen(entry) + 1;
    return true;
}

/* Parses line `number` (a JSON object) and appends its entry. */
static gc_status add_text_line(gc_beir_texts *texts, int64_t *capacity, const char *name, long long number,
                               const char *line, size_t length, bool corpus) {
    if (length == 0) return gc_line_error(name, number, "empty line");
    gc_json_error error;
    gc_json *object = gc_json_parse_document(line, length, MAX_DEPTH, &error);
    if (!object) return gc_line_error(name, number, "%s at byte %zu", error.message, error.position + 1);
    const char *id, *text, *title = NULL;
    gc_status status = object->type == GC_JSON_OBJECT
                           ? GC_OK
                           : gc_line_error(name, number, "%s, not an object", gc_json_type_name(object->type));
    if (status == GC_OK) status = string_member(object, "_id", false, name, number, &id);
    if (status == GC_OK && id_problem(id)) status = gc_line_error(name, number, "%s", id_problem(id));
    if (status == GC_OK) status = string_member(object, "text", false, name, number, &text);
    if (status == GC_OK && corpus) status = string_member(object, "title", true, name, number, &title);
    if (status == GC_OK) {
        char *entry = make_entry(id, title && *title ? title : NULL, text);
        if (!entry || !append_entry(texts, capacity, entry)) {
            free(entry);
            status = out_of_memory(name, number);
        }
    }
    gc_json_free(object);
    return status;
}

/* Sorts the entries by id (texts->by_id, from gc_distinct_texts); GC_ERR_FORMAT naming the
 * line of an id seen before (an entry is a line: line i + 1 holds entry i). */
static gc_status index_ids(gc_beir_texts *texts, const char *name) {
    int64_t n = texts->count, *position = malloc((size_t)n * sizeof *position);
    texts->by_id = malloc((size_t)n * sizeof *texts->by_id);
    if (!position || !texts->by_id) {
        free(position);
        return out_of_memory(name, n);
    }
    const char **distinct;
    int64_t unique = gc_distinct_texts((const char *const *)texts->ids, n, &distinct, position);
    free(distinct);
    for (int64_t i = 0; i < unique; i++) texts->by_id[i] = -1;
    gc_status status = GC_OK;
    for (int64_t i = 0; i < n && status == GC_OK; i++) {
        int64_t first = texts->by_id[position[i]];
        if (first >= 0)
            status = gc_line_error(name, (long long)i + 1, "\"_id\" \"%s\" again (first on line %lld)", texts->ids[i],
                                (long long)first + 1);
        texts->by_id[position[i]] = i;
    }
    free(position);
    return status;
}

/* What the texts' reader adds each line to. */
typedef struct texts_reader {
    gc_beir_texts *texts;
    int64_t capacity;
    bool corpus;
} texts_reader;

static gc_status add_text(void *reader, const char *name, long long number, char *line, size_t length) {
    texts_reader *r = reader;
    return add_text_line(r->texts, &r->capacity, name, number, line, length, r->corpus);
}

gc_status gc_beir_texts_read_stream(FILE *in, const char *name, bool corpus, gc_beir_texts *texts) {
    *texts = (gc_beir_texts){0};
    texts_reader reader = {texts, 0, corpus};
    gc_status status = each_line(in, name, add_text, &reader);
    if (status == GC_OK && texts->count == 0) status = gc_line_error(name, 1, "no entries (the file is empty)");
    if (status == GC_OK) status = index_ids(texts, name);
    if (status != GC_OK) gc_beir_texts_free(texts);
    return status;
}

int64_t gc_beir_find(const gc_beir_texts *texts, const char *id) {
    int64_t low = 0, high = texts->count; /* the answer is in by_id[low, high) */
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        int order = strcmp(texts->ids[texts->by_id[middle]], id);
        if (order == 0) return texts->by_id[middle];
        if (order < 0) low = middle + 1;
        else high = middle;
    }
    return -1;
}

void gc_beir_texts_free(gc_beir_texts *texts) {
    for (int64_t i = 0; i < texts->count; i++) free(texts->ids[i]); /* the entry: id and text */
    free(texts->ids);
    free(texts->texts);
    free(texts->by_id);
    *texts = (gc_beir_texts){0};
}

/* ---- qrels ---- */

static const char qrels_header[] = "query-id\tcorpus-id\tscore";

typedef struct numbered_qrel {
    gc_beir_qrel qrel;
    long long line;
} numbered_qrel;

/* A grade: decimal digits, in [0, GC_BEIR_MAX_GRADE]; -1 when not. */
static int64_t parse_grade(const char *text, size_t length) {
    if (length == 0 || length > 7) return -1;
    int64_t value = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9') return -1;
        value = value * 10 + (text[i] - '0');
    }
    return value <= GC_BEIR_MAX_GRADE ? value : -1;
}

/* Line `number`, `query<TAB>doc<TAB>grade`, into *out. */
static gc_status parse_qrel(const gc_beir *data, const char *name, long long number, char *line, size_t length,
                            numbered_qrel *out) {
    if (memchr(line, '\0', length)) return gc_line_error(name, number, "NUL byte");
    line[length] = '\0';
    char *query = line, *doc = strchr(query, '\t'), *grade = doc ? strchr(doc + 1, '\t') : NULL;
    if (!grade || strchr(grade + 1, '\t'))
        return gc_line_error(name, number, "not 3 fields separated by tabs (query-id, corpus-id, score)");
    *doc++ = '\0';
    *grade++ = '\0';
    int64_t q = gc_beir_find(&data->queries, query), d = gc_beir_find(&data->corpus, doc);
    int64_t value = parse_grade(grade, strlen(grade));
    if (q < 0) return gc_line_error(name, number, "query \"%.64s\" is not in queries.jsonl", query);
    if (d < 0) return gc_line_error(name, number, "document \"%.64s\" is not in corpus.jsonl", doc);
    if (value < 0)
        return gc_line_error(name, number, "score \"%.32s\" is not an integer grade from 0 to %d", grade,
                          GC_BEIR_MAX_GRADE);
    *out = (numbered_qrel){{q, d, value}, number};
    return GC_OK;
}

static int compare_qrels(const void *a, const void *b) {
    const numbered_qrel *x = a, *y = b;
    if (x->qrel.query != y->qrel.query) return x->qrel.query < y->qrel.query ? -1 : 1;
    if (x->qrel.doc != y->qrel.doc) return x->qrel.doc < y->qrel.doc ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

/* Sorts the judgements and hands them to data; GC_ERR_FORMAT at a pair judged twice. */
static gc_status finish_qrels(numbered_qrel *read, int64_t count, const char *name, gc_beir *data) {
    if (count == 0) return gc_line_error(name, 2, "no judgements after the header");
    qsort(read, (size_t)count, sizeof *read, compare_qrels);
    for (int64_t i = 1; i < count; i++)
        if (read[i].qrel.query == read[i - 1].qrel.query && read[i].qrel.doc == read[i - 1].qrel.doc)
            return gc_line_error(name, read[i].line, "query \"%s\" and document \"%s\" judged again (first on line %lld)",
                              data->queries.ids[read[i].qrel.query], data->corpus.ids[read[i].qrel.doc],
                              read[i - 1].line);
    data->qrels = malloc((size_t)count * sizeof *data->qrels);
    if (!data->qrels) return out_of_memory(name, count);
    for (int64_t i = 0; i < count; i++) data->qrels[i] = read[i].qrel;
    data->qrel_count = count;
    return GC_OK;
}

/* What the qrels' reader adds each line to. */
typedef struct qrels_reader {
    gc_beir *data;
    numbered_qrel *read;
    int64_t count, capacity;
} qrels_reader;

static gc_status add_qrel(void *reader, const char *name, long long number, char *line, size_t length) {
    qrels_reader *r = reader;
    if (number == 1)
        return length == strlen(qrels_header) && memcmp(line, qrels_header, length) == 0
                   ? GC_OK
                   : gc_line_error(name, 1, "not the header query-id<TAB>corpus-id<TAB>score");
    if (r->count == r->capacity) {
        int64_t capacity = r->capacity ? 2 * r->capacity : 1024;
        numbered_qrel *bigger = realloc(r->read, (size_t)capacity * sizeof *bigger);
        if (!bigger) return out_of_memory(name, number);
        r->read = bigger;
        r->capacity = capacity;
    }
    gc_status status = parse_qrel(r->data, name, number, line, length, &r->read[r->count]);
    r->count += status == GC_OK;
    return status;
}

gc_status gc_beir_qrels_read_stream(FILE *in, const char *name, gc_beir *data) {
    data->qrels = NULL;
    data->qrel_count = 0;
    qrels_reader reader = {.data = data};
    gc_status status = each_line(in, name, add_qrel, &reader);
    if (status == GC_OK) status = finish_qrels(reader.read, reader.count, name, data);
    free(reader.read);
    return status;
}

/* ---- the folder ---- */

static gc_status open_file(const char *path, FILE **in) {
    *in = fopen(path, "rb");
    if (*in) return GC_OK;
    gc_set_error(GC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return GC_ERR_IO;
}

typedef enum beir_file { CORPUS, QUERIES, QRELS } beir_file;

/* One of the folder's files into data. */
static gc_status read_file(const char *dir, const char *file, beir_file what, gc_beir *data) {
    char *path = gc_path_join(dir, file);
    FILE *in = NULL;
    gc_status status = open_file(path, &in);
    if (status == GC_OK) {
        if (what == QRELS) status = gc_beir_qrels_read_stream(in, path, data);
        else status = gc_beir_texts_read_stream(in, path, what == CORPUS, what == CORPUS ? &data->corpus : &data->queries);
        fclose(in);
    }
    free(path);
    return status;
}

gc_status gc_beir_read(const char *dir, const char *split, gc_beir *data) {
    *data = (gc_beir){0};
    size_t size = strlen("qrels/") + strlen(split) + strlen(".tsv") + 1;
    char *qrels = malloc(size);
    if (!qrels) return out_of_memory(dir, 0);
    snprintf(qrels, size, "qrels/%s.tsv", split);
    gc_status status = read_file(dir, "corpus.jsonl", CORPUS, data);
    if (status == GC_OK) status = read_file(dir, "queries.jsonl", QUERIES, data);
    if (status == GC_OK) status = read_file(dir, qrels, QRELS, data);
    free(qrels);
    if (status != GC_OK) gc_beir_free(data);
    return status;
}

void gc_beir_free(gc_beir *data) {
    gc_beir_texts_free(&data->corpus);
    gc_beir_texts_free(&data->queries);
    free(data->qrels);
    *data = (gc_beir){0};
}

gc_status gc_beir_pairs(const gc_beir *data, const char *name, gc_pairs *pairs) {
    *pairs = (gc_pairs){0};
    int64_t count = 0;
    size_t bytes = 0;
    for (int64_t i = 0; i < data->qrel_count; i++) {
        const gc_beir_qrel *r = &data->qrels[i];
        if (r->grade < 1) continue;
        count++;
        bytes += strlen(data->queries.texts[r->query]) + strlen(data->corpus.texts[r->doc]) + 2;
    }
    if (count == 0) {
        gc_set_error(GC_ERR_FORMAT, "%s: no judgement of grade 1 or more, so no training pairs", name);
        return GC_ERR_FORMAT;
    }
    char **table = malloc((size_t)(2 * count) * sizeof *table), *block = malloc(bytes);
    if (!table || !block) {
        free(table);
        free(block);
        return out_of_memory(name, 0);
    }
    char *end = block;
    int64_t n = 0;
    for (int64_t i = 0; i < data->qrel_count; i++) {
        const gc_beir_qrel *r = &data->qrels[i];
        if (r->grade < 1) continue;
        const char *sides[2] = {data->queries.texts[r->query], data->corpus.texts[r->doc]};
        for (int s = 0; s < 2; s++) {
            table[n++] = end;
            size_t length = strlen(sides[s]) + 1;
            memcpy(end, sides[s], length);
            end += length;
        }
    }
    *pairs = (gc_pairs){.count = count, .negatives = 0, .texts = table}; /* gc_pairs_free frees texts[0]: block */
    return GC_OK;
}

bool gc_beir_is_folder(const char *path) {
    char *corpus = gc_path_join(path, "corpus.jsonl");
    bool found = access(corpus, F_OK) == 0;
    free(corpus);
    return found;
}

gc_status gc_dataset_pairs_read(const char *path, const char *split, gc_pairs *pairs, char **name) {
    *pairs = (gc_pairs){0};
    if (!gc_beir_is_folder(path)) {
        *name = gc_data_path(path, split);
        return gc_pairs_read(*name, pairs);
    }
    char qrels[64];
    snprintf(qrels, sizeof qrels, "qrels/%.50s.tsv", split);
    *name = gc_path_join(path, qrels);
    gc_beir data;
    gc_status status = gc_beir_read(path, split, &data);
    if (status == GC_OK) status = gc_beir_pairs(&data, *name, pairs);
    gc_beir_free(&data);
    return status;
}
