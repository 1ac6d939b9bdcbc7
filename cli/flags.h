/* Command-line flags: a table per subcommand, parsed strictly (unknown flags, missing or
 * malformed values and values out of range are errors naming the flag), and the same
 * table prints the subcommand's --help. */
#ifndef GC_CLI_FLAGS_H
#define GC_CLI_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum gc_flag_kind {
    GC_FLAG_BOOL,   /* --name (no value) sets *(bool *)value */
    GC_FLAG_INT,    /* int64_t in [min, max] */
    GC_FLAG_DOUBLE, /* double in [min, max], finite */
    GC_FLAG_STRING, /* const char * (points into argv) */
    GC_FLAG_SIZE,   /* size_t bytes: "512M", "2G" (gc_parse_size) */
    GC_FLAG_CHOICE  /* one of `choices` (a NULL-terminated list); *(int *)value = its index */
} gc_flag_kind;

typedef struct gc_flag {
    const char *name;  /* without the leading "--" (a one-letter name is also "-x") */
    gc_flag_kind kind;
    void *value;       /* where the parsed value goes; holds the default before parsing */
    double min, max;   /* INT and DOUBLE */
    const char *const *choices; /* CHOICE */
    const char *help;  /* one line */
} gc_flag;

/* Parses argv[first..argc) against flags[0..count). Positional arguments are refused.
 * Returns 0, or prints one line "gradcache <command>: <problem>" to stderr and returns 2
 * (the exit status of a usage error). --help prints the usage and returns 1 (exit 0). */
int gc_flags_parse(const char *command, const char *summary, gc_flag *flags, int count, int argc, char **argv,
                   int first);
void gc_flags_usage(const char *command, const char *summary, const gc_flag *flags, int count, FILE *out);

#endif
