/* Several files written as one: each complete under its temporary name (gradcache/files.h)
 * before any is renamed into place, so that a failure leaves none half-written (the dataset
 * files of `gradcache data`). */
#ifndef GC_BASE_WRITE_TOGETHER_H
#define GC_BASE_WRITE_TOGETHER_H

#include <stddef.h>

#include "gradcache/error.h"

enum { GC_WRITE_TOGETHER_MAX = 8 };

/* texts[i][0..sizes[i]) to paths[i], for i < count <= GC_WRITE_TOGETHER_MAX. GC_OK, or GC_ERR_IO
 * naming the file that failed. */
gc_status gc_write_together(int count, char *const *paths, const char *const *texts, const size_t *sizes);

#endif
