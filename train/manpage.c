/* One manual page's roff source as a query and its passage (gc_manpage_parse, gradcache/train.h).
 *
 * Only as much roff as the two sections need: control lines (a '.' or '\'' first) are macros;
 * the ones that carry text (the font macros of man(7), the text macros of mdoc(7)) give
 * their arguments, all others (layout requests, conditionals, macro definitions, the title)
 * give nothing; text lines give their words. Escapes are read by their syntax, so that an
 * unknown one is skipped whole: fonts and sizes vanish, the common characters (\-, \(em,
 * \(aq, \*(lq...) become ASCII, and the rest become nothing. The result is text for a
 * retrieval set, not a typeset page. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/train.h"
#include "base/json.h"
#include "base/utf8.h"

enum section { SECTION_OTHER, SECTION_NAME, SECTION_DESCRIPTION };

typedef struct page_reader {
    enum section section;
    bool mdoc;             /* mdoc(7) macros seen (.Dd, .Sh) */
    bool in_block;         /* inside .de/.am/.ig, up to its ".." */
    char page_name[64];    /* mdoc: the first .Nm's name, which a bare .Nm repeats */
    gc_json_text name;     /* the NAME section's text */
    gc_json_text about;    /* mdoc's .Nd: the description itself */
    gc_json_text passage;  /* the DESCRIPTION section's text */
} page_reader;

static gc_json_text *sink(page_reader *r) {
    return r->section == SECTION_NAME ? &r->name : r->section == SECTION_DESCRIPTION ? &r->passage : NULL;
}

/* A special character's name (\(xx, \[xx], \*(xx) as ASCII, or "" for one without. */
static const char *special(const char *name, size_t length) {
    static const char *const table[][2] = {
        {"em", "-"}, {"en", "-"}, {"hy", "-"}, {"mi", "-"}, {"aq", "'"},  {"oq", "'"},   {"cq", "'"},
        {"dq", "\""}, {"lq", "\""}, {"rq", "\""}, {"Lq", "\""}, {"Rq", "\""}, {"bu", "*"},  {"co", "(c)"},
        {"rg", "(R)"}, {"tm", "(TM)"}, {"Tm", "(TM)"}, {"R", "(R)"}, {"ti", "~"},  {"ha", "^"},   {"mu", "x"},
        {"ga", "`"},  {"rs", "\\"}, {"sl", "/"},  {"lt", "<"},  {"rt", ">"},  {"la", "<"},   {"ra", ">"},
        {"<=", "<="}, {">=", ">="}, {"->", "->"}, {"<-", "<-"}, {"pl", "+"},  {"eq", "="},   {"ba", "|"},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strlen(table[i][0]) == length && memcmp(table[i][0], name, length) == 0) return table[i][1];
    return "";
}

/* The name after \( \* \f \n and the like at s: one character, "(xx" or "[name]". Its length in
 * the source (from s); *name and *length the name itself. */
static size_t escape_name(const char *s, const char *end, const char **name, size_t *length) {
    if (s >= end) return *length = 0, *name = s, 0;
    if (*s == '(') {
        size_t n = end - s >= 3 ? 2 : (size_t)(end - s - 1);
        *name = s + 1, *length = n;
        return 1 + n;
    }
    if (*s == '[') {
        const char *close = memchr(s, ']', (size_t)(end - s));
        if (!close) close = end - 1;
        *name = s + 1, *length = (size_t)(close - s - 1);
        return (size_t)(close - s + 1);
    }
    *name = s, *length = 1;
    return 1;
}

/* An escape's delimited argument at s (\w'...', \h'...'): its length in the source. */
static size_t delimited(const char *s, const char *end) {
    if (s >= end) return 0;
    const char *close = memchr(s + 1, *s, (size_t)(end - s - 1));
    return close ? (size_t)(close - s + 1) : (size_t)(end - s);
}

