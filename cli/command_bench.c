/* gradcache bench memory|speed: the benchmarks, which need no dataset (bench_commands.h). */
#include <stdio.h>
#include <string.h>

#include "bench_commands.h"
#include "commands.h"

int gc_command_bench(int argc, char **argv) {
    const char *which = argc >= 3 ? argv[2] : NULL;
    if (which && strcmp(which, "memory") == 0) return gc_command_bench_memory(argc, argv);
    if (which && strcmp(which, "speed") == 0) return gc_command_bench_speed(argc, argv);
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
