/* The environment of a distributed run: torchrun's variables, read strictly. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/dist.h"
#include "secret.h"

/* `text` for a one-line message: at most 40 bytes, a control byte as \xNN. */
static const char *shown(const char *text, char *buf, size_t size) {
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c && used + 5 < size && c - (const unsigned char *)text < 40;
         c++)
        used += (size_t)snprintf(buf + used, size - used, *c < 0x20 || *c == 0x7f ? "\\x%02X" : "%c", *c);
    buf[used] = '\0';
    return buf;
}

/* The address in variable `name` (unset: left as it is) into addr[GC_DIST_ADDR_MAX]. */
static gc_status read_addr(const char *name, char *addr) {
    const char *text = getenv(name);
    if (!text || !*text) return GC_OK;
    if (strlen(text) >= GC_DIST_ADDR_MAX) {
        gc_set_error(GC_ERR_FORMAT, "%s is %zu characters long (at most %d)", name, strlen(text), GC_DIST_ADDR_MAX - 1);
        return GC_ERR_FORMAT;
    }
    snprintf(addr, GC_DIST_ADDR_MAX, "%s", text);
    return GC_OK;
}

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
    /* strtol skips leading white space and takes a '+': the value is the number alone */
    bool plain = (text[0] >= '0' && text[0] <= '9') || text[0] == '-';
    if (!plain || errno || end == text || *end || parsed < low || parsed > high) {
        char value_text[200];
        gc_set_error(GC_ERR_FORMAT, "%s='%s': expected an integer from %ld to %ld", name,
                     shown(text, value_text, sizeof value_text), low, high);
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
    status = read_addr("MASTER_ADDR", env->master_addr);
    if (status == GC_OK) status = read_addr("GC_DIST_BIND", env->bind_addr);
    if (status == GC_OK) status = read_int("MASTER_PORT", 1, 65535, 29500, &env->master_port);
    /* a world of one connects to nothing: it needs no secret */
    if (status == GC_OK && env->world_size > 1) status = gc_dist_secret_from_env(&env->secret);
    return status;
}

double gc_dist_default_timeout(void) {
    const char *text = getenv("GC_DIST_TIMEOUT");
    if (!text) return 600;
    char *end;
    double seconds = strtod(text, &end);
    if (end == text || *end || !(seconds > 0) || seconds > 1e7) {
        char value_text[200];
        gc_set_error(GC_ERR_FORMAT, "GC_DIST_TIMEOUT='%s': expected a positive number of seconds",
                     shown(text, value_text, sizeof value_text));
        return -1;
    }
    return seconds;
}
