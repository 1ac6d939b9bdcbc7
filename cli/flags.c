/* Strict flag parsing against a table (see flags.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"
#include "gradcache/memory.h"

static const gc_flag *find_flag(const gc_flag *flags, int count, const char *name) {
    for (int i = 0; i < count; i++)
        if (strcmp(flags[i].name, name) == 0) return &flags[i];
    return NULL;
}

static int bad_value(const char *command, const gc_flag *flag, const char *text, const char *expected) {
    fprintf(stderr, "gradcache %s: --%s: expected %s, got '%s'\n", command, flag->name, expected, text);
    return 2;
}

/* Stores `text` into the flag's value; 0 or the usage-error status. */
static int set_value(const char *command, const gc_flag *flag, const char *text) {
    char expected[160];
    char *end = NULL;
    errno = 0;
    switch (flag->kind) {
    case GC_FLAG_INT: {
        long long value = strtoll(text, &end, 10);
        snprintf(expected, sizeof expected, "an integer in [%.0f, %.0f]", flag->min, flag->max);
        if (errno || end == text || *end || (double)value < flag->min || (double)value > flag->max)
            return bad_value(command, flag, text, expected);
        *(int64_t *)flag->value = value;
        return 0;
    }
    case GC_FLAG_DOUBLE: {
        double value = strtod(text, &end);
        snprintf(expected, sizeof expected, "a number in [%g, %g]", flag->min, flag->max);
        if (errno || end == text || *end || !isfinite(value) || value < flag->min || value > flag->max)
            return bad_value(command, flag, text, expected);
        *(double *)flag->value = value;
        return 0;
    }
    case GC_FLAG_STRING:
        if (!*text) return bad_value(command, flag, text, "a non-empty value");
        *(const char **)flag->value = text;
        return 0;
    case GC_FLAG_SIZE:
        if (gc_parse_size(text, (size_t *)flag->value) != GC_OK)
            return bad_value(command, flag, text, "a size such as 512M or 2G");
        return 0;
    case GC_FLAG_CHOICE: {
        int used = snprintf(expected, sizeof expected, "one of");
        for (int i = 0; flag->choices[i]; i++) {
            if (strcmp(flag->choices[i], text) == 0) {
                *(int *)flag->value = i;
                return 0;
            }
            used += snprintf(expected + used, sizeof expected - (size_t)used, " %s", flag->choices[i]);
        }
        return bad_value(command, flag, text, expected);
    }
    case GC_FLAG_BOOL: break;
    }
    *(bool *)flag->value = true;
    return 0;
}

int gc_flags_parse(const char *command, const char *summary, gc_flag *flags, int count, int argc, char **argv,
                   int first) {
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            gc_flags_usage(command, summary, flags, count, stdout);
            return 1;
        }
        /* --name=value, --name value, or -x value for a one-letter name */
        bool short_flag = arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2];
        if (strncmp(arg, "--", 2) != 0 && !short_flag) {
            fprintf(stderr, "gradcache %s: unexpected argument '%s' (see --help)\n", command, arg);
            return 2;
        }
        const char *start = arg + (short_flag ? 1 : 2);
        char name[64];
        const char *equals = strchr(start, '=');
        size_t length = equals ? (size_t)(equals - start) : strlen(start);
        if (length >= sizeof name) length = sizeof name - 1;
        memcpy(name, start, length);
        name[length] = '\0';
        const gc_flag *flag = find_flag(flags, count, name);
        if (!flag) {
            fprintf(stderr, "gradcache %s: unknown flag --%s (see --help)\n", command, name);
            return 2;
        }
        const char *value = equals ? equals + 1 : NULL;
        if (flag->kind == GC_FLAG_BOOL) {
            if (value) return bad_value(command, flag, value, "no value");
        } else if (!value) {
            if (i + 1 == argc) {
                fprintf(stderr, "gradcache %s: --%s needs a value\n", command, name);
                return 2;
            }
            value = argv[++i];
        }
        int status = set_value(command, flag, value);
        if (status) return status;
    }
    return 0;
}

void gc_flags_usage(const char *command, const char *summary, const gc_flag *flags, int count, FILE *out) {
    fprintf(out, "usage: gradcache %s [flags]\n%s\n\nflags:\n", command, summary);
    for (int i = 0; i < count; i++) {
        const gc_flag *flag = &flags[i];
        char left[64], default_text[96] = "";
        snprintf(left, sizeof left, "%s%s%s", flag->name[1] ? "--" : "-", flag->name,
                 flag->kind == GC_FLAG_BOOL ? "" : " VALUE");
        switch (flag->kind) {
        case GC_FLAG_INT: snprintf(default_text, sizeof default_text, " (default %lld)", (long long)*(int64_t *)flag->value); break;
        case GC_FLAG_DOUBLE: snprintf(default_text, sizeof default_text, " (default %g)", *(double *)flag->value); break;
        case GC_FLAG_STRING:
            if (*(const char **)flag->value) snprintf(default_text, sizeof default_text, " (default %s)", *(const char **)flag->value);
            break;
        case GC_FLAG_CHOICE: snprintf(default_text, sizeof default_text, " (default %s)", flag->choices[*(int *)flag->value]); break;
        case GC_FLAG_SIZE:
            if (*(size_t *)flag->value) snprintf(default_text, sizeof default_text, " (default %zu bytes)", *(size_t *)flag->value);
            break;
        case GC_FLAG_BOOL: break;
        }
        fprintf(out, "  %-26s %s%s\n", left, flag->help, default_text);
    }
}
