/* The model and pre-tokeniser of a BPE tokenizer.json: the model's vocabulary, merges (of
 * any length) and byte fallback; the pre-tokeniser: ByteLevel with its own regex, a Split by
 * one of the patterns bpe_split.c implements before a ByteLevel without one (GPT-2's, Llama-3's,
 * Qwen's), Metaspace (spm_json.c), or none (Llama-2's: the normaliser does its work); and the
 * post-processor (ByteLevel, which changes no id, a TemplateProcessing, or a Sequence of them).
 * Anything else is refused by name rather than approximated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/tokenize/tokenizer_json.h"

/* The Split patterns bpe_split.c implements, as tokenizer.json spells them. */
static const struct {
    const char *pattern;
    gc_bpe_split split;
} patterns[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", GC_BPE_SPLIT_GPT2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+", GC_BPE_SPLIT_QWEN2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", GC_BPE_SPLIT_LLAMA3},
};

/* The id of a token of the vocabulary, or -1 after recording that `what` names none. */
static int32_t token_id(const gc_tokenizer_reader *r, const char *what, const char *text, size_t length,
                        gc_status *status) {
    int32_t id = gc_wordpiece_lookup(r->tokenizer, text, length);
    if (id < 0 && *status == GC_OK)
        *status = gc_json_file_error(r->name, "%s \"%.*s\" is not in the vocabulary", what, (int)(length < 80 ? length : 80),
                                     text);
    return id;
}

/* Merge number `rank`: "a b" (the older form) or ["a", "b"]; a, b and a + b tokens. */
static gc_status read_merge(const gc_tokenizer_reader *r, const gc_json *item, int32_t rank) {
    const char *left = NULL, *right = NULL;
    size_t left_length = 0, right_length = 0;
    if (item->type == GC_JSON_STRING && strchr(item->string, ' ') && !strchr(strchr(item->string, ' ') + 1, ' ')) {
        left = item->string;
        left_length = (size_t)(strchr(item->string, ' ') - item->string);
        right = left + left_length + 1;
    } else if (item->type == GC_JSON_ARRAY && item->count == 2 && item->first->type == GC_JSON_STRING &&
               item->first->next->type == GC_JSON_STRING) {
        left = item->first->string, left_length = strlen(left);
        right = item->first->next->string;
    } else {
        return gc_json_file_error(r->name, "model.merges: merge %d is neither \"a b\" nor [\"a\", \"b\"]", rank);
    }
    right_length = strlen(right);
    gc_status status = GC_OK;
    int32_t a = token_id(r, "model.merges: the merge's token", left, left_length, &status);
    int32_t b = token_id(r, "model.merges: the merge's token", right, right_length, &status);
    if (status != GC_OK) return status;
    char *merged = malloc(left_length + right_length + 1); /* both lengths are inside the file */
    if (!merged) return gc_tokenizer_no_memory(r);
    memcpy(merged, left, left_length);
    memcpy(merged + left_length, right, right_length);
    int32_t ab = token_id(r, "model.merges: the merged token", merged, left_length + right_length, &status);
    free(merged);
    if (status == GC_OK) gc_bpe_merges_add(r->tokenizer, a, b, rank, ab);
    return status;
}

/* byte_fallback: the ids of "<0x00>" .. "<0xFF>". Each must be a token: the reference would
 * quietly give the unknown token (or nothing) for a character with a byte missing, which no
 * tokenizer meant. */
static gc_status read_byte_tokens(const gc_tokenizer_reader *r) {
    gc_status status = GC_OK;
    for (int byte = 0; byte < 256 && status == GC_OK; byte++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned)byte);
        r->tokenizer->bpe.byte_ids[byte] = token_id(r, "model.byte_fallback: the byte token", name, 6, &status);
    }
    return status;
}

gc_status gc_bpe_read_model(const gc_tokenizer_reader *r, const gc_json *model) {
    gc_status status = GC_OK;
    const char *where = "model.";
    const gc_json *vocab = gc_tokenizer_member(r, model, where, "vocab", GC_JSON_OBJECT, &status);
    const gc_json *merges = gc_tokenizer_member(r, model, where, "merges", GC_JSON_ARRAY, &status);
    const gc_json *unk = gc_tokenizer_member(r, model, where, "unk_token", GC_JSON_STRING, &status);
    const gc_json *prefix = gc_tokenizer_member(r, model, where, "continuing_subword_prefix", GC_JSON_STRING, &status);
    const gc_json *suffix = gc_tokenizer_member(r, model, where, "end_of_word_suffix", GC_JSON_STRING, &status);
    const gc_json *dropout = gc_json_member(model, "dropout");
    r->tokenizer->bpe.byte_fallback = gc_tokenizer_flag(r, model, where, "byte_fallback", false, &status);
    r->tokenizer->bpe.fuse_unk = gc_tokenizer_flag(r, model, where, "fuse_unk", false, &status);
    r->tokenizer->bpe.ignore_merges = gc_tokenizer_flag(r, model, where, "ignore_merges", false, &status);
    if (status != GC_OK) return status;
    if (!vocab || !merges) return gc_json_file_error(r->name, "model has no %s", vocab ? "merges" : "vocab");
    if ((prefix && prefix->string[0]) || (suffix && suffix->string[0]) ||
        (dropout && dropout->type != GC_JSON_NULL && !(dropout->type == GC_JSON_INTEGER && dropout->integer == 0)))
        return gc_json_file_error(r->name, "model: a continuing_subword_prefix, end_of_word_suffix or dropout is not "
                                  "supported (the BPE of GPT-2, Llama and Qwen has none)");
    if ((status = gc_tokenizer_read_vocabulary(r, vocab)) != GC_OK) return status;
    r->tokenizer->bpe.unk_id = unk ? token_id(r, "model.unk_token", unk->string, strlen(unk->string), &status) : -1;
    if (status == GC_OK && r->tokenizer->bpe.byte_fallback) status = read_byte_tokens(r);
    if (status == GC_OK && gc_bpe_merges_init(r->tokenizer, (size_t)merges->count) != GC_OK)
        return gc_tokenizer_no_memory(r);
    int32_t rank = 0;
    for (const gc_json *item = merges->first; item && status == GC_OK; item = item->next)
        status = read_merge(r, item, rank++);
    return status;
}

