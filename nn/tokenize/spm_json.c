/* The SentencePiece-style parts of a BPE tokenizer.json (Llama-2's, Mistral's): the normaliser
 * (NFC, Prepend, Replace of a string, and Sequences of them, kept in order as steps for
 * spm.c) and the Metaspace pre-tokeniser, with the reference's defaults (tokenizers 0.19).
 * Anything else (a Replace by a regex, NFKC, Lowercase, ...) is refused by name. */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenize/tokenizer_json.h"
#include "base/utf8.h"

/* Appends a step; its texts are copied as code points. */
static gc_status add_step(const gc_tokenizer_reader *r, gc_bpe_step_kind kind, const char *pattern, const char *text) {
    gc_bpe_settings *bpe = &r->tokenizer->bpe;
    gc_bpe_step *steps = realloc(bpe->steps, (size_t)(bpe->n_steps + 1) * sizeof *steps);
    if (!steps) return gc_tokenizer_no_memory(r);
    bpe->steps = steps;
    gc_bpe_step *step = &steps[bpe->n_steps++]; /* freed with the tokenizer from here on */
    *step = (gc_bpe_step){.kind = kind};
    if (pattern) gc_codes_append_utf8(&step->pattern, pattern, strlen(pattern));
    if (text) gc_codes_append_utf8(&step->text, text, strlen(text));
    return step->pattern.failed || step->text.failed ? gc_tokenizer_no_memory(r) : GC_OK;
}

/* Replace {"pattern": {"String": P}, "content": C}, P not empty. */
static gc_status read_replace(const gc_tokenizer_reader *r, const gc_json *normalizer) {
    gc_status status = GC_OK;
    const char *where = "normalizer.Replace: ";
    const gc_json *pattern = gc_tokenizer_member(r, normalizer, where, "pattern", GC_JSON_OBJECT, &status);
    const gc_json *content = gc_tokenizer_member(r, normalizer, where, "content", GC_JSON_STRING, &status);
    const gc_json *string = gc_tokenizer_member(r, pattern, where, "String", GC_JSON_STRING, &status);
    if (status != GC_OK) return status;
    if (!string || !string->string[0] || !content)
        return gc_json_file_error(r->name, "normalizer: a Replace must replace a non-empty \"String\" pattern (a "
                                  "\"Regex\" is not supported) by a \"content\"");
    return add_step(r, GC_BPE_STEP_REPLACE, string->string, content->string);
}

gc_status gc_bpe_read_normalizer(const gc_tokenizer_reader *r, const gc_json *normalizer) {
    gc_status status = GC_OK;
    const gc_json *type = gc_tokenizer_member(r, normalizer, "normalizer.", "type", GC_JSON_STRING, &status);
    if (status != GC_OK) return status;
    const char *name = type ? type->string : "(none)";
    if (!strcmp(name, "Sequence")) {
        const gc_json *list = gc_tokenizer_member(r, normalizer, "normalizer.", "normalizers", GC_JSON_ARRAY, &status);
        if (status == GC_OK && !list) status = gc_json_file_error(r->name, "normalizer: a Sequence has no normalizers");
        for (const gc_json *part = list ? list->first : NULL; part && status == GC_OK; part = part->next)
            status = gc_bpe_read_normalizer(r, part);
        return status;
    }
    if (!strcmp(name, "NFC")) return add_step(r, GC_BPE_STEP_NFC, NULL, NULL);
    if (!strcmp(name, "Replace")) return read_replace(r, normalizer);
    if (!strcmp(name, "Prepend")) {
        const gc_json *text = gc_tokenizer_member(r, normalizer, "normalizer.", "prepend", GC_JSON_STRING, &status);
        if (status == GC_OK && !text) status = gc_json_file_error(r->name, "normalizer: a Prepend has no \"prepend\"");
        return status == GC_OK ? add_step(r, GC_BPE_STEP_PREPEND, NULL, text->string) : status;
    }
    return gc_json_file_error(r->name, "normalizer type \"%.40s\" is not supported for BPE (NFC, Prepend, Replace and "
                              "a Sequence of them are)", name);
}

/* prepend_scheme "always", "first" or "never"; without one, the older add_prefix_space
 * (true: always, the default). */
static gc_status read_prepend_scheme(const gc_tokenizer_reader *r, const gc_json *part, gc_metaspace *m) {
    static const char *const schemes[] = {[GC_METASPACE_NEVER] = "never", [GC_METASPACE_FIRST] = "first",
                                          [GC_METASPACE_ALWAYS] = "always"};
    gc_status status = GC_OK;
    const gc_json *scheme = gc_tokenizer_member(r, part, "pre_tokenizer.", "prepend_scheme", GC_JSON_STRING, &status);
    bool add_prefix_space = gc_tokenizer_flag(r, part, "pre_tokenizer.", "add_prefix_space", true, &status);
    if (status != GC_OK) return status;
    m->prepend = add_prefix_space ? GC_METASPACE_ALWAYS : GC_METASPACE_NEVER;
    if (!scheme) return GC_OK;
    for (int i = 0; i < 3; i++)
        if (!strcmp(scheme->string, schemes[i])) {
            m->prepend = (gc_metaspace_prepend)i;
            return GC_OK;
        }
    return gc_json_file_error(r->name, "pre_tokenizer: Metaspace's prepend_scheme \"%.40s\" is none of always, first, "
                              "never", scheme->string);
}

/* Metaspace {"replacement": one character, "prepend_scheme": ..., "split": bool}. */
gc_status gc_bpe_read_metaspace(const gc_tokenizer_reader *r, const gc_json *part) {
    gc_status status = GC_OK;
    gc_metaspace *m = &r->tokenizer->bpe.metaspace;
    const gc_json *replacement = gc_tokenizer_member(r, part, "pre_tokenizer.", "replacement", GC_JSON_STRING, &status);
    m->split = gc_tokenizer_flag(r, part, "pre_tokenizer.", "split", true, &status);
    if (status == GC_OK) status = read_prepend_scheme(r, part, m);
    if (status != GC_OK) return status;
    const char *text = replacement ? replacement->string : "\xe2\x96\x81"; /* U+2581 "▁", the default */
    size_t length = strlen(text);
    if (!length || gc_utf8_decode((const unsigned char *)text, length, &m->replacement) != length)
        return gc_json_file_error(r->name, "pre_tokenizer: Metaspace's replacement \"%.40s\" is not one character",
                                  text);
    m->on = true;
    return GC_OK;
}
