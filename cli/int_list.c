/* Comma-separated integer lists (see int_list.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "int_list.h"

int cli_int_list_insert(cli_int_list *list, int64_t value) {
    int at = 0;
    while (at < list->count && list->values[at] < value) at++;
    if (at < list->count && list->values[at] == value) return 0;
    if (list->count == CLI_INT_LIST_MAX) return -1;
    for (int i = list->count; i > at; i--) list->values[i] = list->values[i - 1];
    list->values[at] = value;
    list->count++;
    return 0;
}

int cli_int_list_parse(const char *command, const char *flag, const char *text, int64_t min, int64_t max,
                       cli_int_list *list) {
    list->count = 0;
    const char *cursor = text;
    for (;;) {
        char *end = NULL;
        errno = 0;
        long long value = strtoll(cursor, &end, 10);
        /* strtoll skips leading blanks and takes a sign: refuse both, a list is digits and commas */
        bool digits = *cursor >= '0' && *cursor <= '9';
        if (!digits || errno || (*end != ',' && *end != '\0') || value < min || value > max ||
            cli_int_list_insert(list, value) != 0) {
            fprintf(stderr,
                    "gradcache %s: --%s: expected up to %d comma-separated integers in [%lld, %lld], got '%s'\n",
                    command, flag, CLI_INT_LIST_MAX, (long long)min, (long long)max, text);
            return 2;
        }
        if (*end == '\0') return 0;
        cursor = end + 1;
    }
}
