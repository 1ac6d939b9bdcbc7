/* Exact short number formatting (see numbers.h). */
#include <stdio.h>
#include <stdlib.h>

#include "numbers.h"

const char *gc_format_exact(double value, char *buf, int size) {
    /* 17 significant digits always round-trip a double (IEEE 754, 5.12.2) */
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, (size_t)size, "%.*g", digits, value);
        if (strtod(buf, NULL) == value) break;
    }
    return buf;
}
