/* Training text encoders on query/positive pairs, as a library: what the `gradcache` program
 * trains and evaluates with, for any C program to call.
 *
 *   pair datasets   gc_pairs: `query<TAB>positive[<TAB>negative...]` files, read a bounded
 *                   line at a time; gc_wordnet_*: WordNet's definition -> word pairs
 *   batches         gc_batch_sampler: each epoch's order from (seed, epoch), a step's examples
 *                   from the step alone; gc_multi_sampler: several datasets, each step's batch
 *                   from one; gc_training_batch: a step's tokenized tensors
 *   dual encoders   gc_dual_encoder: a query and a passage tower (or one, tied), from a preset
 *                   or a pretrained folder; loaded from and saved to a run or model folder
 *   evaluation      gc_retrieval_*: Recall@1, Recall@10 and MRR; gc_beir_*: BEIR-format
 *                   datasets, exact search (gc_top_k) and trec_eval's measures (gc_trec_*)
 *   mining          gc_miner, gc_mine_pairs: hard negatives mined with a model by exact search,
 *                   as sentence-transformers' mine_hard_negatives chooses them
 *   memory          gc_mem_limit: the default byte limit that turns a run too large for the
 *                   machine into an error instead of the kernel's OOM killer
 *   the trainer     gc_trainer: a run from a config struct, step by step, into a run folder
 *                   (log.jsonl, checkpoint.safetensors, model.safetensors) that it resumes
 *                   from bit for bit, one process or data-parallel under a launcher
 *
 * Errors are returned, never printed: a gc_status, with one line in gc_last_error() naming the
 * file, the line or the field and the offending value. */
#ifndef GRADCACHE_TRAIN_H
#define GRADCACHE_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradcache/cache.h"
#include "gradcache/ddp.h"
#include "gradcache/device.h"
#include "gradcache/error.h"
#include "gradcache/loss.h"
#include "gradcache/nn.h"
#include "gradcache/pretrained.h"
#include "gradcache/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- pair datasets ------------------------------------------------------------------------ */

/* One example per line, `query<TAB>positive[<TAB>negative...]`, UTF-8. With k positives per
 * query (gc_trainer_config.positives), a line is `query<TAB>positive_1...<TAB>positive_k
 * [<TAB>negative...]`: the reader sees columns only, and the trainer takes the first k after the
 * query as positives and the rest as negatives. Lines may end in \n or
 * \r\n; the last may lack its newline. Every problem (a missing or unreadable file, an empty
 * line or field, a line longer than GC_PAIRS_MAX_LINE bytes, invalid UTF-8, a NUL byte, another
 * number of negatives than line 1's) is GC_ERR_IO or GC_ERR_FORMAT naming the file and the line.
 * The input is read a line at a time and the first bad line ends the reading: a stream that is
 * no pair file (/dev/zero, a binary file) costs at most a line's bytes. */
#define GC_PAIRS_MAX_LINE 4096

/* A teacher's scores beside a pair file (distillation, gradcache/loss.h): line i holds example
 * i's scores, `columns` (1 + the pair file's negatives) numbers separated by single tabs: its
 * positive's, then each negative's, in the pair file's order. Every problem (a missing file, an
 * empty line, a field that is not a number or not finite, another number of fields, more or
 * fewer lines than `count`, a line longer than GC_PAIRS_MAX_LINE bytes, a NUL byte) is GC_ERR_IO
 * or GC_ERR_FORMAT naming the file and the line; a line past `count` stops the reading. */
typedef struct gc_teacher_scores {
    int64_t count;  /* examples */
    int columns;    /* scores per example */
    double *scores; /* [count, columns] */
} gc_teacher_scores;

gc_status gc_teacher_scores_read(const char *path, int64_t count, int columns, gc_teacher_scores *scores);
void gc_teacher_scores_free(gc_teacher_scores *scores);

typedef struct gc_pairs {
    int64_t count;  /* examples */
    int negatives;  /* hard negatives per example (the same for every line) */
    char **texts;   /* [count * (2 + negatives)]: query, positive, negatives..., NUL-terminated */
} gc_pairs;

gc_status gc_pairs_read(const char *path, gc_pairs *pairs);
/* The same from an open stream (a pipe too), read to its end; `name` is used in messages. */
gc_status gc_pairs_read_stream(FILE *in, const char *name, gc_pairs *pairs);
/* The same from memory (`name` is used in messages). */
gc_status gc_pairs_parse(const char *data, size_t size, const char *name, gc_pairs *pairs);
void gc_pairs_free(gc_pairs *pairs);
/* Column 0 is the query, 1 the positive, 2.. the negatives. */
static inline const char *gc_pairs_text(const gc_pairs *pairs, int64_t example, int column) {
    return pairs->texts[example * (2 + pairs->negatives) + column];
}

/* A definition -> word dataset from WordNet 3.0's data files (data.noun, .verb, .adj, .adv, as
 * Debian's wordnet-base installs them in /usr/share/wordnet). Every (synset, word) gives one
 * pair line `definition<TAB>word`: the gloss up to its first ';' (examples dropped), tabs and
 * line breaks made spaces, trimmed; the word with '_' made spaces and an adjective's marker
 * ("(p)", "(a)", "(ip)") removed. An entry that would not be a valid pair line is skipped and
 * counted. A hash of the definition (mixed with a seed) sends a synset to dev, so all the words
 * of a synset, and all the synsets sharing one definition, land on the same side. */
typedef struct gc_wordnet_side {
    char *text;      /* the pair file's bytes (text[0..size)) */
    size_t size, capacity;
    int64_t pairs;   /* lines in text */
    int64_t synsets; /* synsets with at least one line in text */
} gc_wordnet_side;

typedef struct gc_wordnet_split {
    gc_wordnet_side train, dev;
    int64_t skipped; /* (synset, word) entries left out */
} gc_wordnet_split;

/* The longest data line read (WordNet 3.0's longest has 12,972 bytes): a longer line, or a NUL
 * byte, is GC_ERR_FORMAT naming the line, read no further than the limit. */
#define GC_WORDNET_MAX_LINE 65536

/* Reads the four data files of `folder`, about `held_out` of the definitions going to dev.
 * GC_ERR_IO names a missing or unreadable file, GC_ERR_FORMAT the file and line of a line that
 * is not a synset. Nothing is kept on failure. */
gc_status gc_wordnet_split_build(const char *folder, double held_out, uint64_t seed, gc_wordnet_split *split);
/* One data file's lines from `in` (`name` in messages) added to *split, which the caller frees,
 * on failure too. */
gc_status gc_wordnet_read_stream(FILE *in, const char *name, double held_out, uint64_t seed,
                                 gc_wordnet_split *split);
/* Writes folder/train.tsv and folder/dev.tsv (the folder created if missing), both complete
 * under temporary names before either is renamed into place. */
gc_status gc_wordnet_split_save(const char *folder, const gc_wordnet_split *split);
void gc_wordnet_split_free(gc_wordnet_split *split);
/* Where a definition falls in [0, 1) for `seed` (64-bit FNV-1a of its bytes, mixed with the
 * seed by splitmix64's finalizer): below held_out it goes to dev.tsv. */
double gc_wordnet_split_unit(const char *definition, uint64_t seed);

/* Judged (query, document) pairs as a BEIR-format folder (gc_beir_read reads it): the queries
 * are the distinct query texts ("q0", "q1"... in byte order), the corpus the distinct documents
 * ("d0"..., no title), and every distinct (query, document) a judgement of grade 1, in
 * qrels/test.tsv when the query's unit (gc_wordnet_split_unit of its text) is below held_out,
 * in qrels/dev.tsv when below 2 held_out, else in qrels/train.tsv. */
typedef struct gc_beir_counts {
    int64_t documents, queries;
    int64_t qrels[3]; /* train, dev, test */
} gc_beir_counts;

