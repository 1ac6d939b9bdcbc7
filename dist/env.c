/* The environment of a distributed run: torchrun's variables, read strictly. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/dist.h"

/* The integer in variable `name` within [low, high]; *value = fallback when unset. */
static gc_status read_int(const char *name, long low, long high, long fallback, int *value) {
    const char *text = getenv(name);
    if (!text) {
        *value = (int)fallback;
        return GC_OK;
    }
    char *end;
    errno = 0;
    long parsed = strtol(text, &end, 10);
    if (errno || end == text || *end || text[0] == ' ' || text[0] == '+' || parsed < low || parsed > high) {
        gc_set_error(GC_ERR_FORMAT, "%s='%s': expected an integer from %ld to %ld", name, text, low, high);
        return GC_ERR_FORMAT;
    }
    *value = (int)parsed;
    return GC_OK;
}

gc_status gc_dist_env_read(gc_dist_env *env) {
    *env = (gc_dist_env){.world_size = 1, .local_world_size = 1};
    snprintf(env->master_addr, sizeof env->master_addr, "127.0.0.1");
    if (!getenv("WORLD_SIZE")) return GC_OK;
    env->launched = true;
    gc_status status = read_int("WORLD_SIZE", 1, 1 << 20, 1, &env->world_size);
    if (status == GC_OK) status = read_int("RANK", 0, env->world_size - 1, -1, &env->rank);
    if (status == GC_OK && env->rank < 0) {
        gc_set_error(GC_ERR_FORMAT, "WORLD_SIZE=%d is set but RANK is not", env->world_size);
        return GC_ERR_FORMAT;
    }
    if (status == GC_OK) status = read_int("LOCAL_WORLD_SIZE", 1, env->world_size, env->world_size, &env->local_world_size);
    if (status == GC_OK) status = read_int("LOCAL_RANK", 0, env->local_world_size - 1, env->rank % env->local_world_size,
                                           &env->local_rank);
    if (status != GC_OK) return status;
    const char *addr = getenv("MASTER_ADDR");
    bool needs_master = env->world_size > 1;
    if (needs_master && (!addr || !*addr || !getenv("MASTER_PORT"))) {
        gc_set_error(GC_ERR_FORMAT, "WORLD_SIZE=%d needs MASTER_ADDR and MASTER_PORT (where rank 0 serves the store)",
                     env->world_size);
        return GC_ERR_FORMAT;
    }
    if (addr && *addr) {
        if (strlen(addr) >= sizeof env->master_addr) {
            gc_set_error(GC_ERR_FORMAT, "MASTER_ADDR is %zu characters long (at most %zu)", strlen(addr),
                         sizeof env->master_addr - 1);
            return GC_ERR_FORMAT;
        }
        snprintf(env->master_addr, sizeof env->master_addr, "%s", addr);
    }
    return read_int("MASTER_PORT", 1, 65535, 29500, &env->master_port);
}

double gc_dist_default_timeout(void) {
    const char *text = getenv("GC_DIST_TIMEOUT");
    if (!text) return 600;
    char *end;
    double seconds = strtod(text, &end);
    if (end == text || *end || !(seconds > 0) || seconds > 1e7) {
        gc_set_error(GC_ERR_FORMAT, "GC_DIST_TIMEOUT='%s': expected a positive number of seconds", text);
        return -1;
    }
    return seconds;
}