/* A ByteLevel pre-tokeniser: its own regex (use_regex) unless `inside` a Sequence after a Split. */
static gc_status read_byte_level(const gc_tokenizer_reader *r, const gc_json *part, bool inside) {
    gc_status status = gc_tokenizer_require_type(r, part, "pre_tokenizer", "ByteLevel");
    bool use_regex = gc_tokenizer_flag(r, part, "pre_tokenizer.", "use_regex", true, &status);
    r->tokenizer->bpe.add_prefix_space = gc_tokenizer_flag(r, part, "pre_tokenizer.", "add_prefix_space", false, &status);
    if (status == GC_OK && inside && use_regex)
        return gc_json_file_error(r->name, "pre_tokenizer: a ByteLevel with its own regex after a Split is not "
                                  "supported");
    if (!inside) r->tokenizer->bpe.split = use_regex ? GC_BPE_SPLIT_GPT2 : GC_BPE_SPLIT_NONE;
    r->tokenizer->bpe.byte_level = true;
    return status;
}

/* Split {"pattern": {"Regex": P}, "behavior": "Isolated", "invert": false}, P one of `patterns`. */
static gc_status read_split(const gc_tokenizer_reader *r, const gc_json *part) {
    gc_status status = gc_tokenizer_require_type(r, part, "pre_tokenizer", "Split");
    const gc_json *pattern = gc_json_member(part, "pattern"), *behavior = gc_json_member(part, "behavior");
    const gc_json *regex = gc_json_member(pattern, "Regex");
    bool invert = gc_tokenizer_flag(r, part, "pre_tokenizer.", "invert", false, &status);
    if (status != GC_OK) return status;
    if (!regex || regex->type != GC_JSON_STRING || !behavior || behavior->type != GC_JSON_STRING ||
        strcmp(behavior->string, "Isolated") || invert)
        return gc_json_file_error(r->name, "pre_tokenizer: a Split must have a \"Regex\" pattern, behavior \"Isolated\" "
                                  "and no invert");
    for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++)
        if (!strcmp(regex->string, patterns[i].pattern)) {
            r->tokenizer->bpe.split = patterns[i].split;
            return GC_OK;
        }
    return gc_json_file_error(r->name, "pre_tokenizer: the Split pattern \"%.60s...\" is not one gradcache implements "
                              "(GPT-2's, Qwen2's and Llama-3's are)", regex->string);
}

gc_status gc_bpe_read_pre_tokenizer(const gc_tokenizer_reader *r, const gc_json *pre_tokenizer) {
    if (!pre_tokenizer) return GC_OK; /* the model takes the normalised text whole (Llama-2's) */
    const gc_json *type = gc_json_member(pre_tokenizer, "type"), *list = gc_json_member(pre_tokenizer, "pretokenizers");
    const char *name = type && type->type == GC_JSON_STRING ? type->string : "(none)";
    if (!strcmp(name, "Metaspace")) return gc_bpe_read_metaspace(r, pre_tokenizer);
    if (!strcmp(name, "ByteLevel")) return read_byte_level(r, pre_tokenizer, false);
    if (strcmp(name, "Sequence"))
        return gc_json_file_error(r->name, "pre_tokenizer type \"%.40s\" is not supported for BPE (ByteLevel, "
                                  "Metaspace and a Sequence of a Split and a ByteLevel are)", name);
    if (!list || list->type != GC_JSON_ARRAY || list->count != 2)
        return gc_json_file_error(r->name, "pre_tokenizer: a Sequence must be a Split and a ByteLevel");
    gc_status status = read_split(r, list->first);
    return status == GC_OK ? read_byte_level(r, list->first->next, true) : status;
}

gc_status gc_bpe_read_post_processor(const gc_tokenizer_reader *r, const gc_json *processor) {
    const gc_json *type = gc_json_member(processor, "type"), *list = gc_json_member(processor, "processors");
    const char *name = type && type->type == GC_JSON_STRING ? type->string : "(none)";
    if (!strcmp(name, "ByteLevel")) return GC_OK; /* it trims offsets only */
    if (!strcmp(name, "TemplateProcessing")) return gc_tokenizer_read_template(r, processor);
    if (!strcmp(name, "Sequence") && list && list->type == GC_JSON_ARRAY) {
        gc_status status = GC_OK;
        for (const gc_json *part = list->first; part && status == GC_OK; part = part->next)
            status = gc_bpe_read_post_processor(r, part);
        return status;
    }
    return gc_json_file_error(r->name, "post_processor type \"%.40s\" is not supported for BPE (ByteLevel, "
                              "TemplateProcessing and a Sequence of them are)", name);
}
