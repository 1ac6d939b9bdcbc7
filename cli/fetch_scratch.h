/* The scratch folders of `gradcache model fetch`: where a fetch downloads, unpacks and checks
 * a model before the one rename that creates the model folder, so that a fetch that fails or
 * is killed never leaves a model folder, empty or half-filled, behind. Each sits next to the
 * model folder (the rename stays within one file system) and is named by its fetch's process,
 * "<out>.fetch-<pid>-XXXXXX", so that a later fetch tells what a killed fetch left (its
 * process is gone: removed) from the folder of a fetch running now (left alone). */
#ifndef GC_CLI_FETCH_SCRATCH_H
#define GC_CLI_FETCH_SCRATCH_H

#include "gradcache/error.h"

/* A new, empty scratch folder of this process for the model folder `out` (whose parent
 * exists). A new string; NULL with GC_ERR_IO recorded when it cannot be created. */
char *gc_fetch_scratch_new(const char *out);
/* Removes the scratch folders of `out` whose fetch is no longer running; *removed: how many.
 * GC_ERR_IO naming the folder when one cannot be removed. */
gc_status gc_fetch_scratch_remove_stale(const char *out, int *removed);
/* Removes a scratch folder and everything in it (rm -r, symbolic links not followed). */
gc_status gc_fetch_scratch_remove(const char *path);

#endif
