/* The memory limit of a run and its default, and byte counts for people (see
 * gradcache/train.h). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "gradcache/memory.h"
#include "gradcache/train.h"

/* The default's share of the available memory. */
#define DEFAULT_NUMERATOR 2
#define DEFAULT_DENOMINATOR 3

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

gc_mem_limit gc_mem_limit_apply(gc_device device, size_t flag_bytes, int sharers) {
    gc_device cpu = gc_cpu();
    gc_mem_limit limit = {0};
    /* before anything is set here, a limit can only be GC_MEM_LIMIT's */
    bool from_environment = gc_memory_get_stats(device).limit_bytes != 0;
    if (flag_bytes) gc_memory_set_limit(device, flag_bytes);
    char default_source[sizeof limit.source] = "";
    if (gc_memory_get_stats(cpu).limit_bytes == 0) {
        size_t available = 0, total = 0;
        gc_memory_device_info(cpu, &available, &total);
        if (sharers < 1) sharers = 1;
        char text[32], shared[48] = "";
        if (sharers > 1) snprintf(shared, sizeof shared, " shared by %d processes", sharers);
        snprintf(default_source, sizeof default_source, "the default, %d/%d of the %s available%s; --mem-limit to change",
                 DEFAULT_NUMERATOR, DEFAULT_DENOMINATOR, gc_format_bytes((double)available, text, sizeof text), shared);
        /* 0 when the available memory is unknown: no limit, as before there was a default */
        gc_memory_set_limit(cpu, available / DEFAULT_DENOMINATOR * DEFAULT_NUMERATOR / (size_t)sharers);
    }
    limit.bytes = gc_memory_get_stats(device).limit_bytes;
    snprintf(limit.source, sizeof limit.source, "%s",
             flag_bytes         ? "--mem-limit"
             : from_environment ? "GC_MEM_LIMIT"
             : limit.bytes      ? default_source
                                : "none");
    return limit;
}

const char *gc_mem_limit_describe(const gc_mem_limit *limit, gc_device device, char *buf, size_t size) {
    char bytes[32], name[16];
    gc_device_str(device, name, sizeof name);
    if (limit->bytes)
        snprintf(buf, size, "%s on %s (%s)", gc_format_bytes((double)limit->bytes, bytes, sizeof bytes), name,
                 limit->source);
    else
        snprintf(buf, size, "none on %s", name);
    return buf;
}

const char *gc_mem_limit_hint(const gc_mem_limit *limit, gc_status status, char *buf, size_t size) {
    if (status == GC_ERR_MEM_LIMIT) snprintf(buf, size, " (the limit: %s)", limit->source);
    else snprintf(buf, size, "%s", "");
    return buf;
}
