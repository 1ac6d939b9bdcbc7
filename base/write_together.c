/* Several files written as one (see write_together.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gradcache/files.h"
#include "base/write_together.h"

gc_status gc_write_together(int count, char *const *paths, const char *const *texts, const size_t *sizes) {
    /* every file complete under its temporary name first, then all renamed: a failure leaves
     * none half-written */
    if (count > GC_WRITE_TOGETHER_MAX) gc_fatal("write_together: %d files, at most %d", count, GC_WRITE_TOGETHER_MAX);
    gc_file_writer outputs[GC_WRITE_TOGETHER_MAX] = {{0}};
    gc_status status = GC_OK;
    for (int i = 0; i < count && status == GC_OK; i++)
        if ((status = gc_file_begin(&outputs[i], paths[i])) == GC_OK &&
            fwrite(texts[i], 1, sizes[i], outputs[i].file) != sizes[i]) {
            gc_set_error(GC_ERR_IO, "%s: cannot write: %s", paths[i], strerror(errno));
            status = GC_ERR_IO;
        }
    for (int i = 0; i < count; i++) {
        if (status == GC_OK) status = gc_file_commit(&outputs[i]);
        else gc_file_abort(&outputs[i]);
    }
    return status;
}
