/* STUB: to be written. */
#include <stdio.h>

#include "commands.h"

int gc_command_eval(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "gradcache eval: not implemented yet\n");
    return 1;
}
