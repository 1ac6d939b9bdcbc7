/* Manual pages as query/passage pairs (train/manpage.c, train/manpages.c): a man(7) page and an
 * mdoc(7) page read to exactly the text expected (fonts, escapes, strings, comments, macro
 * definitions, references), the refusals (a .so redirect, no NAME line, a short DESCRIPTION,
 * invalid UTF-8), the word limit, and a manual folder read in byte order, gzip and plain,
 * localised pages and other compressions left out. */
#include <sys/stat.h>

#include "check.h"

static const char man_page[] =
    "'\\\" t\n"
    ".\\\" a comment line\n"
    ".TH LS 1 \"2024\" \"GNU coreutils\"\n"
    ".de XX\n"
    "defined text that never shows\n"
    "..\n"
    ".SH NAME\n"
    "ls \\- list directory \\fIcontents\\fR\n"
    ".SH SYNOPSIS\n"
    ".B ls\n"
    "[\\fIOPTION\\fR]... [\\fIFILE\\fR]...\n"
    ".SH DESCRIPTION\n"
    ".\\\" comment\n"
    "List information about the FILEs (the current directory by default).\n"
    "Sort entries alphabetically if none of\n"
    ".BR \\-cftuvSUX \" nor \" \\-\\-sort\n"
    "is specified.\\(em It uses \\*(lqcolour\\*(rq \\s-1SMALL\\s0 and \\f(CWfixed\\fP text. \\\" a trailing comment\n"
    ".PP\n"
    ".IP \\(bu 2\n"
    "See also\n"
    ".IR ls (1).\n"
    ".SH AUTHOR\n"
    "Not in the passage.\n";

static const char mdoc_page[] =
    ".Dd January 1, 2024\n"
    ".Dt FOO 1\n"
    ".Os\n"
    ".Sh NAME\n"
    ".Nm foo\n"
    ".Nd do the foo thing\n"
    ".Sh SYNOPSIS\n"
    ".Nm\n"
    ".Op Fl v\n"
    ".Sh DESCRIPTION\n"
    "The\n"
    ".Nm\n"
    "utility does it.\n"
    ".Bl -tag -width Ds\n"
    ".It Fl v\n"
    "Be verbose, see\n"
    ".Xr ls 1 .\n"
    ".El\n";

static void check_page(const char *source, int max_words, const char *query, const char *passage) {
    gc_manpage page;
    gc_status status = gc_manpage_parse(source, strlen(source), max_words, "page", &page);
    CHECK_MSG(status == GC_OK, "%s", gc_last_error());
    if (status != GC_OK) return;
    CHECK_MSG(strcmp(page.query, query) == 0, "query [%s], expected [%s]", page.query, query);
    CHECK_MSG(strcmp(page.passage, passage) == 0, "passage [%s], expected [%s]", page.passage, passage);
    gc_manpage_free(&page);
}

static void check_refused(const char *source, size_t size, const char *reason) {
    gc_manpage page = {(char *)1, (char *)1};
    CHECK(gc_manpage_parse(source, size, 100, "bad.1", &page) == GC_ERR_FORMAT);
    CHECK_MSG(strncmp(gc_last_error(), "bad.1: ", 7) == 0 && strstr(gc_last_error(), reason), "%s, expected %s",
              gc_last_error(), reason);
    CHECK(page.query == NULL && page.passage == NULL);
    gc_clear_error();
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
}

static void check_folder(void) {
    char root[] = "/tmp/gc_man_XXXXXX", path[256], command[512];
    REQUIRE(mkdtemp(root));
    const char *folders[] = {"man1", "man3", "de", "de/man1"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", root, folders[i]);
        REQUIRE(mkdir(path, 0700) == 0);
    }
    snprintf(path, sizeof path, "%s/man1/ls.1", root);
    write_file(path, man_page);
    snprintf(command, sizeof command, "gzip -9 %s", path); /* man1/ls.1.gz */
    REQUIRE(system(command) == 0);
    snprintf(path, sizeof path, "%s/man1/foo.1", root);
    write_file(path, mdoc_page);
    snprintf(path, sizeof path, "%s/man1/dir.1", root);
    write_file(path, ".so man1/ls.1\n");
    snprintf(path, sizeof path, "%s/man3/x.3.bz2", root);
    write_file(path, "BZh");
    snprintf(path, sizeof path, "%s/de/man1/ls.1", root);
    write_file(path, man_page);
    gc_manpages pages;
    CHECK(gc_manpages_read(root, 4, &pages) == GC_OK);
    CHECK_MSG(pages.count == 2 && pages.skipped == 2, "%lld pages, %lld skipped", (long long)pages.count,
              (long long)pages.skipped);
    if (pages.count == 2) { /* man1/foo.1 before man1/ls.1.gz */
        CHECK(strcmp(pages.queries[0], "do the foo thing") == 0 && strcmp(pages.passages[0], "The foo utility does") == 0);
        CHECK(strcmp(pages.queries[1], "list directory contents") == 0 &&
              strcmp(pages.passages[1], "List information about the") == 0);
    }
    gc_manpages_free(&pages);
    snprintf(command, sizeof command, "rm -rf %s", root);
    REQUIRE(system(command) == 0);
    CHECK(gc_manpages_read(root, 4, &pages) == GC_ERR_IO && strstr(gc_last_error(), root));
    gc_clear_error();
}

int main(void) {
    check_page(man_page, 1000, "list directory contents",
               "List information about the FILEs (the current directory by default). Sort entries alphabetically "
               "if none of -cftuvSUX nor --sort is specified.- It uses \"colour\" SMALL and fixed text. * See also "
               "ls(1).");
    check_page(man_page, 5, "list directory contents", "List information about the FILEs");
    check_page(mdoc_page, 1000, "do the foo thing", "The foo utility does it. -v Be verbose, see ls(1)");
    check_refused(".TH X 1\n.so man1/ls.1\n", 19, "redirect");
    check_refused(".SH NAME\nls lists\n.SH DESCRIPTION\nList information about files.\n", 63, "NAME");
    check_refused(".SH NAME\nls \\- list\n.SH DESCRIPTION\nToo short.\n", 45, "DESCRIPTION");
    check_refused(".SH NAME\nls \\- list \xe9\n", 21, "UTF-8");
    check_refused(".SH NAME\0ls", 11, "NUL");
    check_folder();
    return gc_test_result();
}
