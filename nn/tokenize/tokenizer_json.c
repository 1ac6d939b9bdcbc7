/* Reading a Hugging Face tokenizer.json: the WordPiece parts (BERT's) here, the BPE parts in
 * bpe_json.c (byte-level: GPT-2's, Llama-3's, Qwen's) and spm_json.c (SentencePiece's style:
 * Llama-2's, Mistral's). Every part the tokenizer uses is checked; a part of another kind (a
 * Unigram model, a Whitespace pre-tokeniser, ...) is refused by name rather than approximated.
 * Truncation, padding and the decoder are not read: the caller chooses the length, and ids are
 * never decoded here. */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenize/tokenizer_json.h"

char *gc_tokenizer_copy_string(const char *text) {
    size_t length = strlen(text);
    char *copy = malloc(length + 1);
    return copy ? memcpy(copy, text, length + 1) : NULL;
}

gc_status gc_tokenizer_no_memory(const gc_tokenizer_reader *r) {
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory", r->name);
    return GC_ERR_OUT_OF_MEMORY;
}

/* The member `key` of `object` if it has type `type`; NULL when it is absent (or null and
 * optional), GC_ERR_FORMAT in *status when it has another type. */
const gc_json *gc_tokenizer_member(const gc_tokenizer_reader *r, const gc_json *object, const char *where, const char *key,
                                   gc_json_type type, gc_status *status) {
    const gc_json *value = gc_json_member(object, key);
    if (!value || (value->type == GC_JSON_NULL && type != GC_JSON_NULL)) return NULL;
    if (value->type == type) return value;
    *status = gc_json_file_error(r->name, "%s\"%s\" is %s, expected %s", where, key, gc_json_type_name(value->type),
                                 gc_json_type_name(type));
    return NULL;
}

/* A boolean member, `otherwise` when absent. */
bool gc_tokenizer_flag(const gc_tokenizer_reader *r, const gc_json *object, const char *where, const char *key, bool otherwise,
                       gc_status *status) {
    const gc_json *value = gc_tokenizer_member(r, object, where, key, GC_JSON_BOOL, status);
    return value ? value->boolean : otherwise;
}

/* The id of a token text, or -1 after recording that the vocabulary lacks it. */
static int32_t vocabulary_id(const gc_tokenizer_reader *r, const char *what, const char *text, gc_status *status) {
    int32_t id = gc_wordpiece_lookup(r->tokenizer, text, strlen(text));
    if (id < 0) *status = gc_json_file_error(r->name, "%s \"%.80s\" is not in the vocabulary", what, text);
    return id;
}

/* model.vocab: token -> id, the ids exactly 0 .. n-1. */
gc_status gc_tokenizer_read_vocabulary(const gc_tokenizer_reader *r, const gc_json *vocab) {
    gc_tokenizer *t = r->tokenizer;
    if (vocab->count < 1) return gc_json_file_error(r->name, "model.vocab is empty");
    t->vocab_size = vocab->count;
    for (t->slot_count = 2; t->slot_count < 2 * (size_t)vocab->count;) t->slot_count *= 2;
    t->vocab = calloc((size_t)vocab->count, sizeof *t->vocab);
    t->slots = malloc(t->slot_count * sizeof *t->slots);
    if (!t->vocab || !t->slots) return gc_tokenizer_no_memory(r);
    memset(t->slots, 0xff, t->slot_count * sizeof *t->slots); /* -1: empty */
    for (const gc_json *entry = vocab->first; entry; entry = entry->next) {
        if (entry->type != GC_JSON_INTEGER || entry->integer < 0 || entry->integer >= vocab->count)
            return gc_json_file_error(r->name, "model.vocab: token \"%.80s\" has id %s, not an integer in [0, %d)",
                                      entry->key, entry->type == GC_JSON_INTEGER ? "out of range" : "of another type",
                                      vocab->count);
        if (t->vocab[entry->integer])
            return gc_json_file_error(r->name, "model.vocab: tokens \"%.80s\" and \"%.80s\" share id %lld",
                                      t->vocab[entry->integer], entry->key, (long long)entry->integer);
        if (!(t->vocab[entry->integer] = gc_tokenizer_copy_string(entry->key))) return gc_tokenizer_no_memory(r);
        gc_wordpiece_index(t, (int32_t)entry->integer);
    }
    return GC_OK; /* n distinct ids in [0, n): every id has its token */
}

