/* Byte counts for people (see bytes.h). */
#include <math.h>
#include <stdio.h>

#include "bytes.h"

double gc_byte_unit(double bytes, const char **name) {
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    while (k < 4 && bytes >= 1024.0 * ldexp(1, 10 * k)) k++;
    *name = names[k];
    return ldexp(1, 10 * k);
}

const char *gc_format_bytes(double bytes, char *buf, int size) {
    const char *name;
    double unit = gc_byte_unit(bytes, &name);
    snprintf(buf, (size_t)size, "%.3g %s", bytes / unit, name);
    return buf;
}