/* Writes folder/corpus.jsonl, queries.jsonl and qrels/{train,dev,test}.tsv from queries[n] and
 * documents[n] (pair i judged) (folders created if missing), all complete under temporary
 * names before any is renamed into place. GC_ERR_FORMAT when a split would have no judgement
 * (held_out too large or too small for the data); GC_ERR_IO naming a file that cannot be
 * written. */
gc_status gc_beir_save_judged(const char *folder, const char *const *queries, const char *const *documents, int64_t n,
                              double held_out, uint64_t seed, gc_beir_counts *counts);
/* WordNet's pairs (both sides of the split) saved so: the definitions are the queries, the
 * words the documents; test holds the definitions dev.tsv would. */
gc_status gc_wordnet_beir_save(const char *folder, const gc_wordnet_split *split, double held_out, uint64_t seed,
                               gc_beir_counts *counts);

/* ---- manual pages as a retrieval set ------------------------------------------------------- */

/* A manual page's roff source (man(7) or mdoc(7), as Debian's manpages packages install them)
 * as a query and its passage: the query is what the NAME section says the page is about (the
 * text after "name \- ", or mdoc's .Nd), the passage the first max_words words of the
 * DESCRIPTION section. Text macros give their words, escapes become ASCII or nothing, layout
 * requests give nothing: the text is for retrieval, not typesetting. GC_ERR_FORMAT naming
 * `name` and the reason for a source that gives no pair: a .so redirect to another page, no
 * "name - description" line, a DESCRIPTION of fewer than GC_MANPAGE_MIN_WORDS words, invalid
 * UTF-8 or a NUL byte. */
#define GC_MANPAGE_MIN_WORDS 3
#define GC_MANPAGE_MAX_BYTES (8u << 20) /* a page larger than this, compressed or not, gives no pair */

typedef struct gc_manpage {
    char *query, *passage;
} gc_manpage;

gc_status gc_manpage_parse(const char *text, size_t size, int max_words, const char *name, gc_manpage *page);
void gc_manpage_free(gc_manpage *page);

/* The pages of a manual folder (/usr/share/man): its man1 ... man9* subfolders, files in byte
 * order, plain or gzip-compressed. A file that gives no pair is counted in `skipped`.
 * GC_ERR_IO when the folder cannot be read or has no section folder. */
typedef struct gc_manpages {
    int64_t count;   /* pages that gave a pair */
    char **queries;  /* [count] */
    char **passages; /* [count] */
    int64_t skipped; /* files that gave none */
} gc_manpages;

gc_status gc_manpages_read(const char *folder, int max_words, gc_manpages *pages);
void gc_manpages_free(gc_manpages *pages);

/* ---- paths of datasets and runs ------------------------------------------------------------- */

/* A dataset argument: a folder means its file `split`.tsv ("train", "dev"); anything else is
 * the pair file itself. A new string (free it). */
char *gc_data_path(const char *path, const char *split);
/* A file inside a run folder, or the path itself when it names a file. A new string. */
char *gc_run_file(const char *path, const char *name);
/* dir + "/" + name, in a new string. */
char *gc_path_join(const char *dir, const char *name);
/* The folder holding `path` ("." for a bare name, "/" for one at the root), in a new string. */
char *gc_path_parent(const char *path);
/* Creates the folder and any missing parents (mkdir -p); GC_ERR_IO naming it on failure. */
gc_status gc_make_directories(const char *path);

/* ---- batches -------------------------------------------------------------------------------- */

/* Which examples each step takes. Epoch e visits the examples in a permutation drawn from the
 * Philox stream of `seed` (gradcache/random.h) from word 2 e n on, so any epoch's order follows
 * from (seed, e) alone and a resumed run needs only its step count. Step s of an epoch takes
 * positions [s B, (s + 1) B) of the permutation; the n mod B examples left over at the end of
 * an epoch are skipped in that epoch (every batch has B examples). */
typedef struct gc_batch_sampler {
    uint64_t seed;
    int64_t count;           /* examples in the dataset */
    int64_t batch_size;      /* B, at most count */
    int64_t steps_per_epoch; /* count / batch_size */
    int64_t epoch;           /* the epoch whose order `order` holds; -1: none yet */
    int64_t *order;          /* [count]: a permutation of 0..count-1 (allocated at the first batch) */
    int64_t *keys;           /* [count * keys_per_example] or NULL: see gc_batch_sampler_distinct */
    int keys_per_example;
    int64_t n_keys;          /* keys are in [0, n_keys) */
    int64_t repeated;        /* batches of `epoch` that hold a key twice (unavoidably) */
} gc_batch_sampler;

/* 1 <= batch_size <= count, else a programmer error. */
void gc_batch_sampler_init(gc_batch_sampler *sampler, uint64_t seed, int64_t count, int64_t batch_size);
/* The epoch of step `step` (from 0) and how many of that epoch's examples come before it. */
void gc_batch_sampler_locate(const gc_batch_sampler *sampler, int64_t step, int64_t *epoch, int64_t *position);
/* The examples of step `step`: [batch_size] indices into the dataset (valid until the next
 * call); *epoch receives the step's epoch. */
const int64_t *gc_batch_sampler_batch(gc_batch_sampler *sampler, int64_t step, int64_t *epoch);
void gc_batch_sampler_free(gc_batch_sampler *sampler);
/* Duplicate-free batches (sentence-transformers' NO_DUPLICATES): example e has the keys
 * keys[e * per_example ..) in [0, n_keys) (copied; e.g. the indices of its positive texts among
 * the distinct ones, gc_distinct_texts), and each epoch's permutation is rearranged by
 * gc_batch_order_distinct, so no two examples of a batch share a key unless the greedy pass runs
 * out of examples that fit (a key in more examples than there are batches, or an epoch's last
 * batches with no example to spare: counted in `repeated`; sentence-transformers drops such
 * examples instead, where every batch here keeps batch_size examples). Still a function of
 * (seed, epoch) alone: a resumed run gets the same batches. */
void gc_batch_sampler_distinct(gc_batch_sampler *sampler, const int64_t *keys, int per_example, int64_t n_keys);
/* Rearranges order[0..count) so that each of its count / batch_size batches (consecutive
 * blocks) holds no key twice: each batch takes, in order, the first examples not yet placed
 * that clash with none of its keys, and only when none is left the first ones as they come. The examples no full batch takes
 * end the order. Returns how many batches hold a key twice. */
int64_t gc_batch_order_distinct(int64_t *order, int64_t count, int64_t batch_size, const int64_t *keys,
                                int per_example, int64_t n_keys);
/* order[0..count): the permutation of `epoch`. */
void gc_epoch_order(uint64_t seed, int64_t epoch, int64_t count, int64_t *order);

/* Several datasets in one run (--data a,b,c): every step's batch comes from ONE dataset, so
 * that its in-batch negatives are of one kind, and which dataset a step takes is a function of
 * (seed, step) alone, as its examples are. Dataset d keeps its own gc_batch_sampler, whose
 * steps are d's batches in turn: the k-th step that takes d takes d's step k (its own epochs,
 * each visiting its examples once). The schedule, as sentence-transformers'
 * MultiDatasetBatchSampler:
 *   GC_SAMPLING_ROUND_ROBIN   the datasets in turn (0, 1, .., n-1, 0, ..); an epoch of the
 *                             schedule ends when the smallest dataset has given its steps per
 *                             epoch: n times the smallest's steps. The larger datasets go on in
 *                             the next epoch where they were (their own epochs are longer);
 *   GC_SAMPLING_PROPORTIONAL  an epoch takes every dataset's steps per epoch exactly once, in an
 *                             order drawn from (seed, epoch) (a Fisher-Yates shuffle of the
 *                             multiset, gc_epoch_order): dataset d on S_d of the sum S of them,
 *                             and each dataset's own epoch is the schedule's.
 * Dataset 0's sampler is seeded with `seed` itself (so one dataset is the single-dataset run,
 * bit for bit), dataset d's with gc_derive_seed(seed, d), the proportional order with
 * gc_derive_seed(seed, 0). */