static gc_status read_model(const gc_tokenizer_reader *r, const gc_json *model) {
    gc_status status = GC_OK;
    const gc_json *type = gc_tokenizer_member(r, model, "model.", "type", GC_JSON_STRING, &status);
    if (status != GC_OK) return status;
    if (type && strcmp(type->string, "BPE") == 0) {
        r->tokenizer->bpe_model = true;
        return gc_bpe_read_model(r, model);
    }
    if (!type || strcmp(type->string, "WordPiece") != 0)
        return gc_json_file_error(r->name, "model type \"%.40s\" is neither WordPiece (BERT's) nor BPE (GPT-2's, "
                                  "Llama's, Mistral's, Qwen's)", type ? type->string : "(none)");
    const gc_json *vocab = gc_tokenizer_member(r, model, "model.", "vocab", GC_JSON_OBJECT, &status);
    const gc_json *unk = gc_tokenizer_member(r, model, "model.", "unk_token", GC_JSON_STRING, &status);
    const gc_json *prefix = gc_tokenizer_member(r, model, "model.", "continuing_subword_prefix", GC_JSON_STRING, &status);
    const gc_json *max_chars = gc_tokenizer_member(r, model, "model.", "max_input_chars_per_word", GC_JSON_INTEGER, &status);
    if (status != GC_OK) return status;
    if (!vocab || !unk) return gc_json_file_error(r->name, "model has no %s", vocab ? "unk_token" : "vocab");
    if ((status = gc_tokenizer_read_vocabulary(r, vocab)) != GC_OK) return status;
    r->tokenizer->unk_id = vocabulary_id(r, "unk_token", unk->string, &status);
    r->tokenizer->max_word_chars = max_chars ? max_chars->integer : 100;
    if (!(r->tokenizer->prefix = gc_tokenizer_copy_string(prefix ? prefix->string : "##"))) return gc_tokenizer_no_memory(r);
    r->tokenizer->prefix_length = strlen(r->tokenizer->prefix);
    if (status == GC_OK && (r->tokenizer->max_word_chars < 1 || r->tokenizer->prefix_length > 16))
        status = gc_json_file_error(r->name, "model: max_input_chars_per_word must be positive and "
                                    "continuing_subword_prefix at most 16 bytes");
    return status;
}

/* GC_ERR_FORMAT unless the "type" of `part` (its name, e.g. "normalizer") is `supported`. */
gc_status gc_tokenizer_require_type(const gc_tokenizer_reader *r, const gc_json *object, const char *part, const char *supported) {
    const gc_json *type = gc_json_member(object, "type");
    const char *name = type && type->type == GC_JSON_STRING ? type->string : "(none)";
    if (strcmp(name, supported) == 0) return GC_OK;
    return gc_json_file_error(r->name, "%s type \"%.40s\" is not supported (%s is)", part, name, supported);
}

static gc_status read_normalizer(const gc_tokenizer_reader *r, const gc_json *normalizer) {
    gc_status status = gc_tokenizer_require_type(r, normalizer, "normalizer", "BertNormalizer");
    if (status != GC_OK) return status;
    gc_bert_normalizer *n = &r->tokenizer->normalizer;
    n->clean_text = gc_tokenizer_flag(r, normalizer, "normalizer.", "clean_text", true, &status);
    n->handle_chinese_chars = gc_tokenizer_flag(r, normalizer, "normalizer.", "handle_chinese_chars", true, &status);
    n->lowercase = gc_tokenizer_flag(r, normalizer, "normalizer.", "lowercase", true, &status);
    /* strip_accents null (or absent) follows lowercase, as in the reference */
    n->strip_accents = gc_tokenizer_flag(r, normalizer, "normalizer.", "strip_accents", n->lowercase, &status);
    return status;
}

static gc_status read_pre_tokenizer(const gc_tokenizer_reader *r, const gc_json *pre_tokenizer) {
    gc_status status = gc_tokenizer_require_type(r, pre_tokenizer, "pre_tokenizer", "BertPreTokenizer");
    r->tokenizer->pre_tokenize = status == GC_OK;
    return status;
}

