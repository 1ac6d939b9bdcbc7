/* Comma-separated integer lists given as a flag's value ("--batches 16,64,256"). */
#ifndef CLI_INT_LIST_H
#define CLI_INT_LIST_H

#include <stdint.h>

#define CLI_INT_LIST_MAX 32

typedef struct cli_int_list {
    int count;
    int64_t values[CLI_INT_LIST_MAX]; /* ascending, no duplicates */
} cli_int_list;

/* Parses `text` (integers in [min, max], separated by commas) into *list, sorted and
 * deduplicated. Returns 0, or prints one line naming the command and the flag and returns 2
 * (the exit status of a usage error). */
int cli_int_list_parse(const char *command, const char *flag, const char *text, int64_t min, int64_t max,
                       cli_int_list *list);
/* Adds `value` if absent, keeping the list ascending; 0, or -1 when it is full. */
int cli_int_list_insert(cli_int_list *list, int64_t value);

#endif