typedef enum gc_sampling { GC_SAMPLING_ROUND_ROBIN, GC_SAMPLING_PROPORTIONAL } gc_sampling;

/* The most datasets one run takes. */
#define GC_MAX_DATASETS 64

typedef struct gc_multi_sampler {
    gc_sampling sampling;       /* one dataset: round-robin (the same schedule) */
    int count;                  /* datasets, 1 .. GC_MAX_DATASETS */
    gc_batch_sampler *datasets; /* [count]: each dataset's own batches */
    int64_t batch_size;         /* B, every dataset's */
    int64_t steps_per_epoch;    /* the schedule's epoch */
    uint64_t order_seed;        /* proportional: names each epoch's order */
    int64_t epoch;              /* proportional: the epoch whose order is below; -1: none yet */
    int *order;                 /* proportional: [steps_per_epoch] the dataset of each step */
    int64_t *before;            /* proportional: [steps_per_epoch] steps of the same dataset before
                                   it in the epoch */
} gc_multi_sampler;

/* examples[count]: each dataset's size, each at least batch_size (else a programmer error, as
 * 1 <= count <= GC_MAX_DATASETS). */
void gc_multi_sampler_init(gc_multi_sampler *sampler, uint64_t seed, int count, const int64_t *examples,
                           int64_t batch_size, gc_sampling sampling);
/* The schedule's epoch of step `step` (from 0) and how many examples of that epoch come before
 * it (steps into the epoch times B): with one dataset, gc_batch_sampler_locate's. */
void gc_multi_sampler_locate(const gc_multi_sampler *sampler, int64_t step, int64_t *epoch, int64_t *position);
/* The dataset of step `step` into *dataset and its own step (how many earlier steps took it)
 * into *dataset_step. */
void gc_multi_sampler_which(gc_multi_sampler *sampler, int64_t step, int *dataset, int64_t *dataset_step);
/* The examples of step `step`: [batch_size] indices into dataset *dataset (valid until the next
 * call); *epoch receives the schedule's epoch. */
const int64_t *gc_multi_sampler_batch(gc_multi_sampler *sampler, int64_t step, int *dataset, int64_t *epoch);
void gc_multi_sampler_free(gc_multi_sampler *sampler);

/* The two inputs of a step: the queries, and the passages (each example's positive followed by
 * its first `negatives` further columns, the layout gc_contrastive_loss expects: with k
 * positives, `negatives` is k - 1 plus the hard negatives), each side's text after its prompt
 * (gc_tokenize_prompted) when `prompts` (or NULL) has one. */
typedef struct gc_training_batch {
    gc_tensor *query_ids, *query_mask;     /* [B, T <= max_length] */
    gc_tensor *passage_ids, *passage_mask; /* [B (1 + negatives), T' <= max_length] */
    gc_batch inputs[2];                    /* {ids, mask} of each side, borrowing the above */
} gc_training_batch;

/* Tokenizes examples[0..count) of `pairs` on `device`, at most max_length tokens per text, each
 * side padded to its longest text, the masks in mask_dtype (the model's). GC_OK or an
 * allocation error (nothing left allocated); more negatives than the pairs have is a
 * programmer error. */
gc_status gc_training_batch_make(const gc_pairs *pairs, const int64_t *examples, int64_t count, int negatives,
                                 const gc_tokenizer *tokenizer, char *const prompts[2], int64_t max_length,
                                 gc_dtype mask_dtype, gc_device device, gc_training_batch *batch);
void gc_training_batch_release(gc_training_batch *batch);

/* ---- dual encoders -------------------------------------------------------------------------- */

/* Preset names, NULL-terminated: "tiny" (dim 64, 2 layers, 4 heads, MLP 128, projection 64),
 * "small" (128, 4, 4, 512, 128) and "base" (256, 6, 8, 1024, 256). */
extern const char *const gc_model_size_names[];
/* A preset's text encoder: BERT-style post-norm layers over the byte vocabulary
 * (gc_tokenizer_bytes), gelu, dropout 0.1, mean pooling, then the projection; f32. */
gc_text_encoder_config gc_model_preset(int size_index, int64_t max_length);

/* A query tower and a passage tower; tied: one encoder for both. */
typedef struct gc_dual_encoder {
    bool tied;
    gc_text_encoder towers[2];     /* [1] unused when tied */
    gc_param_list params;          /* "query.*" and "passage.*", or "encoder.*" when tied */
    const gc_tokenizer *tokenizer; /* bytes for a preset; a pretrained folder's own (owned) */
    int64_t max_length;            /* tokens per text */
    char *pretrained;              /* the folder a pretrained model came from, else NULL */
    char *prompts[2];              /* what the folder writes before a query's and a passage's text, or NULL */
    gc_bert_unused unused;         /* pretrained: the file's weights the encoder does not use, saved back */
} gc_dual_encoder;

/* A preset's model: random weights from `seed` (the passage tower continues the query tower's
 * stream), the byte tokenizer, config->max_length tokens. */
gc_status gc_dual_encoder_init(gc_dual_encoder *model, const gc_text_encoder_config *config, bool tied,
                               gc_device device, uint64_t seed);
/* The pretrained model of folder `dir`, of either family (a BERT or a decoder-style embedder:
 * config.json, model.safetensors or its shards, tokenizer.json; gradcache/pretrained.h), as one
 * tied encoder on `device`, its parameters in `dtype` (f32, f16 or bf16), tokenizing to
 * max_length tokens (at most its positions: GC_ERR_FORMAT otherwise; 0 for the max_seq_length
 * of its sentence_bert_config.json, else 128, or its positions if fewer; more than its
 * tokenizer's special tokens, or GC_ERR_CONFIG for a length asked for, GC_ERR_FORMAT for the
 * folder's own), with the "query" and "document" prompts of its sentence-transformers
 * configuration (gc_pretrained_prompt) before the texts of each side. Nothing is left
 * allocated on failure. */
gc_status gc_dual_encoder_from_folder(gc_dual_encoder *model, const char *dir, int64_t max_length, gc_dtype dtype,
                                      gc_device device);
/* A model folder (one holding config.json: as above, in f32), or a run folder or model file
 * of a preset's model (its own length; max_length is ignored). A model file is trusted only
 * as far as it is checked: every size of its description in range, its tensor data at least
 * as large as the model it describes (before anything is allocated), then every parameter of
 * its name, shape and dtype, and no other tensor. */
gc_status gc_dual_encoder_load(const char *path, int64_t max_length, gc_device device, gc_dual_encoder *model);
/* Writes the model into folder `dir` (created if missing): dir/model.safetensors, the
 * parameters and their description; for a pretrained model, under its family's Hugging Face
 * names next to copies of its folder's files (gc_pretrained_copy_files), so that `dir` is a
 * model folder again, one that transformers loads. A shards' index in `dir` (a model saved
 * over the sharded folder it came from) is removed: model.safetensors holds the weights now.
 * Every file is written atomically (gradcache/files.h). */
gc_status gc_dual_encoder_save(const gc_dual_encoder *model, const char *dir);
gc_text_encoder *gc_dual_encoder_tower(gc_dual_encoder *model, int side); /* 0 query, 1 passage */
/* The PEFT LoRA adapter folder `dir` over the model's one (tied) encoder (gc_lora_load): what
 * gc_lora_load returns, or GC_ERR_CONFIG for a model of two towers. The model, adapters and
 * all, is the caller's to free either way. */
gc_status gc_dual_encoder_add_adapter(gc_dual_encoder *model, const char *dir);
/* Whether `path` is a folder that a train --lora-r run wrote (OUT, or OUT/best): an adapter/
 * folder with its adapter_config.json, and no config.json of a model folder. */
