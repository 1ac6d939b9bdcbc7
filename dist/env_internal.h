/* The readers of a distributed run's environment (env.c: torchrun's variables and the choice
 * among launchers; env_cluster.c: Slurm's and MPI's) and what they share. Private to dist/. */
#ifndef GC_DIST_ENV_INTERNAL_H
#define GC_DIST_ENV_INTERNAL_H

#include <stdbool.h>

#include "gradcache/dist.h"

/* `text` for a one-line message: at most 40 bytes, a control byte as \xNN. */
const char *gc_env_shown(const char *text, char *buf, size_t size);
/* The integer in variable `name` within [low, high] (plain decimal digits, no sign but '-', no
 * white space); *value = fallback when unset. GC_ERR_FORMAT naming the variable. */
gc_status gc_env_read_int(const char *name, long low, long high, long fallback, int *value);
/* The address in variable `name` (unset or empty: addr left as it is) into
 * addr[GC_DIST_ADDR_MAX]; GC_ERR_FORMAT when it is too long. */
gc_status gc_env_read_addr(const char *name, char *addr);
/* MASTER_PORT when set, else `fallback` (a port derived from the job, or torchrun's 29500). */
gc_status gc_env_read_port(gc_dist_env *env, int fallback);

/* The world as each launcher describes it: rank, sizes, master address and port
 * (env_cluster.c). */
gc_status gc_env_read_slurm(gc_dist_env *env);
gc_status gc_env_read_mpi(gc_dist_env *env);

#endif
