/* Tokenizers: text -> token ids and attention masks, ready for a text encoder.
 *
 * Four kinds, one interface:
 *  - bytes (gc_tokenizer_bytes): [CLS] followed by the text's UTF-8 bytes, byte b as id
 *    b + GC_TOKEN_FIRST_BYTE. No vocabulary file, every text representable; the
 *    from-scratch models of `gradcache train` use it.
 *  - WordPiece (gc_tokenizer_load): a Hugging Face tokenizer.json of a BERT-family model,
 *    tokenizing exactly as the reference implementation (the `tokenizers` library) does:
 *      1. added tokens ([CLS], [SEP], [MASK], ...) written in the text are matched first
 *         (leftmost, then longest) and kept whole;
 *      2. the BertNormalizer, as configured: clean text (control characters removed,
 *         whitespace made ' '), spaces around CJK ideographs, accents stripped (NFD, then
 *         nonspacing marks removed), lowercase;
 *      3. the BertPreTokenizer: words split at whitespace, each punctuation character a
 *         word of its own;
 *      4. WordPiece: each word split greedily into the longest vocabulary entries from the
 *         left, continuations spelled with the prefix ("##"); a word with a piece not in the
 *         vocabulary, or longer than max_input_chars_per_word characters, is [UNK];
 *      5. the post-processor's template: [CLS] ... [SEP] (TemplateProcessing or
 *         BertProcessing).
 *    Truncation to `max_length` cuts the text's tokens, never the template's: [SEP] stays.
 *    Invalid UTF-8 in a text counts as U+FFFD (which clean_text removes).
 *
 *  - byte-level BPE (gc_tokenizer_load): a tokenizer.json of GPT-2's, Llama-3's or Qwen's kind
 *    (the decoder family's, gradcache/pretrained.h), tokenizing exactly as the reference does:
 *      1. added tokens as above (special tokens such as <|endoftext|>, whose ids may extend
 *         the model's vocabulary);
 *      2. the normaliser: none, or NFC (Qwen's);
 *      3. the pre-tokeniser's split into pieces by GPT-2's regular expression (ByteLevel's
 *         own), Qwen2's or Llama-3's (a Split before a ByteLevel): letters, numbers (Qwen2:
 *         one digit a piece, Llama-3: up to three), punctuation and whitespace runs, and the
 *         English contractions; then each piece's UTF-8 bytes as GPT-2's byte characters;
 *      4. BPE: the characters of a piece merged pair by pair by the rank of their merge
 *         (ignore_merges: a piece in the vocabulary whole is one token);
 *      5. the post-processor's template (TemplateProcessing, maybe in a Sequence with a
 *         ByteLevel): Qwen3-Embedding's <|endoftext|> after the text, Llama-3's
 *         <|begin_of_text|> before it.
 *    Another normaliser, pre-tokeniser pattern or post-processor is refused by name.
 *
 *  - SentencePiece-style BPE (gc_tokenizer_load): a tokenizer.json of Llama-2's or Mistral's
 *    kind, the same pipeline with these steps instead:
 *      2. the normaliser's steps in order: Prepend ("▁" before a non-empty text), Replace of
 *         a string (" " by "▁"), NFC, as Llama-2's legacy files have them;
 *      3. no pre-tokeniser (the text is one piece), or Metaspace: spaces become "▁", which
 *         is prepended (always, or only to the text's first segment between added tokens),
 *         and, with split, a piece starts at each "▁"; a piece's characters are themselves;
 *      4. BPE as above; a character without a token becomes its UTF-8 bytes' <0x00>..<0xFF>
 *         tokens (byte_fallback: all 256 must be in the vocabulary), or <unk> (one for a run
 *         of such characters with fuse_unk).
 *    Merges are "a b" strings or ["a", "b"] pairs, of any length.
 * The character classes come from the reference itself (nn/tokenize/unicode_tables.c,
 * unicode_bpe_tables.c); tests/test_wordpiece.c, tests/test_bpe.c and tests/test_spm.c check
 * the ids against the reference's on fixed sets of strings. */