bool gc_is_lora_run(const char *path);
/* Such a run folder's model: the base model folder its adapter names (base_model_name_or_path,
 * --init's path as the run was given it) read as gc_dual_encoder_from_folder reads it, and the
 * adapters over it. A base that is not there, or not a model folder, is GC_ERR_IO naming both
 * folders; an adapter that does not fit that base GC_ERR_FORMAT; otherwise what
 * gc_dual_encoder_from_folder and gc_dual_encoder_add_adapter return. Nothing is left
 * allocated on failure. */
gc_status gc_dual_encoder_from_lora_run(gc_dual_encoder *model, const char *run, int64_t max_length, gc_dtype dtype,
                                        gc_device device);
/* GC_ERR_CONFIG naming the folder's file when a side's prompt takes all of max_length tokens:
 * every text of that side would be cut away, its embeddings all alike. */
gc_status gc_dual_encoder_check_prompts(const gc_dual_encoder *model);
/* The same for one prompt, `what` ("DIR/config_sentence_transformers.json: the query prompt")
 * beginning the message. */
gc_status gc_dual_encoder_check_prompt(const gc_dual_encoder *model, const char *prompt, const char *what);
/* The prompt an encoding of texts alone (gradcache encode) writes before every text, as
 * sentence-transformers' encode(prompt=, prompt_name=) chooses it, into *prompt (a new string
 * to free(), or NULL for none): `text` when given; else the folder's prompt `name` when given
 * (GC_ERR_CONFIG when the folder has no prompt of that name, or the model is not a folder);
 * else the prompt its config_sentence_transformers.json's default_prompt_name names, if any.
 * Refused as gc_dual_encoder_check_prompt refuses when it leaves no room for text. At most
 * one of name and text. */
gc_status gc_dual_encoder_choose_prompt(const gc_dual_encoder *model, const char *name, const char *text,
                                        char **prompt);
/* texts[0..count) encoded as side `side` (0 query, 1 passage) is: its tower, its prompt, the
 * model's max_length (gc_encode_texts_prompted: eval mode, `batch` texts at a time); NULL
 * (error set) when memory runs out or gc_dual_encoder_check_prompts refuses. */
gc_tensor *gc_dual_encoder_encode(gc_dual_encoder *model, int side, const char *const *texts, int64_t count,
                                  int64_t batch);
void gc_dual_encoder_free(gc_dual_encoder *model);
/* GradCache's model function for a tower: chunk {ids, mask} -> representation (training mode). */
gc_tensor *gc_dual_encoder_forward_train(void *tower, const gc_batch *chunk);

/* ---- evaluation ----------------------------------------------------------------------------- */

/* Each query's positive ranked among every distinct candidate by cosine similarity. A
 * positive's rank is 1 + the number of other candidates scored at least as high: a tie counts
 * against the query, so a collapsed model (every score alike) ranks every positive last.
 * Recall@k is the fraction of queries whose positive ranks k or better, MRR the mean of
 * 1 / rank. */
typedef struct gc_retrieval_metrics {
    int64_t queries, candidates;
    double recall_at_1, recall_at_10, mrr;
} gc_retrieval_metrics;

/* queries [Nq, D], candidates [Nc, D] (f32, one device); positive[i] in [0, Nc) is query i's.
 * GC_OK; GC_ERR_FORMAT naming the first query or candidate row holding a nan or an infinity
 * (nothing is ranked then); or an allocation error. */
gc_status gc_retrieval_evaluate(const gc_tensor *queries, const gc_tensor *candidates, const int64_t *positive,
                                gc_retrieval_metrics *metrics);
/* The first `count` pairs: every query encoded as a query, every distinct positive as a
 * passage (gc_dual_encoder_encode, `batch` texts at a time), and ranked as above. */
gc_status gc_retrieval_evaluate_pairs(gc_dual_encoder *model, const gc_pairs *pairs, int64_t count, int64_t batch,
                                      gc_retrieval_metrics *metrics);
/* The same at each of n_dims prefixes of the embeddings (Matryoshka: the first dims[j] columns,
 * each in [1, D], 0 for all D), encoded once: metrics[j] is prefix j's. A prefix longer than the
 * embedding is GC_ERR_CONFIG naming it. */
gc_status gc_retrieval_evaluate_pairs_at(gc_dual_encoder *model, const gc_pairs *pairs, int64_t count, int64_t batch,
                                         const int64_t *dims, int n_dims, gc_retrieval_metrics *metrics);
/* The distinct texts among texts[0..count), in byte order, into *distinct (an array the caller
 * frees, pointing into texts); index[i] receives the position of texts[i] among them. Returns
 * how many there are. */
int64_t gc_distinct_texts(const char *const *texts, int64_t count, const char ***distinct, int64_t *index);

/* ---- BEIR datasets and trec_eval's measures ----------------------------------------------- */

/* A BEIR-format dataset (docs/DATA.md): DIR/corpus.jsonl, one object per line with "_id",
 * "text" and optionally "title"; DIR/queries.jsonl, "_id" and "text"; DIR/qrels/SPLIT.tsv, the
 * header `query-id<TAB>corpus-id<TAB>score` then one judgement per line, the score an integer
 * grade (0: judged not relevant). A passage is its title, a space and its text, then stripped
 * of ASCII whitespace at both ends, as BEIR's dense models join them (its text alone without a
 * title; an empty title counts as none); a query is its text, stripped the same way. Ids are
 * strings, non-empty and without whitespace (a TREC run file separates its
 * fields by whitespace). Other members of a line are ignored. Every problem (a line longer
 * than GC_BEIR_MAX_LINE, not a JSON object, a missing or mistyped member, a duplicate id, a
 * judgement naming an unknown id or judged twice, a grade that is no integer in
 * [0, GC_BEIR_MAX_GRADE]) is GC_ERR_FORMAT naming the file and the line; the files are read
 * a line at a time, so a stream that is none of these costs at most a line's bytes. */
#define GC_BEIR_MAX_LINE (1 << 20)
#define GC_BEIR_MAX_GRADE 1000000

/* The entries of corpus.jsonl or queries.jsonl, in the file's order. */
typedef struct gc_beir_texts {
    int64_t count;
    char **ids;      /* [count], NUL-terminated */
    char **texts;    /* [count]: a passage or a query, NUL-terminated */
    int64_t *by_id;  /* [count]: the entries' indices in the byte order of their ids */
} gc_beir_texts;

typedef struct gc_beir_qrel {
    int64_t query, doc; /* indices into the queries and the corpus */
    int64_t grade;      /* 0: not relevant; 1 and more: relevant, the gain of nDCG */
} gc_beir_qrel;

typedef struct gc_beir {
    gc_beir_texts corpus, queries;
    gc_beir_qrel *qrels; /* [qrel_count], sorted by query then doc */
    int64_t qrel_count;
} gc_beir;

/* DIR's corpus, queries and the judgements of qrels/SPLIT.tsv ("train", "dev", "test").
 * Nothing is kept on failure. */
gc_status gc_beir_read(const char *dir, const char *split, gc_beir *data);
/* One jsonl file from a stream (`name` in messages): corpus entries (a title allowed) or
 * queries. *texts is left empty on failure. */
gc_status gc_beir_texts_read_stream(FILE *in, const char *name, bool corpus, gc_beir_texts *texts);
/* The judgements of a qrels file from a stream, checked against data's corpus and queries,
 * into data->qrels. */
gc_status gc_beir_qrels_read_stream(FILE *in, const char *name, gc_beir *data);
/* The index of the entry whose id is `id`, or -1. */
int64_t gc_beir_find(const gc_beir_texts *texts, const char *id);
void gc_beir_texts_free(gc_beir_texts *texts);
void gc_beir_free(gc_beir *data);
/* Training pairs: (query, passage) for every judgement of grade 1 or more, in qrels order;
 * GC_ERR_FORMAT naming `name` when there is none. */
