/* Slurm's compressed lists (see slurm.h): one pass each, nothing expanded. */
#include "slurm.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "env_internal.h"

#define TASKS_MAX (1 << 20)

/* GC_ERR_FORMAT: `problem` at byte `at` of list (shown from a little before it). */
static gc_status refuse(const char *what, const char *list, size_t at, const char *problem) {
    char text[200];
    size_t from = at > 20 ? at - 20 : 0;
    gc_set_error(GC_ERR_FORMAT, "%s='%s%s': %s at character %zu", what, from ? "..." : "",
                 gc_env_shown(list + from, text, sizeof text), problem, at + 1);
    return GC_ERR_FORMAT;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_name(char c) { return is_alnum(c) || c == '-' || c == '.' || c == '_'; }

/* Decimal digits at list[*at], 1 to max_digits of them, into *value; false if there are none
 * or more. */
static bool number(const char *list, size_t *at, int max_digits, int64_t *value) {
    int digits = 0;
    *value = 0;
    for (; is_digit(list[*at]); (*at)++, digits++) {
        if (digits == max_digits) return false;
        *value = *value * 10 + (list[*at] - '0');
    }
    return digits > 0;
}

/* The first host being written: bytes appended while `on` (the list's first host). */
typedef struct first_host {
    char *text;
    size_t size, length;
    bool on;
} first_host;

static bool append(first_host *h, const char *bytes, size_t n) {
    if (!h->on) return true;
    if (h->length + n >= h->size) return false;
    memcpy(h->text + h->length, bytes, n);
    h->length += n;
    h->text[h->length] = '\0';
    return true;
}

/* A bracketed group at list[*at] == '[': numbers and ranges separated by commas; the first
 * number, as written, goes into the first host. */
static gc_status group(const char *what, const char *list, size_t *at, first_host *h) {
    (*at)++;
    for (bool first = true;; first = false) {
        size_t start = *at;
        int64_t low, high;
        if (!number(list, at, 9, &low)) return refuse(what, list, *at, "expected a number of 1 to 9 digits");
        if (first && !append(h, list + start, *at - start)) return refuse(what, list, start, "the first host is too long");
        if (list[*at] == '-') {
            (*at)++;
            size_t upper = *at;
            if (!number(list, at, 9, &high)) return refuse(what, list, *at, "expected a number of 1 to 9 digits");
            if (high < low) return refuse(what, list, upper, "a range ends below its start");
        }
        if (list[*at] == ']') {
            (*at)++;
            return GC_OK;
        }
        if (list[*at] != ',') return refuse(what, list, *at, "expected ',', '-' or ']'");
        (*at)++;
    }
}

gc_status gc_slurm_first_host(const char *what, const char *list, char *host, size_t size) {
    if (strnlen(list, GC_SLURM_LIST_MAX + 1) > GC_SLURM_LIST_MAX)
        return refuse(what, list, 0, "longer than the longest host list accepted");
    first_host h = {host, size, 0, true};
    host[0] = '\0';
    size_t at = 0;
    for (;;) { /* one host */
        if (!is_alnum(list[at])) return refuse(what, list, at, "expected a host name (a letter or a digit first)");
        while (list[at] && list[at] != ',') {
            if (is_name(list[at])) {
                if (!append(&h, list + at, 1)) return refuse(what, list, at, "the first host is too long");
                at++;
            } else if (list[at] == '[') {
                gc_status status = group(what, list, &at, &h);
                if (status != GC_OK) return status;
            } else {
                return refuse(what, list, at, "unexpected character");
            }
        }
        h.on = false;
        if (!list[at]) return GC_OK;
        at++; /* the comma: another host must follow */
    }
}

gc_status gc_slurm_tasks_on_node(const char *what, const char *list, int node, int *tasks) {
    if (strnlen(list, GC_SLURM_LIST_MAX + 1) > GC_SLURM_LIST_MAX)
        return refuse(what, list, 0, "longer than the longest list accepted");
    size_t at = 0;
    int64_t nodes = 0; /* before the entry under way; at most 2^40, no overflow */
    for (;;) {
        int64_t count, repeat = 1;
        if (!number(list, &at, 7, &count) || count < 1 || count > TASKS_MAX)
            return refuse(what, list, at, "expected a count of tasks from 1 to 1048576");
        if (list[at] == '(') {
            if (list[at + 1] != 'x') return refuse(what, list, at + 1, "expected 'x' (a repetition)");
            at += 2;
            if (!number(list, &at, 7, &repeat) || repeat < 1 || repeat > TASKS_MAX)
                return refuse(what, list, at, "expected a repetition from 1 to 1048576");
            if (list[at] != ')') return refuse(what, list, at, "expected ')'");
            at++;
        }
        if (node >= nodes && node < nodes + repeat) *tasks = (int)count; /* the rest is checked all the same */
        nodes += repeat;
        if (!list[at]) break;
        if (list[at] != ',') return refuse(what, list, at, "expected ',' or '('");
        at++;
    }
    if (node < 0 || node >= nodes) {
        char text[200];
        gc_set_error(GC_ERR_FORMAT, "%s='%s' lists %lld nodes: none for node %d", what,
                     gc_env_shown(list, text, sizeof text), (long long)nodes, node);
        return GC_ERR_FORMAT;
    }
    return GC_OK;
}
