/* STUB: to be written. */
#include <stdio.h>

#include "commands.h"

int gc_command_train(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "gradcache train: not implemented yet\n");
    return 1;
}