gc_status gc_beir_pairs(const gc_beir *data, const char *name, gc_pairs *pairs);
/* Whether `path` is a BEIR-format folder (one holding corpus.jsonl). */
bool gc_beir_is_folder(const char *path);
/* The pairs of a dataset argument (train's --data): of a BEIR-format folder, its qrels
 * `split`'s judgements of grade 1 or more (gc_beir_pairs); else of the pair file
 * gc_data_path(path, split) names. *name receives what was read (a new string, for messages;
 * set on failure too). */
gc_status gc_dataset_pairs_read(const char *path, const char *split, gc_pairs *pairs, char **name);

/* One retrieved document of a query's ranking, as a TREC run file gives it. */
typedef struct gc_trec_hit {
    const char *doc; /* its id */
    double score;
    int64_t grade;   /* the qrels' grade of (query, doc), or -1 when not judged */
} gc_trec_hit;

/* The measures, each as trec_eval 9.0.8+ computes it for one query (relevant: grade >= 1):
 *   ndcg_at_10     ndcg_cut.10: sum of grade / log2(rank + 1) over the first 10, divided by
 *                  the same sum over the query's grades in descending order (the ideal)
 *   recall_at_10,  recall.10, recall.100: relevant documents in the first k / relevant ones
 *   recall_at_100
 *   mrr_at_10      1 / the rank of the first relevant document if it is in the first 10,
 *                  else 0: trec_eval's recip_rank over the run cut at 10 (trec_eval's own has
 *                  no cut; BEIR's MRR@10, but in trec_eval's order and averaged as below)
 *   map_at_100     map_cut.100: sum over the relevant documents in the first 100 of the
 *                  precision at their rank, divided by the query's relevant documents
 * A query judged but with no relevant document scores 0 in all of them and counts in the
 * mean, as trec_eval does. */
typedef struct gc_trec_measures {
    double ndcg_at_10, recall_at_10, recall_at_100, mrr_at_10, map_at_100;
} gc_trec_measures;

/* Sorts hits[0..count) in trec_eval's order: score descending, a tie broken by document id
 * descending (strcmp), whatever order the run lists them in. */
void gc_trec_order(gc_trec_hit *hits, int64_t count);
/* One query's measures: its hits (sorted in place by gc_trec_order) and the grades of all its
 * judgements, grades[0..judged) (the ideal ranking's gains). */
gc_trec_measures gc_trec_query_measures(gc_trec_hit *hits, int64_t count, const int64_t *grades, int64_t judged);
/* trec_eval's "all": the mean over per_query[0..count) (zeros when count is 0). */
gc_trec_measures gc_trec_mean(const gc_trec_measures *per_query, int64_t count);

/* ---- exact search ----------------------------------------------------------------------------- */

/* The k best corpus rows of every query by cosine similarity, the corpus fed a block at a
 * time: host memory is the top-k lists and one [1024, block] score matrix, whatever the
 * corpus's size. Within a query, a tie is broken for the lower corpus index. */
typedef struct gc_top_k {
    int64_t queries;
    int64_t capacity;    /* the k asked for */
    int64_t seen;        /* corpus rows offered so far */
    int64_t k;           /* entries per list: the smaller of capacity and seen */
    int64_t *index;      /* [queries, capacity]: corpus rows */
    float *score;        /* [queries, capacity]: their cosine similarity */
} gc_top_k;

/* 1 <= capacity, else a programmer error; GC_ERR_OUT_OF_MEMORY when the lists do not fit. */
gc_status gc_top_k_init(gc_top_k *top, int64_t queries, int64_t capacity);
/* Scores queries [Nq, D] against the next corpus rows, block [Nb, D] (f32, one device; its
 * first row is corpus row top->seen), and keeps the best. GC_ERR_FORMAT naming the query and
 * corpus row of a score that is not finite (an embedding holding nan or inf), or an
 * allocation error; the lists are then unusable. */
gc_status gc_top_k_add(gc_top_k *top, const gc_tensor *queries, const gc_tensor *block);
/* Orders each query's list best first (the score descending, then the corpus index
 * ascending); call once, after the last block. */
void gc_top_k_finish(gc_top_k *top);
void gc_top_k_free(gc_top_k *top);

/* ---- BEIR evaluation -------------------------------------------------------------------------- */

typedef struct gc_beir_eval_options {
    int64_t k;              /* documents retrieved per query (100 for recall@100 and map@100) */
    int64_t batch;          /* texts encoded at a time */
    int64_t block;          /* corpus rows encoded and scored at a time */
    int64_t limit;          /* evaluate the first N judged queries only (0: all) */
    int64_t corpus_limit;   /* search a subset only: the first N documents of the corpus and the
                               documents judged for the evaluated queries (0: the whole corpus) */
    /* called after every corpus block with the rows done and the total, or NULL */
    void (*progress)(void *user, int64_t done, int64_t total);
    void *user;
} gc_beir_eval_options;

typedef struct gc_beir_result {
    gc_trec_measures mean;  /* over the evaluated queries */
    int64_t queries;        /* evaluated: the judged ones of the split (or the first `limit`) */
    int64_t *query_index;   /* [queries]: each one's index in data->queries, in file order */
    int64_t documents;      /* searched: the corpus, or the subset corpus_limit asks for */
    gc_top_k top;           /* [queries, k]: their rankings (corpus indices), in trec_eval's order */
} gc_beir_result;

/* Encodes the judged queries (the query tower) and the corpus or its subset (the passage
 * tower, a block at a time), ranks it for each query by exact search and computes the
 * measures. Nothing is left allocated on failure. */
gc_status gc_beir_evaluate(gc_dual_encoder *model, const gc_beir *data, const gc_beir_eval_options *options,
                           gc_beir_result *result);
/* The rankings as a TREC run file, `query-id Q0 doc-id rank score tag` a line, each query's
 * documents in trec_eval's order (rank from 1; scores "%.9g": the f32 exactly), written
 * whole (gradcache/files.h). GC_ERR_IO naming the file. */
gc_status gc_beir_run_save(const char *path, const gc_beir *data, const gc_beir_result *result, const char *tag);
void gc_beir_result_free(gc_beir_result *result);

/* ---- mining hard negatives (`gradcache mine`) ------------------------------------------------ */

/* sentence-transformers' mine_hard_negatives, its "n-tuple" output, by exact search. For each
 * distinct query (the positives of all its lines are its positives), the corpus rows are
 * ranked by cosine similarity (ties: the lower row first) and the first range_max +
 * (the most positives of any query) kept; from those its positives are removed, then every
 * candidate a filter refuses (relative to the query's lowest positive score p):
 *   margin           s + margin > p             (absolute: s <= p - margin is kept)
 *   relative_margin  s > p (1 - relative_margin)
 *   max_score        s > max_score
 * (NAN: the filter is off; the comparisons in double); the survivors keep their rank order, and
 * the window [range_min, range_max) of them is where negatives are taken from: the first
 * `negatives` (GC_MINE_TOP), or `negatives` of them drawn uniformly (GC_MINE_RANDOM: a partial
 * Fisher-Yates shuffle on the Philox words of gc_derive_seed(seed, query), query being its row:
 * reproducible, whatever the blocks), put back in rank order. A query whose window holds fewer
 * than `negatives` survivors gets none: its lines are dropped, as sentence-transformers drops
 * them. */
typedef enum gc_mine_sampling { GC_MINE_TOP, GC_MINE_RANDOM } gc_mine_sampling;

typedef struct gc_mine_options {
    int64_t negatives;        /* --num-negatives: per query, at least 1 */
    int64_t range_min;        /* --range-min: survivors skipped first */
    int64_t range_max;        /* --range-max: the window's end; 0: sentence-transformers' default,
                                 range_min + negatives (times 10 with a margin or max_score) +
                                 the most positives of any query */
    double margin, relative_margin, max_score; /* --margin, --relative-margin, --max-score; NAN: off */
    gc_mine_sampling sampling; /* --sampling */
    uint64_t seed;            /* --seed, for GC_MINE_RANDOM */
    int64_t batch;            /* texts encoded at a time */
    int64_t block;            /* corpus rows encoded and scored at a time */
    /* called after every corpus block with the rows done and the total, or NULL */
    void (*progress)(void *user, int64_t done, int64_t total);
    void *user;
} gc_mine_options;

