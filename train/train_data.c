/* The datasets of a run (see train_data.h). */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "train_data.h"

/* How many datasets `list` names: 0, with the error set, when one is empty or there are
 * more than GC_MAX_DATASETS. */
static int count_elements(const char *list) {
    int count = 1;
    for (const char *c = list;; c++) {
        if ((*c == ',' || !*c) && (c == list || c[-1] == ',')) {
            gc_set_error(GC_ERR_CONFIG, "'%.200s': dataset %d is empty (datasets are separated by single commas)",
                         list, count);
            return 0;
        }
        if (!*c) return count;
        if (*c == ',' && ++count > GC_MAX_DATASETS) {
            gc_set_error(GC_ERR_CONFIG, "'%.200s': more than %d datasets", list, GC_MAX_DATASETS);
            return 0;
        }
    }
}

gc_status gc_train_data_read(const char *list, gc_train_data *data) {
    *data = (gc_train_data){0};
    int count = count_elements(list);
    if (!count) return GC_ERR_CONFIG;
    data->pairs = calloc((size_t)count, sizeof *data->pairs);
    data->names = calloc((size_t)count, sizeof *data->names);
    data->paths = calloc((size_t)count, sizeof *data->paths);
    if (!data->pairs || !data->names || !data->paths) gc_fatal("train_data: out of host memory for %d datasets", count);
    data->count = count;
    const char *start = list;
    for (int d = 0; d < count; d++) {
        size_t length = strcspn(start, ",");
        if (!(data->names[d] = strndup(start, length))) gc_fatal("train_data: out of host memory");
        start += length + 1;
        /* the log names each of several in JSON */
        if (count > 1 && !gc_json_utf8_valid(data->names[d], length)) {
            gc_set_error(GC_ERR_CONFIG, "dataset %d's name is not UTF-8", d + 1);
            gc_train_data_free(data);
            return GC_ERR_CONFIG;
        }
        gc_status status = gc_dataset_pairs_read(data->names[d], "train", &data->pairs[d], &data->paths[d]);
        if (status != GC_OK) {
            gc_train_data_free(data);
            return status;
        }
    }
    return GC_OK;
}

void gc_train_data_free(gc_train_data *data) {
    for (int d = 0; d < data->count; d++) {
        gc_pairs_free(&data->pairs[d]);
        free(data->names[d]);
        free(data->paths[d]);
    }
    free(data->pairs);
    free(data->names);
    free(data->paths);
    *data = (gc_train_data){0};
}
