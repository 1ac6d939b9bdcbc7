/* Strict flag parsing against a table, and the --device and --precision flags (see flags.h). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "flags.h"
#include "gradcache/memory.h"

static const cli_flag *find_flag(const cli_flag *flags, int count, const char *name) {
    for (int i = 0; i < count; i++)
        if (strcmp(flags[i].name, name) == 0) return &flags[i];
    return NULL;
}

static int bad_value(const char *command, const cli_flag *flag, const char *text, const char *expected) {
    fprintf(stderr, "gradcache %s: --%s: expected %s, got '%s'\n", command, flag->name, expected, text);
    return 2;
}

/* An INT flag's bound as the integer it must be: compared as a double, 2^53 + 1 would pass
 * a bound of 2^53. */
static int64_t integer_bound(const cli_flag *flag, double bound) {
    if (!(bound == floor(bound) && fabs(bound) <= 9007199254740992.0))
        gc_fatal("flags: --%s has the bound %g, not an integer of at most 2^53", flag->name, bound);
    return (int64_t)bound;
}

/* strtoll and strtod skip leading white space and take a '+': a value is the number alone. */
static bool starts_as_number(const char *text) {
    return (*text >= '0' && *text <= '9') || *text == '-' || *text == '.';
}

/* Stores `text` into the flag's value; 0 or the usage-error status. */
static int set_value(const char *command, const cli_flag *flag, const char *text) {
    char expected[160];
    char *end = NULL;
    errno = 0;
    switch (flag->kind) {
    case CLI_FLAG_INT: {
        int64_t min = integer_bound(flag, flag->min), max = integer_bound(flag, flag->max);
        long long value = strtoll(text, &end, 10);
        snprintf(expected, sizeof expected, "an integer in [%lld, %lld]", (long long)min, (long long)max);
        if (!starts_as_number(text) || errno || end == text || *end || value < min || value > max)
            return bad_value(command, flag, text, expected);
        *(int64_t *)flag->value = value;
        return 0;
    }
    case CLI_FLAG_DOUBLE: {
        double value = strtod(text, &end);
        snprintf(expected, sizeof expected, "a number in [%g, %g]", flag->min, flag->max);
        if (!starts_as_number(text) || errno || end == text || *end || !isfinite(value) || value < flag->min ||
            value > flag->max)
            return bad_value(command, flag, text, expected);
        *(double *)flag->value = value;
        return 0;
    }
    case CLI_FLAG_STRING:
        if (!*text) return bad_value(command, flag, text, "a non-empty value");
        *(const char **)flag->value = text;
        return 0;
    case CLI_FLAG_SIZE: {
        /* 0 would be no limit at all: that is leaving the flag out, not a size */
        size_t bytes = 0;
        if (gc_parse_size(text, &bytes) != GC_OK || bytes == 0)
            return bad_value(command, flag, text, "a size of at least 1 byte such as 512M or 2G");
        *(size_t *)flag->value = bytes;
        return 0;
    }
    case CLI_FLAG_CHOICE: {
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
    case CLI_FLAG_BOOL: break;
    }
    *(bool *)flag->value = true;
    return 0;
}

int cli_flags_parse(const char *command, const char *summary, cli_flag *flags, int count, int argc, char **argv,
                    int first) {
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            cli_flags_usage(command, summary, flags, count, stdout);
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
        const cli_flag *flag = find_flag(flags, count, name);
        if (!flag) {
            fprintf(stderr, "gradcache %s: unknown flag --%s (see --help)\n", command, name);
            return 2;
        }
        const char *value = equals ? equals + 1 : NULL;
        if (flag->kind == CLI_FLAG_BOOL) {
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

void cli_flags_usage(const char *command, const char *summary, const cli_flag *flags, int count, FILE *out) {
    fprintf(out, "usage: gradcache %s [flags]\n%s\n\nflags:\n", command, summary);
    for (int i = 0; i < count; i++) {
        const cli_flag *flag = &flags[i];
        char left[64], default_text[96] = "";
        snprintf(left, sizeof left, "%s%s%s", flag->name[1] ? "--" : "-", flag->name,
                 flag->kind == CLI_FLAG_BOOL ? "" : " VALUE");
        switch (flag->kind) {
        case CLI_FLAG_INT: snprintf(default_text, sizeof default_text, " (default %lld)", (long long)*(int64_t *)flag->value); break;
        case CLI_FLAG_DOUBLE: /* a NAN default: off unless given */
            if (!isnan(*(double *)flag->value))
                snprintf(default_text, sizeof default_text, " (default %g)", *(double *)flag->value);
            break;
        case CLI_FLAG_STRING:
            if (*(const char **)flag->value) snprintf(default_text, sizeof default_text, " (default %s)", *(const char **)flag->value);
            break;
        case CLI_FLAG_CHOICE: snprintf(default_text, sizeof default_text, " (default %s)", flag->choices[*(int *)flag->value]); break;
        case CLI_FLAG_SIZE:
            if (*(size_t *)flag->value) snprintf(default_text, sizeof default_text, " (default %zu bytes)", *(size_t *)flag->value);
            break;
        case CLI_FLAG_BOOL: break;
        }
        fprintf(out, "  %-26s %s%s\n", left, flag->help, default_text);
    }
}

const char *const cli_packing_names[] = {"on", "off", NULL};

const char *const cli_device_choices[] = {"cpu", "cuda", NULL};

int cli_device_from_flag(const char *command, int choice, gc_device *device) {
    *device = gc_cpu();
    if (choice != CLI_DEVICE_CUDA) return 0;
    if (gc_cuda_device_count() < 1)
        return cli_fail(command, 2, "--device cuda: no CUDA device is available%s",
                        gc_cuda_built() ? "" : " (this build has no CUDA backend)");
    *device = gc_cuda(0);
    return 0;
}

const char *const cli_precision_names[] = {"f32", "f16", "bf16", NULL};

gc_dtype cli_precision_dtype(int precision) {
    static const gc_dtype dtypes[CLI_PRECISION_COUNT] = {GC_F32, GC_F16, GC_BF16};
    if (precision < 0 || precision >= CLI_PRECISION_COUNT) gc_fatal("precision_dtype: no precision %d", precision);
    return dtypes[precision];
}

int cli_precision_check_device(const char *command, int precision, gc_device device) {
    if (gc_device_check_dtype(device, cli_precision_dtype(precision)) == GC_OK) return 0;
    return cli_fail(command, 2, "--precision %s: %s", cli_precision_names[precision], gc_last_error());
}

int cli_precision_list_parse(const char *command, const char *text, int indices[CLI_PRECISION_COUNT]) {
    int count = 0;
    for (const char *at = text;; at++) {
        size_t length = strcspn(at, ",");
        int found = -1;
        for (int p = 0; p < CLI_PRECISION_COUNT && found < 0; p++)
            if (strlen(cli_precision_names[p]) == length && strncmp(at, cli_precision_names[p], length) == 0) found = p;
        for (int i = 0; i < count && found >= 0; i++)
            if (indices[i] == found) found = -2;
        if (found < 0) {
            cli_fail(command, 2, "--precision: expected f32, f16 or bf16, each at most once, comma-separated, got '%s'",
                     text);
            return -1;
        }
        indices[count++] = found;
        at += length;
        if (!*at) return count;
    }
}