/* text[0, length) with its escapes read, appended to out. */
static void append_text(gc_json_text *out, const char *text, size_t length) {
    const char *s = text, *end = text + length;
    while (s < end) {
        const char *backslash = memchr(s, '\\', (size_t)(end - s));
        if (!backslash) backslash = end;
        gc_json_append(out, s, (size_t)(backslash - s));
        s = backslash;
        if (s == end) break;
        if (++s == end) break; /* a line ending in '\' continues it */
        char c = *s++;
        const char *name;
        size_t name_length;
        switch (c) {
        case '"': case '#': return; /* a comment, to the end of the line */
        case '-': case '.': case '\'': case '`': gc_json_append(out, &c, 1); break;
        case 'e': case '\\': gc_json_append(out, "\\", 1); break;
        case ' ': case '~': case '0': gc_json_append(out, " ", 1); break;
        case '(': case '[':
            s += escape_name(s - 1, end, &name, &name_length) - 1;
            gc_json_append(out, special(name, name_length), strlen(special(name, name_length)));
            break;
        case '*':
            s += escape_name(s, end, &name, &name_length);
            gc_json_append(out, special(name, name_length), strlen(special(name, name_length)));
            break;
        case 'f': case 'F': case 'n': case 'g': case 'k': case 'm': case 'M': case 'Y':
            s += escape_name(s, end, &name, &name_length);
            break;
        case 's':
            if (s < end && (*s == '+' || *s == '-')) s++;
            if (s < end && (*s == '(' || *s == '[' || *s == '\'')) s += *s == '\'' ? delimited(s, end) : escape_name(s, end, &name, &name_length);
            else while (s < end && isdigit((unsigned char)*s)) s++;
            break;
        case 'w': case 'h': case 'v': case 'X': case 'o': case 'b': case 'l': case 'L': case 'D': case 'N': case 'A':
        case 'B': case 'C': case 'H': case 'R': case 'S': case 'V': case 'x': case 'Z':
            s += delimited(s, end);
            break;
        default: break; /* \& \| \^ \, \/ \: \c \z \p and the unknown: nothing */
        }
    }
}

/* The arguments of a control line, quotes honoured: [count] pointers into args (NUL-ended). */
static int split_arguments(char *args, char **argv, int max) {
    int argc = 0;
    char *s = args;
    while (*s && argc < max) {
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) break;
        if (*s == '"') {
            argv[argc++] = ++s;
            while (*s && !(*s == '"' && s[1] != '"')) s += *s == '"' ? 2 : 1;
        } else {
            argv[argc++] = s;
            while (*s && *s != ' ' && *s != '\t') s++;
        }
        if (*s) *s++ = '\0';
    }
    return argc;
}

/* Whether `word` is an mdoc macro that may be called on another's line (.Op Fl v). */
static bool mdoc_callable(const char *word) {
    static const char *const names[] = {"Ar", "Fl", "Cm", "Pa", "Op", "Oo", "Oc", "Ns", "No", "Xr", "Em", "Sy",
                                        "Li", "Dq", "Sq", "Pq", "Ql", "Va", "Ev", "Ic", "Dv", "Er", "Fn", "Fa",
                                        "Nm", "Ta", "Sx", "Aq", "Bq", "Qq", "Po", "Pc", "Bo", "Bc", "Do", "Dc",
                                        "Eo", "Ec", "Xo", "Xc", "Tn", "Ux", "Bx", "Ox", "Nx", "Fx", "Ms", "Mt"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(word, names[i]) == 0) return true;
    return false;
}

/* The words a macro puts on the page, appended to out (glued: the alternating font macros). */
static void append_arguments(gc_json_text *out, char **argv, int argc, bool glued, bool mdoc) {
    bool flag = false; /* mdoc: the next word is an option (.Fl) */
    for (int i = 0; i < argc; i++) {
        if (mdoc && mdoc_callable(argv[i])) {
            flag = strcmp(argv[i], "Fl") == 0;
            continue;
        }
        if (flag) gc_json_append(out, "-", 1);
        append_text(out, argv[i], strlen(argv[i]));
        if (!glued) gc_json_append(out, " ", 1);
    }
    gc_json_append(out, " ", 1);
}

