/* libFuzzer target for Slurm's compressed lists (dist/slurm.c), what a job step's environment
 * holds in SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE. The input's first byte picks a
 * node (0 to 255), the rest up to the first NUL is a host list, the rest after it a tasks-per-
 * node list. Each must be refused with GC_ERR_FORMAT and one line naming its variable, or
 * read: a first host that fits, is not empty, starts with a letter or a digit and holds only
 * name characters and digits, every one of them in the list; a count of tasks from 1 to 2^20. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist/slurm.h"
#include "gradcache/dist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool refused_properly(gc_status status, const char *what) {
    return status == GC_ERR_FORMAT && strstr(gc_last_error(), what) && !strchr(gc_last_error(), '\n');
}

static bool name_character(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' || c == '_';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    text[size] = '\0';
    const char *hosts = text, *tasks_list = text + strlen(text) + 1; /* text[size] is a NUL too */
    char host[GC_DIST_ADDR_MAX];
    gc_status status = gc_slurm_first_host("SLURM_STEP_NODELIST", hosts, host, sizeof host);
    if (status == GC_OK) {
        size_t length = strlen(host);
        if (length == 0 || length >= sizeof host || !name_character(host[0]) || host[0] == '-' || host[0] == '.' ||
            host[0] == '_')
            abort();
        for (size_t i = 0; i < length; i++)
            if (!name_character(host[i]) || !strchr(hosts, host[i])) abort();
    } else if (!refused_properly(status, "SLURM_STEP_NODELIST")) {
        abort();
    }
    int tasks = 0;
    status = gc_slurm_tasks_on_node("SLURM_STEP_TASKS_PER_NODE", tasks_list, data[0], &tasks);
    if (status == GC_OK ? tasks < 1 || tasks > (1 << 20) : !refused_properly(status, "SLURM_STEP_TASKS_PER_NODE")) abort();
    gc_clear_error();
    free(text);
    return 0;
}
