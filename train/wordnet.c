/* WordNet data files -> train and dev pair files (see gradcache/train.h). The format of a
 * data file line (wndb(5)): `offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt
 * [pointers...] [frames...] | gloss`, w_cnt in hexadecimal; the license at the top of each
 * file is on lines that start with two spaces. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"
#include "lines.h"
#include "base/write_together.h"

#define GC_WORDNET_MAX_LINE_TEXT "65536" /* GC_WORDNET_MAX_LINE, for messages */

enum { MAX_WORDS = 255 }; /* w_cnt has two hexadecimal digits */

typedef struct synset {
    int word_count;
    char *words[MAX_WORDS];
    char *gloss;
} synset;

/* The next space-separated token at *cursor, NUL-terminated in place; NULL at the end. */
static char *next_token(char **cursor) {
    char *text = *cursor + strspn(*cursor, " ");
    if (!*text) return NULL;
    char *end = text + strcspn(text, " ");
    *cursor = *end ? end + 1 : end;
    *end = '\0';
    return text;
}

static bool all_of(const char *text, int (*is_class)(int)) {
    if (!*text) return false;
    for (; *text; text++)
        if (!is_class((unsigned char)*text)) return false;
    return true;
}

/* Splits a data line in place; false when it is not a synset line. */
static bool parse_synset(char *line, synset *out) {
    char *bar = strstr(line, " | ");
    if (!bar) return false;
    *bar = '\0';
    out->gloss = bar + 3;
    char *cursor = line;
    char *offset = next_token(&cursor), *lex_filenum = next_token(&cursor);
    char *type = next_token(&cursor), *count = next_token(&cursor);
    if (!count || !all_of(offset, isdigit) || !all_of(lex_filenum, isdigit) || strlen(type) != 1 ||
        !strchr("nvasr", type[0]) || !all_of(count, isxdigit) || strlen(count) > 2)
        return false;
    out->word_count = (int)strtol(count, NULL, 16);
    if (out->word_count < 1) return false;
    for (int i = 0; i < out->word_count; i++) {
        out->words[i] = next_token(&cursor);
        char *lex_id = next_token(&cursor);
        if (!lex_id) return false;
    }
    return true;
}

static char *trim(char *text) {
    while (*text == ' ') text++;
    size_t length = strlen(text);
    while (length > 0 && text[length - 1] == ' ') text[--length] = '\0';
    return text;
}

/* The gloss without its examples, on one line (see gradcache/train.h). */
static char *definition_of(char *gloss) {
    for (char *c = gloss; *c; c++)
        if (*c == '\t' || *c == '\n' || *c == '\r') *c = ' ';
    gloss[strcspn(gloss, ";")] = '\0';
    char *example = strstr(gloss, ": \"");
    if (example) *example = '\0';
    return trim(gloss);
}

static void clean_word(char *word) {
    static const char *const markers[] = {"(a)", "(p)", "(ip)"};
    size_t length = strlen(word);
    for (size_t i = 0; i < sizeof markers / sizeof *markers; i++) {
        size_t marker = strlen(markers[i]);
        if (length > marker && strcmp(word + length - marker, markers[i]) == 0) word[length - marker] = '\0';
    }
    for (char *c = word; *c; c++)
        if (*c == '_') *c = ' ';
}

/* Deterministic on every platform: FNV-1a over the bytes, then splitmix64's finalizer
 * over that and the seed, so that nearby seeds give unrelated splits. */
double gc_wordnet_split_unit(const char *definition, uint64_t seed) {
    uint64_t hash = 0xcbf29ce484222325u;
    for (const unsigned char *c = (const unsigned char *)definition; *c; c++) hash = (hash ^ *c) * 0x100000001b3u;
    hash ^= seed * 0x9e3779b97f4a7c15u;
    hash = (hash ^ (hash >> 30)) * 0xbf58476d1ce4e5b9u;
    hash = (hash ^ (hash >> 27)) * 0x94d049bb133111ebu;
    hash ^= hash >> 31;
    return (double)(hash >> 11) * 0x1.0p-53;
}

static bool reserve(gc_wordnet_side *side, size_t more) {
    if (side->capacity - side->size >= more) return true;
    size_t grown = side->capacity ? side->capacity : 1 << 20;
    while (grown - side->size < more) grown *= 2;
    char *bigger = realloc(side->text, grown);
    if (!bigger) return false;
    side->text = bigger;
    side->capacity = grown;
    return true;
}

/* Appends `definition<TAB>word\n` when that is a valid pair line of two columns (a tab
 * inside the word would make a third): the parser that reads the files later is the judge,
 * so the output cannot hold a line it would refuse or read differently. */