static bool is_any(const char *name, const char *const *names, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (strcmp(name, names[i]) == 0) return true;
    return false;
}

/* One control line (without its '.'); false for a page that is only a .so redirect. */
static bool control(page_reader *r, char *line) {
    static const char *const spaced[] = {"B", "I", "SM", "SB", "SS", "Ss", "It", "Nm", "Ar", "Pa", "Cm", "Ic", "Va",
                                         "Ev", "Em", "Sy", "Li", "Dv", "Er", "Fn", "Fa", "Ql", "Dq", "Sq", "Pq",
                                         "Op", "Aq", "Tn", "Fl", "D1", "Dl", "Lk", "Mt", "Sx", "Qq", "Bq", "No"};
    static const char *const glued[] = {"BR", "BI", "IB", "IR", "RB", "RI"};
    while (*line == ' ' || *line == '\t') line++;
    if (line[0] == '\\' && (line[1] == '"' || line[1] == '#')) return true; /* a comment */
    char *name = line;
    while (*line && *line != ' ' && *line != '\t') line++;
    if (*line) *line++ = '\0';
    char *argv[64];
    int argc = split_arguments(line, argv, 64);
    gc_json_text *out = sink(r);
    if (strcmp(name, "so") == 0) return r->name.length > 0; /* before NAME: the whole page is elsewhere */
    if (strcmp(name, "de") == 0 || strcmp(name, "de1") == 0 || strcmp(name, "am") == 0 || strcmp(name, "ig") == 0) {
        r->in_block = true;
        return true;
    }
    if (strcmp(name, "Dd") == 0) r->mdoc = true;
    if (strcmp(name, "SH") == 0 || strcmp(name, "Sh") == 0) {
        r->mdoc |= name[1] == 'h';
        const char *title = argc ? argv[0] : "";
        r->section = strcmp(title, "NAME") == 0                                       ? SECTION_NAME
                     : strcmp(title, "DESCRIPTION") == 0 && argc == 1 ? SECTION_DESCRIPTION
                                                                                      : SECTION_OTHER;
        return true;
    }
    if (r->mdoc && strcmp(name, "Nm") == 0) {
        if (argc && !r->page_name[0]) snprintf(r->page_name, sizeof r->page_name, "%s", argv[0]);
        if (!argc && out) {
            append_text(out, r->page_name, strlen(r->page_name));
            gc_json_append(out, " ", 1);
            return true;
        }
    }
    if (r->mdoc && strcmp(name, "Nd") == 0 && r->section == SECTION_NAME) {
        append_arguments(&r->about, argv, argc, false, true);
        return true;
    }
    if (strcmp(name, "Xr") == 0 && out && argc >= 2) { /* a reference: name(section) */
        append_text(out, argv[0], strlen(argv[0]));
        gc_json_append(out, "(", 1);
        append_text(out, argv[1], strlen(argv[1]));
        gc_json_append(out, ") ", 2);
        return true;
    }
    if (strcmp(name, "IP") == 0 && out && argc) { /* an indented paragraph's tag */
        append_arguments(out, argv, 1, false, false);
        return true;
    }
    if (!out) return true;
    if (is_any(name, spaced, sizeof spaced / sizeof *spaced))
        append_arguments(out, argv, argc, false, r->mdoc);
    else if (is_any(name, glued, sizeof glued / sizeof *glued))
        append_arguments(out, argv, argc, true, false);
    return true; /* layout requests, conditionals, the title: nothing to read */
}

static bool is_space(unsigned char c) { return c <= ' ' || c == 0x7f; }

/* Up to max_words words of text, single spaces between them, control characters as spaces, and
 * without the bytes of a sequence that is not UTF-8 (an escape can end inside a character). */
