/* A model folder's weights (nn/pretrained/layout.h): model.safetensors, or the shards that
 * model.safetensors.index.json names (transformers' form for large models). The index is
 * outside input like the rest: a shard's name must be a plain file name of the folder (no
 * path), each weight it lists must be in the shard it names, and no weight may be in two
 * shards, so that a name means one tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json_file.h"
#include "nn/pretrained/layout.h"

/* The largest index read: a few hundred bytes per weight, so far beyond any model's. */
#define MAX_INDEX (16u << 20)
#define MAX_SHARDS 4096

static gc_status no_memory(const char *what) {
    gc_set_error(GC_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
    return GC_ERR_OUT_OF_MEMORY;
}

/* A file of the folder as a new string: dir "/" name. */
static char *folder_path(const char *dir, const char *name) {
    size_t size = strlen(dir) + strlen(name) + 2;
    char *path = malloc(size);
    if (path) snprintf(path, size, "%s/%s", dir, name);
    return path;
}

/* Appends the file at `path` (taken over) to `files`, opened header only or whole. */
static gc_status add_file(gc_weight_files *files, char *path, bool header_only) {
    gc_safetensors **grown = realloc(files->files, (size_t)(files->count + 1) * sizeof *grown);
    char **paths = grown ? realloc(files->paths, (size_t)(files->count + 1) * sizeof *paths) : NULL;
    if (grown) files->files = grown;
    if (paths) files->paths = paths;
    if (!path || !grown || !paths) {
        free(path);
        return no_memory("weights");
    }
    files->paths[files->count] = path;
    gc_status status = header_only ? gc_safetensors_open_header(path, &files->files[files->count])
                                   : gc_safetensors_open(path, &files->files[files->count]);
    if (status == GC_OK) files->count++;
    else free(path);
    return status;
}

/* The index of shard `name` in `files`, opening it (its path under `dir`) when new. */
static gc_status shard_of(gc_weight_files *files, const char *dir, const char *index, const char *name, int *shard) {
    for (*shard = 0; *shard < files->count; ++*shard)
        if (!strcmp(files->paths[*shard] + strlen(dir) + 1, name)) return GC_OK; /* paths are dir "/" name */
    if (!name[0] || strchr(name, '/') || name[0] == '.' || strlen(name) > 255)
        return gc_json_file_error(index, "weight_map names the shard \"%.80s\", not a file name of the folder", name);
    if (files->count == MAX_SHARDS) return gc_json_file_error(index, "weight_map names more than %d shards", MAX_SHARDS);
    *shard = files->count;
    return add_file(files, folder_path(dir, name), true);
}

/* No weight in two shards. */
static gc_status check_distinct(const gc_weight_files *files, const char *index) {
    for (int f = 0; f < files->count; f++)
        for (int i = 0; i < gc_safetensors_count(files->files[f]); i++)
            for (int other = f + 1; other < files->count; other++)
                if (gc_safetensors_find(files->files[other], gc_safetensors_name(files->files[f], i)))
                    return gc_json_file_error(index, "weight '%.80s' is in both %s and %s",
                                              gc_safetensors_name(files->files[f], i), files->files[f]->name,
                                              files->files[other]->name);
    return GC_OK;
}

/* The shards of the index at `index` (header only). */
static gc_status open_shards(gc_weight_files *files, const char *dir, const char *index) {
    gc_json *document;
    gc_status status = gc_json_file_read(index, MAX_INDEX, &document);
    if (status != GC_OK) return status;
    const gc_json *map = gc_json_member(document, "weight_map");
    if (!map || map->type != GC_JSON_OBJECT || !map->count)
        status = gc_json_file_error(index, "no \"weight_map\" object of weights and shards");
    for (const gc_json *entry = map ? map->first : NULL; status == GC_OK && entry; entry = entry->next) {
        int shard = 0;
        if (entry->type != GC_JSON_STRING)
            status = gc_json_file_error(index, "weight_map: \"%.80s\" is %s, not a file name", entry->key,
                                        gc_json_type_name(entry->type));
        if (status == GC_OK) status = shard_of(files, dir, index, entry->string, &shard);
        if (status == GC_OK && !gc_safetensors_find(files->files[shard], entry->key))
            status = gc_json_file_error(index, "weight '%.80s' is not in %s, the shard it names", entry->key,
                                        files->files[shard]->name);
    }
    gc_json_free(document);
    return status == GC_OK ? check_distinct(files, index) : status;
}

gc_status gc_weight_files_open(const char *dir, gc_weight_files *files) {
    *files = (gc_weight_files){0};
    char *single = folder_path(dir, "model.safetensors"), *index = folder_path(dir, "model.safetensors.index.json");
    gc_status status = single && index ? GC_OK : no_memory(dir);
    struct stat info;
    if (status == GC_OK && stat(single, &info) == 0) {
        status = add_file(files, single, true);
        single = NULL;
    } else if (status == GC_OK && stat(index, &info) == 0) {
        status = open_shards(files, dir, index);
    } else if (status == GC_OK) {
        gc_set_error(GC_ERR_IO, "%s: neither model.safetensors nor model.safetensors.index.json is there", dir);
        status = GC_ERR_IO;
    }
    free(single);
    free(index);
    if (status != GC_OK) gc_weight_files_close(files);
    return status;
}

void gc_weight_files_close(gc_weight_files *files) {
    for (int i = 0; i < files->count; i++) {
        gc_safetensors_close(files->files[i]);
        free(files->paths[i]);
    }
    free(files->files);
    free(files->paths);
    *files = (gc_weight_files){0};
}
