/* libFuzzer target for the reader of a distributed run's environment (dist/env.c): what a
 * launcher, or a user, sets in WORLD_SIZE, RANK, LOCAL_WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
 * MASTER_PORT, GC_DIST_TIMEOUT, GC_DIST_BIND and GC_DIST_SECRET, then Slurm's, Open MPI's and
 * PMI's (NAMES below; GC_DIST_SECRET_FILE is unset: a file is not fuzzed). The input is split at
 * NUL bytes into those values, in that order (a missing one, or one that is the byte 0x01
 * alone, is unset). A world of several read without error holds a secret of
 * GC_DIST_SECRET_MIN to GC_DIST_SECRET_MAX bytes, equal to GC_DIST_SECRET. Every value must be refused with GC_ERR_FORMAT and one line
 * naming the variable (a control character in the value shown escaped), or be read as a consistent world: 0 <= rank < world size, 0 <=
 * local rank < local world size <= world size, a master address, a port in [1, 65535] when
 * a launcher was found, and every integer of torchrun's accepted written in plain decimal
 * digits (no white space, no '+'). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcache/dist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const NAMES[] = {
    "WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GC_DIST_TIMEOUT",
    "GC_DIST_BIND", "GC_DIST_SECRET", "SLURM_PROCID", "SLURM_STEP_ID", "SLURM_NTASKS", "SLURM_NNODES", "SLURM_NODEID",
    "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
    "SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS", "MPI_LOCALRANKID"};
/* the variables that hold integers (those read by the launcher found) */
static const char *const INTEGERS[] = {"WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"};
enum { COUNT = sizeof NAMES / sizeof *NAMES };

/* True when the variable is unset or holds decimal digits alone (after an optional '-'). */
static bool plain_decimal(const char *name) {
    const char *text = getenv(name);
    if (!text) return true;
    if (*text == '-') text++;
    return *text && strspn(text, "0123456789") == strlen(text);
}

/* True when the message is one line naming one of the variables. */
static bool names_a_variable(const char *message) {
    if (strchr(message, '\n')) return false;
    for (int i = 0; i < COUNT; i++)
        if (strstr(message, NAMES[i])) return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size + 1);
    if (!copy) abort();
    memcpy(copy, data, size);
    copy[size] = '\0';
    const char *value = copy;
    for (int i = 0; i < COUNT; i++) {
        if (value > copy + size) {
            unsetenv(NAMES[i]);
            continue;
        }
        if (strcmp(value, "\x01") == 0) unsetenv(NAMES[i]); /* how a variable before others is left unset */
        else setenv(NAMES[i], value, 1);
        value += strlen(value) + 1;
    }
    unsetenv("GC_DIST_SECRET_FILE");
    gc_dist_env env;
    gc_status status = gc_dist_env_read(&env);
    if (status == GC_OK) {
        if (env.world_size < 1 || env.rank < 0 || env.rank >= env.world_size || env.local_world_size < 1 ||
            env.local_world_size > env.world_size || env.local_rank < 0 || env.local_rank >= env.local_world_size ||
            (env.launched && (env.master_port < 1 || env.master_port > 65535)))
            abort();
        for (size_t i = 0; env.launcher == GC_DIST_TORCHRUN && i < sizeof INTEGERS / sizeof *INTEGERS; i++)
            if (!plain_decimal(INTEGERS[i])) abort();
        if (env.launched != (env.launcher != GC_DIST_ALONE) || !env.master_addr[0] || !gc_dist_launcher_name(env.launcher))
            abort();
        const char *secret = getenv("GC_DIST_SECRET");
        if (env.world_size > 1 && (!secret || env.secret.size != strlen(secret) || env.secret.size < GC_DIST_SECRET_MIN ||
                                   env.secret.size > GC_DIST_SECRET_MAX ||
                                   memcmp(env.secret.bytes, secret, env.secret.size) != 0))
            abort();
    } else {
        if (status != GC_ERR_FORMAT || !names_a_variable(gc_last_error())) abort();
        gc_clear_error();
    }
    double timeout = gc_dist_default_timeout();
    if (!(timeout > 0 || (timeout == -1 && gc_last_status() == GC_ERR_FORMAT && names_a_variable(gc_last_error()))))
        abort();
    gc_clear_error();
    free(copy);
    return 0;
}