static char *first_words(const char *text, size_t length, int max_words, int *words) {
    char *out = malloc(length + 1);
    if (!out) gc_fatal("manpage: out of host memory for %zu bytes", length);
    size_t n = 0;
    *words = 0;
    for (size_t i = 0; i < length && *words < max_words;) {
        while (i < length && is_space((unsigned char)text[i])) i++;
        if (i == length) break;
        size_t word_start = n;
        if (n) out[n++] = ' ';
        while (i < length && !is_space((unsigned char)text[i])) {
            uint32_t code;
            size_t bytes = (unsigned char)text[i] < 0x80 ? 1 : gc_utf8_decode((const unsigned char *)text + i, length - i, &code);
            if (bytes == 0) { /* a stray byte */
                i++;
                continue;
            }
            memcpy(out + n, text + i, bytes);
            n += bytes, i += bytes;
        }
        if (n == word_start + (word_start > 0)) n = word_start; /* only stray bytes: no word */
        else ++*words;
    }
    out[n] = '\0';
    return out;
}

/* The NAME section's description: after its first " - " (or mdoc's .Nd). */
static char *description(page_reader *r, int *words) {
    if (r->about.length) return first_words(r->about.bytes, r->about.length, 1 << 20, words);
    const char *text = r->name.bytes ? r->name.bytes : "";
    for (size_t i = 1; i + 2 < r->name.length; i++)
        if (text[i] == '-' && (unsigned char)text[i - 1] <= ' ' && (unsigned char)text[i + 1] <= ' ')
            return first_words(text + i + 1, r->name.length - i - 1, 1 << 20, words);
    *words = 0;
    return NULL;
}

static void reader_free(page_reader *r) {
    gc_json_text_free(&r->name);
    gc_json_text_free(&r->about);
    gc_json_text_free(&r->passage);
}

static gc_status refuse(page_reader *r, const char *name, const char *why) {
    reader_free(r);
    gc_set_error(GC_ERR_FORMAT, "%s: %s", name, why);
    return GC_ERR_FORMAT;
}

gc_status gc_manpage_parse(const char *text, size_t size, int max_words, const char *name, gc_manpage *page) {
    *page = (gc_manpage){0};
    if (memchr(text, '\0', size)) return refuse(&(page_reader){0}, name, "a NUL byte: not a roff source");
    if (!gc_json_utf8_valid(text, size)) return refuse(&(page_reader){0}, name, "not UTF-8");
    page_reader r = {0};
    char *line = malloc(size + 1);
    if (!line) gc_fatal("manpage: out of host memory for %zu bytes", size);
    for (size_t start = 0; start < size;) {
        const char *newline = memchr(text + start, '\n', size - start);
        size_t length = (newline ? (size_t)(newline - text) : size) - start;
        memcpy(line, text + start, length);
        line[length] = '\0';
        start += length + 1;
        if (r.in_block) {
            r.in_block = strncmp(line, "..", 2) != 0;
        } else if (line[0] == '.' || line[0] == '\'') {
            if (!control(&r, line + 1)) {
                free(line);
                return refuse(&r, name, "a .so redirect to another page");
            }
        } else if (sink(&r)) {
            append_text(sink(&r), line, length);
            gc_json_append(sink(&r), " ", 1); /* a line break is a space */
        }
    }
    free(line);
    if (r.name.failed || r.about.failed || r.passage.failed) gc_fatal("manpage: out of host memory");
    int query_words, passage_words;
    page->query = description(&r, &query_words);
    if (!page->query || query_words == 0) {
        gc_manpage_free(page);
        return refuse(&r, name, "no NAME section with a 'name - description' line");
    }
    page->passage = first_words(r.passage.bytes ? r.passage.bytes : "", r.passage.length, max_words, &passage_words);
    if (passage_words < GC_MANPAGE_MIN_WORDS) {
        gc_manpage_free(page);
        return refuse(&r, name, "no DESCRIPTION section of at least 3 words");
    }
    reader_free(&r);
    return GC_OK;
}

void gc_manpage_free(gc_manpage *page) {
    free(page->query);
    free(page->passage);
    *page = (gc_manpage){0};
}
