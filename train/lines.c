/* Bounded line reading (see lines.h). A byte at a time, with the stream locked once per line
 * so that getc_unlocked is safe and cheap; fgets would stop at a NUL byte without saying so. */
#include <stdarg.h>

#include "lines.h"

#include <stdarg.h>

gc_line_result gc_read_line(FILE *in, char *buf, size_t most, size_t *length) {
    gc_line_result result = GC_LINE_OK;
    size_t used = 0;
    int c = EOF;
    flockfile(in);
    while ((c = getc_unlocked(in)) != EOF && c != '\n') {
        if (used == most) {
            result = GC_LINE_TOO_LONG;
            break;
        }
        buf[used++] = (char)c;
    }
    if (result == GC_LINE_OK && c == EOF) result = ferror(in) ? GC_LINE_ERROR : used ? GC_LINE_LAST : GC_LINE_END;
    funlockfile(in);
    *length = used;
    return result;
}

gc_status gc_line_error(const char *name, long long number, const char *fmt, ...) {
    char problem[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(problem, sizeof problem, fmt, args);
    va_end(args);
    gc_set_error(GC_ERR_FORMAT, "%s:%lld: %s", name, number, problem);
    return GC_ERR_FORMAT;
}