/* negatives 3, range 0 and 0 (the default), no filter, top sampling, seed 0, batch 256,
 * block 8192. */
gc_mine_options gc_mine_options_default(void);
/* GC_ERR_CONFIG naming the flag of the first bad option: negatives < 1, range_min < 0, a
 * range_max (when given) leaving fewer than `negatives` ranks after range_min, an infinite
 * filter, batch or block < 1. */
gc_status gc_mine_options_check(const gc_mine_options *options);

/* The search and the choice on embeddings. Memory: the query embeddings twice (device and
 * host, [Nq, D]), the candidate lists [Nq, range_max + most positives] (row and score), and
 * per block its embeddings and one [1024, block] score matrix: bounded whatever the corpus. */
typedef struct gc_miner {
    gc_mine_options options;      /* range_max resolved */
    int64_t queries;              /* Nq */
    int64_t dim;                  /* D */
    const gc_tensor *query_embeddings; /* [Nq, D] (borrowed) */
    const int64_t *positive_start; /* [Nq + 1]: query q's positives are positive_rows[start[q]..start[q + 1]) */
    const int64_t *positive_rows;  /* corpus rows (borrowed) */
    float *query_host;            /* [Nq, D]: the query embeddings, for the positives' scores */
    double *positive_score;       /* [start[Nq]]: cosine of each (query, positive), nan until its row is seen */
    gc_top_k top;                 /* [Nq, range_max + most positives] */
    bool sorted;                  /* the lists put best first (gc_top_k_finish) */
} gc_miner;

/* queries [Nq, D] (f32; the miner borrows it, positive_start and positive_rows, which must
 * outlive it). GC_ERR_CONFIG for a bad option (gc_mine_options_check), else GC_OK or an
 * allocation error, nothing left allocated. */
gc_status gc_miner_init(gc_miner *miner, const gc_tensor *queries, const int64_t *positive_start,
                        const int64_t *positive_rows, const gc_mine_options *options);
/* The next corpus rows, block [Nb, D] (f32, the queries' device; its first row is corpus row
 * miner->top.seen). As gc_top_k_add's errors. */
gc_status gc_miner_add(gc_miner *miner, const gc_tensor *block);
/* After the last block: query q's negatives, corpus rows best first, into chosen[0..negatives);
 * returns how many (negatives, or 0 when the window holds too few). GC_ERR_FORMAT (returned
 * as -1, error set) when a positive's row was never offered. Sorts the lists on first call. */
int64_t gc_miner_choose(gc_miner *miner, int64_t q, int64_t *chosen);
void gc_miner_free(gc_miner *miner);

/* Mined pairs: what gc_mine_pairs found, to write with gc_mined_save. */
typedef struct gc_mined {
    int64_t negatives;   /* per line */
    int64_t lines;       /* input lines */
    int64_t kept;        /* of them, those whose query got its negatives */
    int64_t queries;     /* distinct queries */
    int64_t corpus;      /* distinct candidate texts */
    const char **texts;  /* [corpus]: the candidates (borrowed from the inputs), in byte order */
    int64_t *query_of;   /* [lines]: each line's distinct query */
    int64_t *chosen;     /* [queries, negatives]: corpus rows, or -1 for a query that got none */
} gc_mined;

/* Mines negatives for the first column pairs (query) and second (positive) of every line of
 * `pairs` (further columns are ignored) among the distinct texts of the positives and
 * extra[0..extra_count) (a BEIR corpus, or none): the queries encoded with the query tower,
 * the candidates with the passage tower `block` at a time. GC_OK, GC_ERR_CONFIG for a bad
 * option, or the failing encode's or search's status; nothing is left allocated on failure. */
gc_status gc_mine_pairs(gc_dual_encoder *model, const gc_pairs *pairs, const char *const *extra,
                        int64_t extra_count, const gc_mine_options *options, gc_mined *mined);
/* Writes the kept lines, `query<TAB>positive<TAB>negative_1...`, in the input's order, to `path`
 * whole (gradcache/files.h); a tab or line break inside a text becomes a space. A line longer
 * than GC_PAIRS_MAX_LINE is left out and counted in *too_long. GC_ERR_IO naming the file. */
gc_status gc_mined_save(const char *path, const gc_pairs *pairs, const gc_mined *mined, int64_t *too_long);
void gc_mined_free(gc_mined *mined);

/* ---- memory ------------------------------------------------------------------------------- */

/* The byte limit a run holds a device to: an explicit one when given; else GC_MEM_LIMIT's,
 * which the library applied at start; else, on the CPU, 2/3 of the memory available when the
 * run starts (Linux's MemAvailable), divided among the processes a launcher runs on this
 * machine. Without it a run too large for the machine grows until the kernel's OOM killer ends
 * it; with it the allocation is refused with GC_ERR_MEM_LIMIT. 2/3, not all: the allocator
 * rounds a block up by as much as a quarter and keeps freed blocks, and a process has memory
 * outside its tensors. A GPU gets no default: its driver refuses what it cannot serve. */
typedef struct gc_mem_limit {
    size_t bytes;     /* 0: none */
    char source[160]; /* where it comes from, for people: "--mem-limit", "GC_MEM_LIMIT", "the default, ..." */
} gc_mem_limit;

/* Applies `bytes` (0: none given) to `device`, and the CPU's default where nothing set a
 * limit; `sharers`: the processes of the run on this machine (1 when not launched). Returns
 * the device's limit. */
gc_mem_limit gc_mem_limit_apply(gc_device device, size_t bytes, int sharers);
/* "15.1 GiB on cpu (the default, 2/3 of the 22.7 GiB available; --mem-limit to change)" or
 * "none on cuda:0", into buf; returns buf. */
const char *gc_mem_limit_describe(const gc_mem_limit *limit, gc_device device, char *buf, size_t size);
/* What a failure line ends with: " (the limit: SOURCE)" for GC_ERR_MEM_LIMIT, else "". */
const char *gc_mem_limit_hint(const gc_mem_limit *limit, gc_status status, char *buf, size_t size);

/* The largest unit 1024^k (k <= 4) not above `bytes`, and its name ("B", "KiB", ...). */
double gc_byte_unit(double bytes, const char **name);
/* "1.59 MiB" into buf (3 significant digits); returns buf. */
const char *gc_format_bytes(double bytes, char *buf, int size);

/* ---- the trainer ---------------------------------------------------------------------------- */

/* One step, as the run's log (DIR/log.jsonl) records it. */
typedef struct gc_step_record {
    int64_t step, epoch;           /* step from 1, epoch from 0 */
    double loss, lr;               /* the step's loss, and the learning rate it used */
    double grad_norm;              /* the gradients' total 2-norm before clipping (nan: skipped) */
    double examples_per_second, seconds;
    size_t peak_bytes;             /* the step's peak of live bytes on the device */
    size_t packed_bytes;           /* the weights' packed panels at their highest in the step
                                      (gc_memory_stats: outside peak_bytes, under the limit) */
    int64_t chunk_sizes[2];        /* rows per chunk, query and passage side (plain: the batch) */
    double loss_scale;             /* the scale the step's gradients carried (1 without loss scaling) */
    bool skipped;                  /* an inf or nan gradient: no update, and the scale halved */
    const char *global_loss;       /* how the loss saw the global batch: "gather" or "ring" across
                                      processes, "local" in one (a static string) */
    /* several datasets (--data a,b): the step's dataset, its index in the list and its element
     * as given; at a logging point (every log_every steps, and the run's last), [datasets]
     * each dataset's mean loss over its steps since the previous one (nan: none; valid until
     * the next step), else NULL */
    int dataset, datasets;
    const char *dataset_name;
    const double *dataset_losses;
} gc_step_record;

