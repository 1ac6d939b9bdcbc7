/* The environment of a distributed run, read strictly: which launcher started this process
 * (the first, in the order of precedence of gc_dist_env_read, whose variables are set), the
 * world it describes, the interface to bind and the run's secret. torchrun's variables are
 * read here, Slurm's and MPI's in env_cluster.c. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env_internal.h"
#include "secret.h"

const char *gc_env_shown(const char *text, char *buf, size_t size) {
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c && used + 5 < size && c - (const unsigned char *)text < 40;
         c++)
        used += (size_t)snprintf(buf + used, size - used, *c < 0x20 || *c == 0x7f ? "\\x%02X" : "%c", *c);
    buf[used] = '\0';
    return buf;
}

gc_status gc_env_read_addr(const char *name, char *addr) {
    const char *text = getenv(name);
    if (!text || !*text) return GC_OK;
    if (strlen(text) >= GC_DIST_ADDR_MAX) {
        gc_set_error(GC_ERR_FORMAT, "%s is %zu characters long (at most %d)", name, strlen(text), GC_DIST_ADDR_MAX - 1);
        return GC_ERR_FORMAT;
    }
    snprintf(addr, GC_DIST_ADDR_MAX, "%s", text);
    return GC_OK;
}

gc_status gc_env_read_int(const char *name, long low, long high, long fallback, int *value) {
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
                     gc_env_shown(text, value_text, sizeof value_text), low, high);
        return GC_ERR_FORMAT;
    }
    *value = (int)parsed;
    return GC_OK;
}

gc_status gc_env_read_port(gc_dist_env *env, int fallback) {
    return gc_env_read_int("MASTER_PORT", 1, 65535, fallback, &env->master_port);
}

/* torchrun's variables: WORLD_SIZE and RANK, LOCAL_WORLD_SIZE and LOCAL_RANK (defaults: every
 * process on this machine, RANK's place among them), and MASTER_ADDR and MASTER_PORT, which a
 * world of several needs. */
static gc_status read_torchrun(gc_dist_env *env) {
    gc_status status = gc_env_read_int("WORLD_SIZE", 1, 1 << 20, 1, &env->world_size);
    if (status == GC_OK) status = gc_env_read_int("RANK", 0, env->world_size - 1, -1, &env->rank);
    if (status == GC_OK && env->rank < 0) {
        gc_set_error(GC_ERR_FORMAT, "WORLD_SIZE=%d is set but RANK is not", env->world_size);
        return GC_ERR_FORMAT;
    }
    if (status == GC_OK) status = gc_env_read_int("LOCAL_WORLD_SIZE", 1, env->world_size, env->world_size, &env->local_world_size);
    if (status == GC_OK) status = gc_env_read_int("LOCAL_RANK", 0, env->local_world_size - 1, env->rank % env->local_world_size,
                                                  &env->local_rank);
    if (status != GC_OK) return status;
    const char *addr = getenv("MASTER_ADDR");
    if (env->world_size > 1 && (!addr || !*addr || !getenv("MASTER_PORT"))) {
        gc_set_error(GC_ERR_FORMAT, "WORLD_SIZE=%d needs MASTER_ADDR and MASTER_PORT (where rank 0 serves the store)",
                     env->world_size);
        return GC_ERR_FORMAT;
    }
    status = gc_env_read_addr("MASTER_ADDR", env->master_addr);
    return status == GC_OK ? gc_env_read_port(env, 29500) : status;
}

/* The launcher whose variables are set, in the order of precedence. An MPI launcher inside a
 * Slurm allocation starts its processes through daemons that srun started, whose SLURM_
 * variables describe the daemons: MPI's come first. A Slurm batch script itself has
 * SLURM_PROCID but no SLURM_STEP_ID: it is one process, not a task of a step. */
static gc_dist_launcher detect(void) {
    if (getenv("WORLD_SIZE")) return GC_DIST_TORCHRUN;
    if (getenv("OMPI_COMM_WORLD_SIZE")) return GC_DIST_OPENMPI;
    if (getenv("PMI_SIZE")) return GC_DIST_PMI;
    if (getenv("SLURM_PROCID") && getenv("SLURM_STEP_ID")) return GC_DIST_SLURM;
    return GC_DIST_ALONE;
}

gc_status gc_dist_env_read(gc_dist_env *env) {
    *env = (gc_dist_env){.world_size = 1, .local_world_size = 1, .launcher = detect()};
    snprintf(env->master_addr, sizeof env->master_addr, "127.0.0.1");
    env->launched = env->launcher != GC_DIST_ALONE;
    gc_status status = GC_OK;
    switch (env->launcher) {
    case GC_DIST_ALONE: return GC_OK;
    case GC_DIST_TORCHRUN: status = read_torchrun(env); break;
    case GC_DIST_OPENMPI:
    case GC_DIST_PMI: status = gc_env_read_mpi(env); break;
    case GC_DIST_SLURM: status = gc_env_read_slurm(env); break;
    }
    if (status == GC_OK) status = gc_env_read_addr("GC_DIST_BIND", env->bind_addr);
    /* a world of one connects to nothing: it needs no secret */
    if (status == GC_OK && env->world_size > 1) status = gc_dist_secret_from_env(&env->secret);
    return status;
}

const char *gc_dist_launcher_name(gc_dist_launcher launcher) {
    switch (launcher) {
    case GC_DIST_ALONE: return "one process (no launcher's variables)";
    case GC_DIST_TORCHRUN: return "torchrun's variables (gradcache launch, torchrun)";
    case GC_DIST_OPENMPI: return "Open MPI (mpirun)";
    case GC_DIST_PMI: return "PMI (mpiexec of MPICH or Intel MPI, srun --mpi=pmi2)";
    case GC_DIST_SLURM: return "Slurm (srun)";
    }
    gc_fatal("dist_launcher_name: no launcher %d", (int)launcher);
}

double gc_dist_default_timeout(void) {
    const char *text = getenv("GC_DIST_TIMEOUT");
    if (!text) return 600;
    char *end;
    double seconds = strtod(text, &end);
    if (end == text || *end || !(seconds > 0) || seconds > 1e7) {
        char value_text[200];
        gc_set_error(GC_ERR_FORMAT, "GC_DIST_TIMEOUT='%s': expected a positive number of seconds",
                     gc_env_shown(text, value_text, sizeof value_text));
        return -1;
    }
    return seconds;
}
