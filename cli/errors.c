/* One-line failure reports (see errors.h). */
#include <stdarg.h>
#include <stdio.h>

#include "errors.h"

int gc_cli_fail(const char *command, int exit_status, const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "gradcache %s: ", command);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    return exit_status;
}
