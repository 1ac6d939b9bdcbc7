/* Reading a small JSON file whole (config.json, tokenizer.json): bounded in size and depth,
 * every failure one message naming the file. */
#ifndef GC_BASE_JSON_FILE_H
#define GC_BASE_JSON_FILE_H

#include <stdarg.h>

#include "gradcache/error.h"
#include "base/json.h"

/* Objects and arrays nest at most this deep in the files read here (tokenizer.json: 5). */
#define GC_JSON_FILE_MAX_DEPTH 32

/* Parses `length` bytes (gc_json_parse_document); GC_ERR_FORMAT "<name>: <problem> at byte N". */
gc_status gc_json_file_parse(const char *name, const char *text, size_t length, gc_json **document);
/* Reads and parses the file at `path`, at most max_size bytes: GC_ERR_IO when it cannot be
 * read, GC_ERR_FORMAT when it is larger or not JSON. */
gc_status gc_json_file_read(const char *path, size_t max_size, gc_json **document);

/* The whole file at `path` into *text (a new buffer, NUL-terminated after its *size bytes):
 * GC_ERR_IO when it cannot be read, GC_ERR_FORMAT when it is larger than max_size. */
gc_status gc_file_read_bounded(const char *path, size_t max_size, char **text, size_t *size);

/* Records GC_ERR_FORMAT as "<name>: <problem>" and returns it. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
gc_status gc_json_file_error(const char *name, const char *fmt, ...);
/* The same with the problem's arguments in a va_list (for other formats' own wrappers). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 0)))
#endif
gc_status gc_json_file_verror(const char *name, const char *fmt, va_list args);

#endif
