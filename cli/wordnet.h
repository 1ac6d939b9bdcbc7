/* A definition -> word pair dataset from WordNet 3.0's data files (data.noun, data.verb,
 * data.adj, data.adv, as Debian's wordnet-base installs them in /usr/share/wordnet).
 *
 * Every (synset, word) gives one pair line `definition<TAB>word`: the definition is the
 * synset's gloss up to its first ';' (the examples that follow are dropped, as is an
 * example introduced by ': "'), tabs and line breaks turned into spaces, trimmed; the word
 * has its '_' turned into spaces and an adjective's syntactic marker ("(p)", "(a)",
 * "(ip)") removed. An entry whose line would not be a valid pair line (empty definition,
 * longer than GC_PAIRS_MAX_LINE, invalid UTF-8) is skipped and counted.
 *
 * The split is held out by synset, and more: a hash of the definition text (mixed with a
 * seed) sends a synset to dev, so all the words of a synset, and all the synsets that
 * share one definition (WordNet has about a thousand such definitions, "a swimming stroke"
 * among them), land on the same side. No dev query is ever seen in training. */
#ifndef GC_CLI_WORDNET_H
#define GC_CLI_WORDNET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradcache/error.h"

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

/* Reads the four data files of `folder` and splits them, about `held_out` of the
 * definitions going to dev. GC_ERR_IO names a missing or unreadable file; GC_ERR_FORMAT
 * names the file and line of a line that is not a WordNet synset. Nothing is kept on failure. */
gc_status gc_wordnet_split_build(const char *folder, double held_out, uint64_t seed, gc_wordnet_split *split);
/* The longest data line read (WordNet 3.0's longest has 12,972 bytes): a longer line, or a
 * NUL byte, is GC_ERR_FORMAT naming the line, read no further than the limit. */
#define GC_WORDNET_MAX_LINE 65536
#define GC_WORDNET_MAX_LINE_TEXT "65536"
/* One data file's lines from `in` (`name` in messages) added to *split, which must be freed
 * by the caller on failure too; for gc_wordnet_split_build and the fuzzer. */
gc_status gc_wordnet_read_stream(FILE *in, const char *name, double held_out, uint64_t seed,
                                 gc_wordnet_split *split);
void gc_wordnet_split_free(gc_wordnet_split *split);

#endif
