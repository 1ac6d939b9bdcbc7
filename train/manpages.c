/* A folder of manual pages as query/passage pairs (gc_manpages_read, gradcache/train.h):
 * the sections' subfolders (man1, man3, man8...) in byte order, each one's files in byte
 * order, so the same folder always gives the same pairs. Localised pages (de/, fr/...) are
 * not read: the pairs are English. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradcache/train.h"
#include "nn/io/gunzip.h"
#include "base/json_file.h"

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in folder that `keep` accepts, sorted; NULL with GC_ERR_IO when it cannot be read. */
static char **sorted_names(const char *folder, bool (*keep)(const char *), int64_t *count) {
    DIR *dir = opendir(folder);
    *count = 0;
    if (!dir) {
        gc_set_error(GC_ERR_IO, "%s: cannot open the folder", folder);
        return NULL;
    }
    char **names = NULL;
    int64_t capacity = 0;
    for (struct dirent *entry; (entry = readdir(dir));) {
        if (!keep(entry->d_name)) continue;
        if (*count == capacity) {
            capacity = capacity ? 2 * capacity : 64;
            names = realloc(names, (size_t)capacity * sizeof *names);
            if (!names) gc_fatal("manpages: out of host memory for %lld names", (long long)capacity);
        }
        names[(*count)++] = strdup(entry->d_name);
        if (!names[*count - 1]) gc_fatal("manpages: out of host memory");
    }
    closedir(dir);
    if (*count) qsort(names, (size_t)*count, sizeof *names, compare_names);
    return names ? names : calloc(1, sizeof *names);
}

static void free_names(char **names, int64_t count) {
    for (int64_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

static bool is_section(const char *name) { return strncmp(name, "man", 3) == 0 && name[3] >= '1' && name[3] <= '9'; }
static bool is_page(const char *name) { return name[0] != '.'; }

static bool ends_with(const char *name, const char *suffix) {
    size_t n = strlen(name), s = strlen(suffix);
    return n >= s && strcmp(name + n - s, suffix) == 0;
}

/* One file's page into *page: GC_ERR_FORMAT (or GC_ERR_IO) when it is none. */
static gc_status read_page(const char *path, int max_words, gc_manpage *page) {
    static const char *const other_compressions[] = {".bz2", ".xz", ".lzma", ".lz", ".zst", ".Z"};
    for (size_t i = 0; i < sizeof other_compressions / sizeof *other_compressions; i++)
        if (ends_with(path, other_compressions[i])) {
            gc_set_error(GC_ERR_FORMAT, "%s: compressed otherwise than with gzip", path);
            return GC_ERR_FORMAT;
        }
    struct stat info;
    if (stat(path, &info) != 0 || !S_ISREG(info.st_mode)) {
        gc_set_error(GC_ERR_IO, "%s: not a readable file", path);
        return GC_ERR_IO;
    }
    char *bytes, *text;
    size_t size, text_size;
    gc_status status = gc_file_read_bounded(path, GC_MANPAGE_MAX_BYTES, &bytes, &size);
    if (status != GC_OK) return status;
    if (ends_with(path, ".gz")) {
        status = gc_gunzip((const uint8_t *)bytes, size, GC_MANPAGE_MAX_BYTES, path, &text, &text_size);
        free(bytes);
        if (status != GC_OK) return status;
    } else {
        text = bytes, text_size = size;
    }
    status = gc_manpage_parse(text, text_size, max_words, path, page);
    free(text);
    return status;
}

static void keep_page(gc_manpages *pages, gc_manpage *page, int64_t *capacity) {
    if (pages->count == *capacity) {
        *capacity = *capacity ? 2 * *capacity : 256;
        pages->queries = realloc(pages->queries, (size_t)*capacity * sizeof *pages->queries);
        pages->passages = realloc(pages->passages, (size_t)*capacity * sizeof *pages->passages);
        if (!pages->queries || !pages->passages) gc_fatal("manpages: out of host memory for %lld pages", (long long)*capacity);
    }
    pages->queries[pages->count] = page->query;
    pages->passages[pages->count++] = page->passage;
}

gc_status gc_manpages_read(const char *folder, int max_words, gc_manpages *pages) {
    *pages = (gc_manpages){0};
    int64_t n_sections, capacity = 0;
    char **sections = sorted_names(folder, is_section, &n_sections);
    if (!sections) return GC_ERR_IO;
    if (n_sections == 0) {
        free(sections);
        gc_set_error(GC_ERR_IO, "%s: no man1 ... man9 folders (is it a manual folder such as /usr/share/man?)", folder);
        return GC_ERR_IO;
    }
    for (int64_t s = 0; s < n_sections; s++) {
        char *section = gc_path_join(folder, sections[s]);
        int64_t n_files;
        char **files = sorted_names(section, is_page, &n_files);
        for (int64_t f = 0; files && f < n_files; f++) {
            char *path = gc_path_join(section, files[f]);
            gc_manpage page;
            if (read_page(path, max_words, &page) == GC_OK) keep_page(pages, &page, &capacity);
            else pages->skipped++;
            free(path);
        }
        if (files) free_names(files, n_files);
        else pages->skipped++; /* an unreadable section folder */
        free(section);
    }
    free_names(sections, n_sections);
    return GC_OK;
}

void gc_manpages_free(gc_manpages *pages) {
    for (int64_t i = 0; i < pages->count; i++) {
        free(pages->queries[i]);
        free(pages->passages[i]);
    }
    free(pages->queries);
    free(pages->passages);
    *pages = (gc_manpages){0};
}
