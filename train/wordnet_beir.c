/* WordNet's pairs as a BEIR-format folder (see gradcache/train.h): the pair texts of both
 * sides read back with the pair parser, then saved as judged pairs (gc_beir_save_judged):
 * definitions are the queries, words the documents. */
#include <stdlib.h>

#include "gradcache/train.h"

gc_status gc_wordnet_beir_save(const char *folder, const gc_wordnet_split *split, double held_out, uint64_t seed,
                               gc_beir_counts *counts) {
    *counts = (gc_beir_counts){0};
    gc_pairs sides[2] = {{0}, {0}};
    const gc_wordnet_side *from[2] = {&split->train, &split->dev};
    gc_status status = GC_OK;
    for (int s = 0; s < 2 && status == GC_OK; s++)
        if (from[s]->size) status = gc_pairs_parse(from[s]->text, from[s]->size, "wordnet", &sides[s]);
    int64_t n = sides[0].count + sides[1].count;
    const char **definitions = malloc((size_t)(n + 1) * sizeof *definitions);
    const char **words = malloc((size_t)(n + 1) * sizeof *words);
    if (!definitions || !words) gc_fatal("wordnet_beir: out of host memory for %lld pairs", (long long)n);
    int64_t i = 0;
    for (int s = 0; s < 2; s++)
        for (int64_t e = 0; e < sides[s].count; e++, i++) {
            definitions[i] = gc_pairs_text(&sides[s], e, 0);
            words[i] = gc_pairs_text(&sides[s], e, 1);
        }
    if (status == GC_OK) status = gc_beir_save_judged(folder, definitions, words, n, held_out, seed, counts);
    free(definitions);
    free(words);
    gc_pairs_free(&sides[0]);
    gc_pairs_free(&sides[1]);
    return status;
}