/* Appends `id` to the template's tokens before or after the text. */
static gc_status add_to_template(const gc_tokenizer_reader *r, bool after, int32_t id) {
    gc_tokenizer *t = r->tokenizer;
    int *count = after ? &t->n_after : &t->n_before;
    if (*count == GC_TEMPLATE_MAX)
        return gc_json_file_error(r->name, "post_processor: more than %d special tokens on one side of the text",
                                  GC_TEMPLATE_MAX);
    (after ? t->after : t->before)[(*count)++] = id;
    return GC_OK;
}

/* A special token of a TemplateProcessing: its ids from the "special_tokens" map. */
static gc_status add_special_token(const gc_tokenizer_reader *r, const gc_json *special_tokens, const gc_json *item, bool after) {
    gc_status status = GC_OK;
    const gc_json *name = gc_tokenizer_member(r, item, "post_processor.single: SpecialToken.", "id", GC_JSON_STRING, &status);
    const gc_json *entry = name ? gc_json_member(special_tokens, name->string) : NULL;
    const gc_json *ids = entry ? gc_tokenizer_member(r, entry, "post_processor.special_tokens: ", "ids", GC_JSON_ARRAY, &status) : NULL;
    if (status != GC_OK) return status;
    if (!ids) return gc_json_file_error(r->name, "post_processor: special token \"%.40s\" has no ids",
                                        name ? name->string : "(unnamed)");
    for (const gc_json *id = ids->first; id && status == GC_OK; id = id->next) {
        if (id->type != GC_JSON_INTEGER || id->integer < 0 || id->integer >= r->tokenizer->vocab_size)
            return gc_json_file_error(r->name, "post_processor: special token \"%.40s\" has an id outside the "
                                      "vocabulary", name->string);
        status = add_to_template(r, after, (int32_t)id->integer);
    }
    return status;
}

/* TemplateProcessing's "single": special tokens around exactly one sequence "A". */
gc_status gc_tokenizer_read_template(const gc_tokenizer_reader *r, const gc_json *processor) {
    gc_status status = GC_OK;
    const gc_json *single = gc_tokenizer_member(r, processor, "post_processor.", "single", GC_JSON_ARRAY, &status);
    const gc_json *special_tokens = gc_tokenizer_member(r, processor, "post_processor.", "special_tokens", GC_JSON_OBJECT, &status);
    if (status != GC_OK) return status;
    if (!single) return gc_json_file_error(r->name, "post_processor has no \"single\" template");
    int sequences = 0;
    for (const gc_json *item = single->first; item && status == GC_OK; item = item->next) {
        const gc_json *special = gc_json_member(item, "SpecialToken");
        if (gc_json_member(item, "Sequence")) sequences++;
        else if (special && special->type == GC_JSON_OBJECT)
            status = add_special_token(r, special_tokens, special, sequences > 0);
        else status = gc_json_file_error(r->name, "post_processor.single: an item is neither a SpecialToken nor a "
                                         "Sequence");
    }
    if (status == GC_OK && sequences != 1)
        status = gc_json_file_error(r->name, "post_processor.single has %d sequences, expected 1", sequences);
    return status;
}

/* BertProcessing: {"cls": ["[CLS]", 101], "sep": ["[SEP]", 102]}. */
static gc_status read_bert_processing(const gc_tokenizer_reader *r, const gc_json *processor) {
    static const char *const keys[2] = {"cls", "sep"};
    gc_status status = GC_OK;
    for (int i = 0; i < 2 && status == GC_OK; i++) {
        const gc_json *pair = gc_tokenizer_member(r, processor, "post_processor.", keys[i], GC_JSON_ARRAY, &status);
        const gc_json *id = pair && pair->count == 2 ? pair->first->next : NULL;
        if (status == GC_OK && (!id || id->type != GC_JSON_INTEGER || id->integer < 0 ||
                                id->integer >= r->tokenizer->vocab_size))
            return gc_json_file_error(r->name, "post_processor.%s is not [token, id] with an id in the vocabulary",
                                      keys[i]);
        if (status == GC_OK) status = add_to_template(r, i == 1, (int32_t)id->integer);
    }
    return status;
}