static gc_status append_pair(gc_wordnet_side *side, const char *definition, const char *word, bool *kept) {
    size_t definition_length = strlen(definition), word_length = strlen(word);
    size_t length = definition_length + word_length + 2;
    if (!reserve(side, length)) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "wordnet: out of host memory after %zu bytes of pairs", side->size);
        return GC_ERR_OUT_OF_MEMORY;
    }
    char *line = side->text + side->size;
    memcpy(line, definition, definition_length);
    line[definition_length] = '\t';
    memcpy(line + definition_length + 1, word, word_length);
    line[length - 1] = '\n';
    gc_pairs check;
    *kept = gc_pairs_parse(line, length, "entry", &check) == GC_OK;
    if (*kept) *kept = check.negatives == 0;
    gc_pairs_free(&check);
    if (!*kept) {
        if (gc_last_status() == GC_ERR_OUT_OF_MEMORY) return GC_ERR_OUT_OF_MEMORY;
        gc_clear_error();
        return GC_OK;
    }
    side->size += length;
    side->pairs++;
    return GC_OK;
}

static gc_status add_synset(gc_wordnet_split *split, synset *entry, double held_out, uint64_t seed) {
    char *definition = definition_of(entry->gloss);
    gc_wordnet_side *side = gc_wordnet_split_unit(definition, seed) < held_out ? &split->dev : &split->train;
    bool any = false;
    for (int i = 0; i < entry->word_count; i++) {
        clean_word(entry->words[i]);
        bool kept = false;
        gc_status status = append_pair(side, definition, entry->words[i], &kept);
        if (status != GC_OK) return status;
        any |= kept;
        split->skipped += !kept;
    }
    side->synsets += any;
    return GC_OK;
}

gc_status gc_wordnet_read_stream(FILE *in, const char *name, double held_out, uint64_t seed,
                                 gc_wordnet_split *split) {
    char *line = malloc(GC_WORDNET_MAX_LINE + 1); /* + its NUL */
    if (!line) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory for a line", name);
        return GC_ERR_OUT_OF_MEMORY;
    }
    gc_status status = GC_OK;
    synset entry;
    for (long long number = 1; status == GC_OK; number++) {
        size_t length;
        gc_line_result result = gc_read_line(in, line, GC_WORDNET_MAX_LINE, &length);
        line[length] = '\0';
        if (result == GC_LINE_END) break;
        if (result == GC_LINE_ERROR) {
            gc_set_error(GC_ERR_IO, "%s: cannot read: %s", name, strerror(errno));
            status = GC_ERR_IO;
        } else if (result == GC_LINE_TOO_LONG || memchr(line, '\0', length)) {
            gc_set_error(GC_ERR_FORMAT, "%s:%lld: %s", name, number,
                         result == GC_LINE_TOO_LONG ? "line longer than the limit of " GC_WORDNET_MAX_LINE_TEXT " bytes"
                                                    : "NUL byte (not a WordNet data file)");
            status = GC_ERR_FORMAT;
        } else if (strncmp(line, "  ", 2) == 0) {
            continue; /* the license */
        } else if (!parse_synset(line, &entry)) {
            gc_set_error(GC_ERR_FORMAT, "%s:%lld: not a WordNet synset line (offset lex_filenum ss_type w_cnt word "
                         "lex_id ... | gloss)", name, number);
            status = GC_ERR_FORMAT;
        } else {
            status = add_synset(split, &entry, held_out, seed);
        }
    }
    free(line);
    return status;
}

static gc_status read_data_file(const char *path, gc_wordnet_split *split, double held_out, uint64_t seed) {
    FILE *in = fopen(path, "r");
    if (!in) {
        gc_set_error(GC_ERR_IO, "%s: cannot open: %s (install Debian's wordnet-base, or point --wordnet at "
                     "WordNet 3.0's dict folder)", path, strerror(errno));
        return GC_ERR_IO;
    }
    gc_status status = gc_wordnet_read_stream(in, path, held_out, seed, split);
    fclose(in);
    return status;
}

gc_status gc_wordnet_split_build(const char *folder, double held_out, uint64_t seed, gc_wordnet_split *split) {
    static const char *const files[] = {"data.noun", "data.verb", "data.adj", "data.adv"};
    *split = (gc_wordnet_split){0};
    gc_status status = GC_OK;
    for (size_t i = 0; i < sizeof files / sizeof *files && status == GC_OK; i++) {
        size_t length = strlen(folder) + strlen(files[i]) + 2;
        char *path = malloc(length);
        if (!path) {
            gc_set_error(GC_ERR_OUT_OF_MEMORY, "wordnet: out of host memory");
            status = GC_ERR_OUT_OF_MEMORY;
            break;
        }
        snprintf(path, length, "%s/%s", folder, files[i]);
        status = read_data_file(path, split, held_out, seed);
        free(path);
    }
    if (status != GC_OK) gc_wordnet_split_free(split);
    return status;
}

void gc_wordnet_split_free(gc_wordnet_split *split) {
    free(split->train.text);
    free(split->dev.text);
    *split = (gc_wordnet_split){0};
}

gc_status gc_wordnet_split_save(const char *folder, const gc_wordnet_split *split) {
    gc_status status = gc_make_directories(folder);
    if (status != GC_OK) return status;
    char *paths[2] = {gc_path_join(folder, "train.tsv"), gc_path_join(folder, "dev.tsv")};
    const char *texts[2] = {split->train.text, split->dev.text};
    size_t sizes[2] = {split->train.size, split->dev.size};
    status = gc_write_together(2, paths, texts, sizes);
    free(paths[0]);
    free(paths[1]);
    return status;
}
