/* STUB: to be written. */
#include <stdio.h>

#include "commands.h"

int gc_command_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "gradcache bench: not implemented yet\n");
    return 1;
}