static gc_status read_post_processor(const gc_tokenizer_reader *r, const gc_json *processor) {
    gc_status status = GC_OK;
    const gc_json *type = gc_tokenizer_member(r, processor, "post_processor.", "type", GC_JSON_STRING, &status);
    if (status != GC_OK) return status;
    if (type && strcmp(type->string, "TemplateProcessing") == 0) return gc_tokenizer_read_template(r, processor);
    if (type && strcmp(type->string, "BertProcessing") == 0) return read_bert_processing(r, processor);
    return gc_json_file_error(r->name, "post_processor type \"%.40s\" is not supported (TemplateProcessing and "
                              "BertProcessing are)", type ? type->string : "(none)");
}

/* added_tokens: matched whole in the raw text. Only the kind BERT's special tokens are
 * (not normalised, no stripping of spaces around them, matched inside words too) is
 * implemented; anything else is refused rather than matched differently. */
static gc_status read_added_tokens(const gc_tokenizer_reader *r, const gc_json *added) {
    gc_tokenizer *t = r->tokenizer;
    if (!(t->added = calloc((size_t)(added->count ? added->count : 1), sizeof *t->added))) return gc_tokenizer_no_memory(r);
    gc_status status = GC_OK;
    for (const gc_json *item = added->first; item && status == GC_OK; item = item->next) {
        const char *where = "added_tokens: ";
        const gc_json *id = gc_tokenizer_member(r, item, where, "id", GC_JSON_INTEGER, &status);
        const gc_json *content = gc_tokenizer_member(r, item, where, "content", GC_JSON_STRING, &status);
        bool unsupported = gc_tokenizer_flag(r, item, where, "single_word", false, &status) ||
                           gc_tokenizer_flag(r, item, where, "lstrip", false, &status) ||
                           gc_tokenizer_flag(r, item, where, "rstrip", false, &status) ||
                           gc_tokenizer_flag(r, item, where, "normalized", false, &status);
        if (status != GC_OK) break;
        if (!id || !content || !content->string[0] || id->integer < 0 || id->integer >= INT32_MAX)
            return gc_json_file_error(r->name, "added_tokens: a token without content or with an id outside [0, 2^31 - 1)");
        if (unsupported)
            return gc_json_file_error(r->name, "added_tokens: \"%.40s\" is single_word, lstrip, rstrip or normalized, "
                                      "which is not supported", content->string);
        gc_added_token *token = &t->added[t->n_added++];
        if (!(token->content = gc_tokenizer_copy_string(content->string))) return gc_tokenizer_no_memory(r);
        token->length = strlen(token->content);
        token->id = (int32_t)id->integer;
    }
    return status;
}

/* Added tokens past the model's vocabulary (BPE's special tokens: Qwen's <|endoftext|> and
 * the like) extend it, each id then naming its content; the ids must leave no gap. */
static gc_status extend_vocabulary(const gc_tokenizer_reader *r) {
    gc_tokenizer *t = r->tokenizer;
    int64_t size = t->vocab_size;
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id >= size) size = (int64_t)t->added[i].id + 1;
    if (size == t->vocab_size) return GC_OK;
    if (size - t->vocab_size > t->n_added)
        return gc_json_file_error(r->name, "added_tokens: ids up to %lld leave a gap after the vocabulary's %lld",
                                  (long long)size - 1, (long long)t->vocab_size);
    char **vocab = realloc(t->vocab, (size_t)size * sizeof *vocab);
    size_t slot_count = t->slot_count;
    while (slot_count < 2 * (size_t)size) slot_count *= 2;
    int32_t *slots = vocab ? malloc(slot_count * sizeof *slots) : NULL;
    if (vocab) t->vocab = vocab;
    if (!slots) return gc_tokenizer_no_memory(r);
    for (int64_t id = t->vocab_size; id < size; id++) vocab[id] = NULL;
    int64_t old_size = t->vocab_size;
    t->vocab_size = size; /* the new entries are freed with the tokenizer from here on */
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id >= old_size && !vocab[t->added[i].id] &&
            !(vocab[t->added[i].id] = gc_tokenizer_copy_string(t->added[i].content))) {
            free(slots);
            return gc_tokenizer_no_memory(r);
        }
    for (int64_t id = old_size; id < size; id++)
        if (!vocab[id]) {
            free(slots);
            return gc_json_file_error(r->name, "added_tokens: no token has id %lld, between the vocabulary and the "
                                      "last added token", (long long)id);
        }
    free(t->slots);
    t->slots = slots;
    t->slot_count = slot_count;
    memset(slots, 0xff, slot_count * sizeof *slots);
    for (int64_t id = 0; id < size; id++) gc_wordpiece_index(t, (int32_t)id);
    return GC_OK;
}

