/* One-line failure reports (see errors.h). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "errors.h"
#include "gradcache/error.h"

int cli_fail(const char *command, int exit_status, const char *format, ...) {
    /* Formatted whole, then written by one call: a process stopped by a signal while it
     * reports (the launcher stops every rank when one fails) leaves a whole line or none,
     * never a torn one (a pipe write of up to 4 KiB is atomic). */
    char message[2048];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    fprintf(stderr, "gradcache %s: %s\n", command, message);
    return exit_status;
}

int cli_fail_model(const char *command) {
    bool flag = gc_last_status() == GC_ERR_CONFIG;
    return cli_fail(command, flag ? 2 : 1, "%s: %s", flag ? "--max-length" : "--model", gc_last_error());
}