/* The measures an evaluation during a run reports: of a pair set "recall@1", "recall@10", "mrr"
 * (gc_retrieval_metrics); of a BEIR-format folder "ndcg@10", "recall@10", "recall@100",
 * "mrr@10", "map@100" (gc_trec_measures). */
#define GC_EVAL_MAX_MEASURES 5
extern const char *const gc_eval_measure_names[]; /* all of them, NULL-terminated */

/* One evaluation, as the run's log records it ({"eval":{...}}). */
typedef struct gc_eval_record {
    int64_t step;                                /* the step evaluated after */
    int count;                                   /* measures */
    const char *names[GC_EVAL_MAX_MEASURES];     /* static strings */
    double values[GC_EVAL_MAX_MEASURES];
    int metric;                                  /* the index of the one that decides the best */
    int64_t queries;                             /* evaluated */
    bool best;                                   /* better than every earlier one: written to OUT/best/ */
    int64_t best_step;                           /* the best so far (this one when best) */
    double best_value;
    int64_t since_best;                          /* evaluations since the best without improvement */
    bool stopped;                                /* --early-stop: the last evaluation of the run */
    double seconds;
} gc_eval_record;

/* A run: a dual encoder trained on query/positive pairs with the in-batch contrastive loss
 * (cosine similarity / temperature, every other passage of the batch a negative), each step a
 * Gradient Cache step or a plain full-batch one, then the gradients clipped to a total norm of
 * 1 and AdamW (weight decay 0.01, none on biases and norms). Every random choice (the initial
 * weights, the dropout masks, each epoch's data order) comes from counter-based streams named
 * by `seed`, which the checkpoint keeps the positions of: that is what makes a resumed run
 * continue bit for bit. The settings that decide what a run computes are kept in its
 * checkpoint as "flag.<name>" under the gradcache program's flag names (--batch-size for
 * batch_size), and errors name them so too. gc_trainer_config_default() gives the program's
 * defaults; `data` and `out` have none. */
typedef struct gc_trainer_config {
    const char *data;           /* --data: a pair file, a folder holding train.tsv, or a BEIR-format
                                   folder (its qrels/train.tsv: gc_dataset_pairs_read); or several,
                                   separated by commas, each step's batch from one of them */
    gc_sampling sampling;       /* --sampling: with several datasets, which one each step takes
                                   (gc_multi_sampler) */
    const char *out;            /* --out: the run folder */
    const char *init;           /* --init: a pretrained model folder to fine-tune (one encoder), or NULL */
    int model_size;             /* --model-size without init: an index into gc_model_size_names */
    int64_t max_length;         /* --max-length: tokens per text */
    gc_dtype dtype;             /* --precision: f32; f16 or bf16 with f32 master weights (f16: loss scaling) */
    bool tied;                  /* --tied: one encoder for queries and passages */
    int64_t batch_size;         /* --batch-size: examples per step, over every process */
    bool gc;                    /* --gc: Gradient Cache steps; else plain full-batch steps */
    int64_t accumulate;         /* --accumulate: K steps' gradients (K batches of batch_size) summed
                                   before one update, one reduction across processes; 0 or 1: none */
    int64_t chunk_sizes[2];     /* --gc-chunk-size: rows per chunk, queries and passages */
    int64_t chunk_tokens;       /* --gc-chunk-tokens: also at most this many real tokens per chunk, each
                                   chunk cut to its longest text (gc_split_by_tokens); 0: no budget */
    bool sort_lengths;          /* --gc-sort-lengths: each side's rows chunked longest text first
                                   (gc_cache_config.sort_by), each chunk cut to its longest text */
    bool checkpoint_layers;     /* --checkpoint-layers: each encoder layer keeps only its input for
                                   backward and runs again there (gc_text_encoder.checkpoint_layers):
                                   less memory per chunk, the same gradients bit for bit, a slower step */
    gc_contrastive_method loss; /* --loss: with gc, how the loss's gradient is computed */
    gc_global_loss global_loss; /* --loss: across processes, the gathered loss or the ring's
                                   (gc_cache_config.global_loss; AUTO: the ring when the gathered
                                   representations and their gradients would take more than a
                                   quarter of the memory limit; with a guide, the gathered loss);
                                   RING needs gc and no FULL loss, and a plain step gathers */
    int64_t steps, epochs;      /* --steps, else --epochs (0: one) */
    double lr;                  /* --lr: the peak rate (warm-up over 10% of the steps, then down to 0) */
    double temperature;         /* --temperature */
    int64_t hard_negatives;     /* --hard-negatives: the first N negative columns of every example */
    int64_t positives;          /* --positives: the first k columns after the query are its positives
                                   (several-positive loss, gradcache/loss.h); 0 or 1: one */
    bool no_duplicates;         /* --no-duplicates: no two examples of a batch share a positive text
                                   (gc_batch_sampler_distinct) */
    int matryoshka_count;       /* --matryoshka: nested prefixes of the embedding the loss is summed
                                   over (gradcache/loss.h); 0: none */
    int64_t matryoshka_dims[GC_MATRYOSHKA_MAX_DIMS];   /* their lengths, each at most the embedding's */
    double matryoshka_weights[GC_MATRYOSHKA_MAX_DIMS]; /* their weights (the program gives 1 each) */
    const char *guide;          /* --guide: a model folder (or run) whose frozen embeddings of each
                                   batch mask the false negatives out of the loss (the GIST loss,
                                   gradcache/loss.h; its own tokenizer, in f32; gathered or around
                                   the ring, as global_loss says); NULL: none */
    double guide_margin;        /* --guide-margin (finite) */
    gc_gist_margin guide_margin_strategy; /* --guide-margin-strategy */
    const char *teacher_scores; /* --teacher-scores: a teacher's scores of every example's positive and
                                   negatives (gc_teacher_scores_read), distilled by `distill`; NULL: none */
    gc_distill_kind distill;    /* --distill: MarginMSE or the listwise KL (gradcache/loss.h), over the
                                   positive and the first hard_negatives negatives (>= 1) */
    double distill_weight;      /* --distill-weight: 0, the distillation loss alone; w > 0, the in-batch
                                   contrastive loss + w times it */
    double distill_temperatures[2]; /* --student-temperature, --teacher-temperature: the KL's (> 0) */
    /* --lora-r R (0: none): LoRA adapters (gc_lora_attach_targets) of rank R on the Linears
     * lora_targets names, over init's frozen model: only the adapters learn, have optimizer state,
     * are reduced, sharded and checkpointed; the run writes PEFT's OUT/adapter/ instead of a model
     * (gc_lora_save). Needs init and lora_targets. */
    int64_t lora_r;
    double lora_alpha;          /* --lora-alpha: the update's scale is alpha / r (> 0; default 8, PEFT's) */
    double lora_dropout;        /* --lora-dropout: on each adapter's input, in [0, 1) */
    const char *lora_targets;   /* --lora-targets: comma-separated module names ("query,value") */
    int64_t seed;               /* --seed */
    gc_device device;           /* --device: a launched run on CUDA takes cuda:LOCAL_RANK */
    size_t mem_limit;           /* --mem-limit: bytes on the device; 0: gc_mem_limit_apply's default */
    bool reduce_half;           /* --reduce-half: data-parallel 16-bit gradients averaged in their dtype */
    /* --zero: data-parallel, what is sharded over the processes (gradcache/zero.h): nothing,
     * AdamW's state (GC_ZERO_1), the gradients too, reduced once per step (GC_ZERO_2) or after
     * every chunk's backward (GC_ZERO_2_EVERY_BACKWARD). Not a setting of the checkpoint: the
     * stages compute the same numbers (to the rounding of the clipping norm's sum, and of the
     * order of additions at 2b), and a checkpoint resumes at any stage. A world of one has
     * nothing to shard and ignores it. */
    gc_zero zero;
    int64_t save_every;         /* --save-every: steps between checkpoints (0: only at the stop step) */
    double checkpoint_minutes;  /* --checkpoint-minutes: also a checkpoint after the first step that ends
                                   this many minutes of wall time after the start or the last
                                   checkpoint, the same step on every process (0: by steps only) */
    int64_t log_every;          /* --log-every: with several datasets, steps between the log lines that
                                   carry each dataset's mean loss (0: only the last step's) */
    /* --eval-every N: every N steps and at the run's last step, the model evaluated on eval_data
     * (eval mode, no graph, every process alike; neither the weights nor the random streams are
     * touched), a line in the log, and the best model so far written to OUT/best/ (0: never). */
    int64_t eval_every;
    const char *eval_data;      /* --eval-data: a pair file or a folder holding dev.tsv (Recall@1,
                                   Recall@10, MRR), or a BEIR-format folder (its qrels/dev.tsv if there,
                                   else test.tsv: trec_eval's measures, gc_beir_evaluate) */
    const char *eval_metric;    /* --eval-metric: the measure that decides the best (gc_eval_measure_names;
                                   NULL: ndcg@10 for a BEIR folder, mrr for pairs) */
    int64_t eval_limit;         /* --eval-limit: the first Q pairs (judged queries) only (0: all) */
    int64_t early_stop;         /* --early-stop K: stop after K evaluations in a row without improvement,
                                   a checkpoint written as at any stop (0: never) */
    int64_t stop_after;         /* --stop-after: the last step gc_trainer_run takes, as if interrupted (0: all) */
    /* called after every step's log line, on every process (process 0 writes the log), or NULL */
    void (*on_step)(void *user, const gc_step_record *record);
    /* called after every evaluation's log line, on every process, or NULL (the same user) */
    void (*on_eval)(void *user, const gc_eval_record *record);
    void *user;
} gc_trainer_config;