static gc_status read_tokenizer(const gc_tokenizer_reader *r, const gc_json *top) {
    if (top->type != GC_JSON_OBJECT) return gc_json_file_error(r->name, "not a JSON object");
    gc_status status = GC_OK;
    const gc_json *model = gc_tokenizer_member(r, top, "", "model", GC_JSON_OBJECT, &status);
    const gc_json *normalizer = gc_tokenizer_member(r, top, "", "normalizer", GC_JSON_OBJECT, &status);
    const gc_json *pre_tokenizer = gc_tokenizer_member(r, top, "", "pre_tokenizer", GC_JSON_OBJECT, &status);
    const gc_json *post_processor = gc_tokenizer_member(r, top, "", "post_processor", GC_JSON_OBJECT, &status);
    const gc_json *added = gc_tokenizer_member(r, top, "", "added_tokens", GC_JSON_ARRAY, &status);
    const gc_json *padding = gc_tokenizer_member(r, top, "", "padding", GC_JSON_OBJECT, &status);
    const gc_json *pad_id = gc_tokenizer_member(r, padding, "padding.", "pad_id", GC_JSON_INTEGER, &status);
    if (status != GC_OK) return status;
    if (!model) return gc_json_file_error(r->name, "no \"model\" (not a tokenizer.json)");
    status = read_model(r, model);
    bool bpe = r->tokenizer->bpe_model;
    if (status == GC_OK && normalizer)
        status = bpe ? gc_bpe_read_normalizer(r, normalizer) : read_normalizer(r, normalizer);
    if (status == GC_OK && (pre_tokenizer || bpe))
        status = bpe ? gc_bpe_read_pre_tokenizer(r, pre_tokenizer) : read_pre_tokenizer(r, pre_tokenizer);
    if (status == GC_OK && post_processor)
        status = bpe ? gc_bpe_read_post_processor(r, post_processor) : read_post_processor(r, post_processor);
    if (status == GC_OK && added) status = read_added_tokens(r, added);
    if (status == GC_OK) status = extend_vocabulary(r);
    if (status != GC_OK) return status;
    int32_t pad = pad_id ? (int32_t)pad_id->integer : gc_wordpiece_lookup(r->tokenizer, "[PAD]", 5);
    if (pad_id && (pad_id->integer < 0 || pad_id->integer >= r->tokenizer->vocab_size))
        return gc_json_file_error(r->name, "padding.pad_id is outside the vocabulary");
    r->tokenizer->pad_id = pad < 0 ? 0 : pad;
    return GC_OK;
}

static gc_status build(const char *name, const gc_json *document, gc_tokenizer **tokenizer) {
    gc_tokenizer_reader r = {name, calloc(1, sizeof(gc_tokenizer))};
    if (!r.tokenizer) return gc_tokenizer_no_memory(&r);
    gc_status status = read_tokenizer(&r, document);
    if (status == GC_OK) *tokenizer = r.tokenizer;
    else gc_tokenizer_free(r.tokenizer);
    return status;
}

gc_status gc_tokenizer_load_memory(const char *text, size_t length, const char *name, gc_tokenizer **tokenizer) {
    *tokenizer = NULL;
    gc_json *document;
    gc_status status = gc_json_file_parse(name, text, length, &document);
    if (status == GC_OK) status = build(name, document, tokenizer);
    gc_json_free(document);
    return status;
}

gc_status gc_tokenizer_load(const char *path, gc_tokenizer **tokenizer) {
    *tokenizer = NULL;
    gc_json *document;
    gc_status status = gc_json_file_read(path, GC_TOKENIZER_MAX_FILE, &document);
    if (status == GC_OK) status = build(path, document, tokenizer);
    gc_json_free(document);
    return status;
}
