/* gradcache data wordnet: WordNet -> train.tsv and dev.tsv (the library's
 * gc_wordnet_split_build and gc_wordnet_split_save, which renames the files into place only
 * when both are complete, so a failure leaves nothing half-written behind);
 * gradcache data manpages: manual pages -> a BEIR-format folder (gc_manpages_read,
 * gc_beir_save_judged);
 * gradcache data check FILE: validates a pair file and prints its counts. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "flags.h"
#include "gradcache/train.h"

static const char wordnet_summary[] =
    "Builds a definition -> word pair dataset from WordNet 3.0 (Debian's wordnet-base).\n"
    "Writes OUT/train.tsv and OUT/dev.tsv, pair files of one `definition<TAB>word` line per\n"
    "(synset, word): the definition is the gloss up to its first ';' (examples dropped), the\n"
    "word has '_' replaced by ' '. The split is held out by synset: a hash of the definition\n"
    "(and --seed) decides, so all words of a synset, and all synsets sharing a definition, land\n"
    "on the same side. Entries that would not be valid pair lines are skipped. See docs/DATA.md.\n"
    "With --beir, OUT is a BEIR-format folder instead: corpus.jsonl (the distinct words),\n"
    "queries.jsonl (the distinct definitions) and qrels/{train,dev,test}.tsv, test holding the\n"
    "definitions dev.tsv would, dev the next --held-out of them by the same hash.";

static const char manpages_summary[] =
    "Builds a BEIR-format retrieval set from the manual pages of a folder such as /usr/share/man\n"
    "(Debian's manpages and manpages-dev packages: sections 2 and 3, plus whatever the machine has):\n"
    "each page's NAME line gives a query (what follows 'name - ') and its DESCRIPTION section a\n"
    "passage (its first --max-words words). The man1 ... man9 folders are read, plain or\n"
    "gzip-compressed; redirects (.so), pages without either section and pages that are not UTF-8\n"
    "are skipped and counted. Writes OUT/corpus.jsonl, queries.jsonl and qrels/{train,dev,test}.tsv:\n"
    "test holds about --held-out of the queries, dev as many more, by a hash of the query (and\n"
    "--seed). See docs/DATA.md.";

static const char check_usage[] =
    "usage: gradcache data check FILE\n"
    "Validates the pair file FILE (one `query<TAB>positive[<TAB>negative...]` line per example,\n"
    "UTF-8, the same number of negatives on every line; see docs/DATA.md) and prints its counts.\n"
    "A problem is reported as FILE:LINE: what is wrong, with exit status 1.\n";

static const char data_usage[] =
    "usage: gradcache data <wordnet|manpages|check> ...\n"
    "  data wordnet [flags]   build train.tsv and dev.tsv from WordNet (--help for its flags)\n"
    "  data manpages [flags]  build a BEIR-format set from manual pages (--help for its flags)\n"
    "  data check FILE        validate a pair file and print its counts\n";

static void print_beir_counts(const char *out, const gc_beir_counts *counts, const char *documents,
                              const char *queries) {
    printf("%s: %lld documents (%s), %lld queries (%s); qrels: train %lld, dev %lld, test %lld\n", out,
           (long long)counts->documents, documents, (long long)counts->queries, queries, (long long)counts->qrels[0],
           (long long)counts->qrels[1], (long long)counts->qrels[2]);
}

static int data_wordnet(int argc, char **argv) {
    const char *out = "data", *folder = "/usr/share/wordnet";
    double held_out = 0.05;
    int64_t seed = 0;
    bool beir = false;
    cli_flag flags[] = {
        {"out", CLI_FLAG_STRING, &out, 0, 0, NULL, "folder for train.tsv and dev.tsv (created if missing)"},
        {"wordnet", CLI_FLAG_STRING, &folder, 0, 0, NULL, "folder of WordNet's data.noun, .verb, .adj, .adv"},
        {"held-out", CLI_FLAG_DOUBLE, &held_out, 0.001, 0.5, NULL, "fraction of the definitions put in dev.tsv"},
        {"seed", CLI_FLAG_INT, &seed, 0, 4294967295.0, NULL, "another seed holds out other definitions"},
        {"beir", CLI_FLAG_BOOL, &beir, 0, 0, NULL,
         "write a BEIR-format folder (corpus.jsonl, queries.jsonl, qrels/) instead of pair files"},
    };
    int parsed = cli_flags_parse("data wordnet", wordnet_summary, flags, sizeof flags / sizeof *flags, argc, argv, 3);
    if (parsed) return parsed == 1 ? 0 : parsed;

    gc_wordnet_split split;
    gc_status status = gc_wordnet_split_build(folder, held_out, (uint64_t)seed, &split);
    if (status == GC_OK && (split.train.pairs == 0 || split.dev.pairs == 0)) {
        gc_set_error(GC_ERR_FORMAT, "%s: no pairs for %s (%lld kept, %lld skipped); try another --held-out", folder,
                     split.train.pairs == 0 ? "train.tsv" : "dev.tsv",
                     (long long)(split.train.pairs + split.dev.pairs), (long long)split.skipped);
        status = GC_ERR_FORMAT;
    }
    gc_beir_counts counts;
    if (status == GC_OK)
        status = beir ? gc_wordnet_beir_save(out, &split, held_out, (uint64_t)seed, &counts)
                      : gc_wordnet_split_save(out, &split);
    if (status != GC_OK) {
        fprintf(stderr, "gradcache data wordnet: %s\n", gc_last_error());
        gc_wordnet_split_free(&split);
        return 1;
    }
    if (beir) {
        print_beir_counts(out, &counts, "words", "definitions");
        gc_wordnet_split_free(&split);
        return 0;
    }
    printf("%s/train.tsv: %lld pairs from %lld synsets\n", out, (long long)split.train.pairs,
           (long long)split.train.synsets);
    printf("%s/dev.tsv: %lld pairs from %lld synsets\n", out, (long long)split.dev.pairs, (long long)split.dev.synsets);
    printf("skipped %lld entries that would not be valid pair lines\n", (long long)split.skipped);
    gc_wordnet_split_free(&split);
    return 0;
}

static int data_manpages(int argc, char **argv) {
    const char *out = "data-manpages", *folder = "/usr/share/man";
    double held_out = 0.1;
    int64_t seed = 0, max_words = 200;
    cli_flag flags[] = {
        {"out", CLI_FLAG_STRING, &out, 0, 0, NULL, "the BEIR-format folder to write (created if missing)"},
        {"man", CLI_FLAG_STRING, &folder, 0, 0, NULL, "the manual folder, holding man1 ... man9"},
        {"max-words", CLI_FLAG_INT, &max_words, GC_MANPAGE_MIN_WORDS, 100000, NULL,
         "words of a DESCRIPTION section kept as the passage"},
        {"held-out", CLI_FLAG_DOUBLE, &held_out, 0.001, 0.33, NULL, "fraction of the queries in test (as many in dev)"},
        {"seed", CLI_FLAG_INT, &seed, 0, 4294967295.0, NULL, "another seed holds out other queries"},
    };
    int parsed = cli_flags_parse("data manpages", manpages_summary, flags, sizeof flags / sizeof *flags, argc, argv, 3);
    if (parsed) return parsed == 1 ? 0 : parsed;
    gc_manpages pages;
    gc_beir_counts counts;
    gc_status status = gc_manpages_read(folder, (int)max_words, &pages);
    if (status == GC_OK)
        status = gc_beir_save_judged(out, (const char *const *)pages.queries, (const char *const *)pages.passages,
                                     pages.count, held_out, (uint64_t)seed, &counts);
    if (status != GC_OK) {
        fprintf(stderr, "gradcache data manpages: %s\n", gc_last_error());
        gc_manpages_free(&pages);
        return 1;
    }
    printf("%s: %lld pages read, %lld files skipped\n", folder, (long long)pages.count, (long long)pages.skipped);
    print_beir_counts(out, &counts, "descriptions", "NAME lines");
    gc_manpages_free(&pages);
    return 0;
}

static int data_check(int argc, char **argv) {
    if (argc > 3 && (strcmp(argv[3], "--help") == 0 || strcmp(argv[3], "-h") == 0)) {
        fputs(check_usage, stdout);
        return 0;
    }
    if (argc != 4 || strncmp(argv[3], "-", 1) == 0) {
        fprintf(stderr, "gradcache data check: %s (usage: gradcache data check FILE)\n",
                argc < 4 ? "missing FILE" : argc > 4 ? "one FILE only" : "FILE cannot start with '-'");
        return 2;
    }
    gc_pairs pairs;
    if (gc_pairs_read(argv[3], &pairs) != GC_OK) {
        fprintf(stderr, "gradcache data check: %s\n", gc_last_error());
        return 1;
    }
    size_t longest = 0;
    for (int64_t i = 0; i < pairs.count * (2 + pairs.negatives); i++) {
        size_t length = strlen(pairs.texts[i]);
        if (length > longest) longest = length;
    }
    printf("%s: %lld examples, %d hard negatives each, longest text %zu bytes\n", argv[3], (long long)pairs.count,
           pairs.negatives, longest);
    gc_pairs_free(&pairs);
    return 0;
}

int cli_command_data(int argc, char **argv) {
    const char *what = argc > 2 ? argv[2] : "";
    if (strcmp(what, "wordnet") == 0) return data_wordnet(argc, argv);
    if (strcmp(what, "manpages") == 0) return data_manpages(argc, argv);
    if (strcmp(what, "check") == 0) return data_check(argc, argv);
    if (strcmp(what, "--help") == 0 || strcmp(what, "-h") == 0) {
        fputs(data_usage, stdout);
        return 0;
    }
    if (*what)
        fprintf(stderr, "gradcache data: unknown subcommand '%s' (wordnet, manpages or check)\n", what);
    else
        fprintf(stderr, "gradcache data: missing subcommand (wordnet, manpages or check)\n");
    return 2;
}