gc_trainer_config gc_trainer_config_default(void);

typedef struct gc_trainer gc_trainer;

/* A fresh run: applies the device's memory limit (gc_mem_limit_apply, which stays), reads the
 * data, builds the model (from `seed`, or from init's folder), AdamW and the GradCache step,
 * seeds the default generators, and (process 0) creates the run folder, removes the
 * temporaries a killed run's saves left there and starts log.jsonl anew. The config's strings
 * are read before it returns.
 * Under a launcher (torchrun's variables, Open MPI's, PMI's or a Slurm step's:
 * gc_dist_env_read) the run is data-parallel: the batch split over the processes, the loss
 * over all of it, one gradient reduction per step (per chunk at GC_ZERO_2_EVERY_BACKWARD),
 * process 0 alone writing. GC_ERR_CONFIG when a setting cannot work (more hard negatives than
 * the data has, a batch larger than the data or smaller than the processes, a dtype the device
 * lacks, a malformed launcher environment); else the status of what failed, its message
 * naming the file or the setting. On failure *trainer is NULL and nothing is left allocated. */
gc_status gc_trainer_new(const gc_trainer_config *config, gc_trainer **trainer);
/* The run in config->out continued from its checkpoint, bit for bit as if it had not stopped
 * (same device, as many processes; any --zero stage): as gc_trainer_new, and the checkpoint
 * is trusted only as far as it is checked: written with these settings, describing the model
 * these settings build, every counter and generator where such a run could have left it, no entry
 * such a run would not write. The log keeps the checkpoint's steps. With another number of
 * processes it resumes too, not bitwise: each step takes the same global batch (a function of
 * the seed and the step), split otherwise over the processes, whose dropout streams continue
 * where the checkpoint left them (a process it has no stream of starts its own past every
 * offset it holds), and the sums add in another order. */
gc_status gc_trainer_resume(const gc_trainer_config *config, gc_trainer **trainer);
/* One step (every process calls it): the batch, the gradients, clipping and the update (f16:
 * skipped when a gradient of any process overflowed), the log line, on_step, then the
 * checkpoint and the model when save_every, checkpoint_minutes or the stop step say so. A failure names the step
 * and what failed ("step 3: saving: ..."; GC_ERR_MEM_LIMIT with where the limit came from);
 * the checkpoint last written is intact. A loss or gradient norm that is not finite stops the
 * run (GC_ERR_FORMAT) before the update spreads it. GC_ERR_CONFIG past the run's last step, and
 * after --early-stop stopped it. */
gc_status gc_trainer_step(gc_trainer *trainer, gc_step_record *record);
/* Steps to the stop step (stop_after, or the last). */
gc_status gc_trainer_run(gc_trainer *trainer);
/* Writes the checkpoint and the model now (every process takes part; process 0 writes). */
gc_status gc_trainer_save(gc_trainer *trainer);
void gc_trainer_free(gc_trainer *trainer);

/* Where a run is; the pointers stay valid until gc_trainer_free. */
typedef struct gc_trainer_info {
    int rank, world;          /* this process in a data-parallel run (0 and 1 when not launched) */
    const char *launcher;     /* whose environment said so (gc_dist_launcher_name) */
    int64_t step;             /* steps done (a resumed run starts at its checkpoint's) */
    int64_t stop_step;        /* where gc_trainer_run stops */
    int64_t total_steps;      /* the run's length, which the learning rate's schedule spans */
    int64_t examples_per_epoch, steps_per_epoch; /* the pairs of all the datasets; the updates an epoch takes */
    int64_t chunk_sizes[2];   /* rows per chunk, query and passage side (0: no Gradient Cache) */
    gc_device device;         /* where it trains */
    gc_mem_limit limit;       /* the device's memory limit, and where it came from */
    const char *checkpoint_path, *model_path;
    const gc_dual_encoder *model;
    /* --eval-every: the best evaluation so far (best_step 0: none yet) by the measure named
     * eval_metric (NULL without evaluation), and the step an --early-stop stopped at (0: none) */
    const char *eval_metric;
    int64_t best_step;
    double best_value;
    int64_t early_stopped;
} gc_trainer_info;

gc_trainer_info gc_trainer_get_info(const gc_trainer *trainer);

/* ---- embedding a corpus (`gradcache encode`) ------------------------------------------------ */

/* The longest line of a text file read as one text. */
#define GC_TEXT_LINE_MAX (1 << 20)

/* Texts, one per line of a file: a line's '\n' (and the '\r' before it) dropped, an empty line
 * an empty text. */
typedef struct gc_text_lines {
    char **texts; /* [count], each NUL-terminated */
    int64_t count;
} gc_text_lines;

/* Every line of the file at `path` ("-": standard input). GC_ERR_IO naming the file when it
 * cannot be read; GC_ERR_FORMAT naming the file and the line when a line is longer than
 * GC_TEXT_LINE_MAX bytes (the rest of it is not read) or holds a NUL byte. */
gc_status gc_text_lines_read(const char *path, gc_text_lines *lines);
/* The same from a stream (`name` stands for it in messages). */
gc_status gc_text_lines_read_stream(FILE *in, const char *name, gc_text_lines *lines);
void gc_text_lines_free(gc_text_lines *lines);

typedef enum gc_embeddings_format {
    GC_EMBEDDINGS_SAFETENSORS, /* one tensor "embeddings" [N, D], with the data checksum */
    GC_EMBEDDINGS_TSV          /* a line per text, D values separated by tabs ("%.9g": f32 exactly) */
} gc_embeddings_format;

/* Writes embeddings [N, D] (floating) to `path` whole (a temporary renamed into place; a TSV
 * may go to "-", standard output). GC_OK, or GC_ERR_IO naming the file. */
gc_status gc_embeddings_save(const char *path, const gc_tensor *embeddings, gc_embeddings_format format);

#ifdef __cplusplus
}
#endif
#endif
