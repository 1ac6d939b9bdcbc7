/* Files and folders written whole or not at all, the one way the library and the program
 * write what they keep: checkpoints and model files, training logs, datasets, charts, fetched
 * models.
 *
 * Everything is written under a temporary name next to its destination,
 * ".<name>.tmp.<pid>.<6 random characters>": in the destination's folder, so that the final
 * rename is atomic; hidden, so that nothing half-written looks like a result; named by the
 * writer's process, so that gc_remove_stale_temporaries can tell what a killed writer left
 * (its process is gone) from what a live one is writing now. A file is flushed and fsynced
 * before the rename, and the folder after it, so that a crash leaves the old version or the
 * new one, never part of one. A process on another machine (a shared folder) cannot be seen:
 * do not run two writers of one path there. */
#ifndef GRADCACHE_FILES_H
#define GRADCACHE_FILES_H

#include <stdio.h>

#include "gradcache/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_file_writer {
    FILE *file;      /* write here between gc_file_begin and gc_file_commit */
    char *path;      /* the destination */
    char *temporary; /* the temporary file next to it */
} gc_file_writer;

/* Creates the temporary file of `path` (mode 0666 less the umask, as fopen would give).
 * GC_OK, or GC_ERR_IO naming `path` (its folder missing or not writable). */
gc_status gc_file_begin(gc_file_writer *writer, const char *path);
/* Flushes, fsyncs and closes the temporary file, renames it to the destination and fsyncs the
 * folder; on any failure the temporary file is removed. GC_OK, or GC_ERR_IO naming the
 * destination. Either way the writer is done. */
gc_status gc_file_commit(gc_file_writer *writer);
/* Closes and removes the temporary file (nothing after gc_file_commit). */
void gc_file_abort(gc_file_writer *writer);

/* A folder built whole: an empty temporary folder of `path` (mode 0777 less the umask) in
 * *temporary (a new string). GC_ERR_IO naming `path` when it cannot be made. */
gc_status gc_folder_begin(const char *path, char **temporary);
/* Renames the folder `from` (the temporary, or a folder inside it: one file system) to
 * `path`, which must not exist or be an empty folder, and fsyncs path's folder. GC_ERR_IO
 * naming both on failure. */
gc_status gc_folder_commit(const char *from, const char *path);
/* Removes the folder and everything in it (symbolic links removed, not followed); GC_OK also
 * when it is not there. */
gc_status gc_folder_remove(const char *path);

/* Removes the temporaries of `path`, files or folders, whose writer process no longer
 * exists; this process's and a live one's are left alone. The count goes to *removed (if not
 * NULL). GC_OK also when the folder does not exist; GC_ERR_IO naming what cannot be listed or
 * removed. */
gc_status gc_remove_stale_temporaries(const char *path, int *removed);

#ifdef __cplusplus
}
#endif
#endif
