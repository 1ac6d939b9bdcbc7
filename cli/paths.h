/* File paths of the trainer's inputs and outputs. */
#ifndef GC_CLI_PATHS_H
#define GC_CLI_PATHS_H

#include "gradcache/error.h"

/* dir + "/" + name, in a new string (free it). */
char *gc_path_join(const char *dir, const char *name);
/* The folder holding `path` ("." for a bare name, "/" for one at the root), in a new string:
 * what creating `path` there needs, and where its siblings are. */
char *gc_path_parent(const char *path);
/* A dataset argument: a folder means its file `split`.tsv ("train", "dev"); anything else
 * is the pair file itself. A new string. */
char *gc_data_path(const char *path, const char *split);
/* A file inside a run folder, or the path itself when it names a file (eval --model). */
char *gc_run_file(const char *path, const char *name);
/* Creates the folder and any missing parents (mkdir -p); GC_ERR_IO naming it on failure. */
gc_status gc_make_directories(const char *path);

#endif