#ifndef GRADCACHE_TOKENIZER_H
#define GRADCACHE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gradcache/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The byte-level vocabulary: padding, [CLS], then the 256 byte values. */
enum { GC_TOKEN_PAD = 0, GC_TOKEN_CLS = 1, GC_TOKEN_FIRST_BYTE = 2, GC_TOKEN_VOCAB = 258 };

/* The largest tokenizer.json read (BERT's is about 0.5 MB; multilingual ones a few MB). */
#define GC_TOKENIZER_MAX_FILE (64u << 20)

typedef struct gc_tokenizer gc_tokenizer;

/* The byte-level tokenizer (a shared instance: gc_tokenizer_free ignores it). */
const gc_tokenizer *gc_tokenizer_bytes(void);

/* Reads a tokenizer.json. GC_ERR_IO when it cannot be read; GC_ERR_FORMAT naming the file
 * and the problem when it is not JSON or not a WordPiece or BPE tokenizer this library
 * implements (another model type, normaliser, pre-tokeniser or post-processor). *tokenizer is NULL on
 * failure. */
gc_status gc_tokenizer_load(const char *path, gc_tokenizer **tokenizer);
/* The same from `length` bytes of memory; `name` stands for the file in messages. */
gc_status gc_tokenizer_load_memory(const char *text, size_t length, const char *name, gc_tokenizer **tokenizer);
/* NULL and the byte tokenizer are no-ops. */
void gc_tokenizer_free(const gc_tokenizer *tokenizer);

/* Ids are in [0, vocab size). */
int64_t gc_tokenizer_vocab_size(const gc_tokenizer *tokenizer);
/* The id padding uses (its mask is 0, so any id would do; this is the model's own). */
int32_t gc_tokenizer_pad_id(const gc_tokenizer *tokenizer);
/* The text of token `id` ("[CLS]", "##ing", ...; for bytes "<0x41>"), or NULL outside the
 * vocabulary. The byte tokenizer writes into `buffer` (16 bytes); WordPiece ignores it. */
const char *gc_tokenizer_token(const gc_tokenizer *tokenizer, int32_t id, char buffer[16]);

/* The tokens the template adds to every text ([CLS] and [SEP], an end-of-text token): a
 * max_length must exceed it to leave room for any text. */
int64_t gc_tokenizer_special_count(const gc_tokenizer *tokenizer);
/* One text (NUL-terminated UTF-8) -> at most max_length ids (max_length >= the template's
 * special tokens + 1) written to ids[]; returns how many, or -1 with GC_ERR_OUT_OF_MEMORY
 * when host memory runs out. */
int64_t gc_tokenizer_encode(const gc_tokenizer *tokenizer, const char *text, int64_t max_length, int32_t *ids);

typedef enum gc_padding {
    GC_PAD_TO_MAX_LENGTH, /* every row max_length tokens: fixed shapes */
    GC_PAD_TO_LONGEST     /* rows as long as the batch's longest text: less work for short texts */
} gc_padding;

/* texts[0..count) -> ids i32 [count, T] and mask [count, T] (mask_dtype: 1 for a token, 0
 * for padding) on `device`, T = max_length or the longest row's length (`padding`). GC_OK,
 * or an allocation error with *ids = *mask = NULL. */
gc_status gc_tokenize(const gc_tokenizer *tokenizer, const char *const *texts, int64_t count, int64_t max_length,
                      gc_padding padding, gc_dtype mask_dtype, gc_device device, gc_tensor **ids, gc_tensor **mask);
/* gc_tokenize with `prompt` (or NULL) written before every text: the instruction a decoder
 * embedder wants before its queries ("Instruct: ...\nQuery:", gc_pretrained_prompt), tokenized
 * with the text as one string, as sentence-transformers does, its tokens counting toward
 * max_length (truncation cuts the text's end). */
gc_status gc_tokenize_prompted(const gc_tokenizer *tokenizer, const char *prompt, const char *const *texts,
                               int64_t count, int64_t max_length, gc_padding padding, gc_dtype mask_dtype,
                               gc_device device, gc_tensor **ids, gc_tensor **mask);

#ifdef __cplusplus
}
#endif
#endif
