/* The world as a cluster's launchers describe it (include/gradcache/dist.h, gc_dist_env_read):
 * Slurm's srun and MPI's mpirun/mpiexec. Neither says where rank 0 serves the store, so the
 * master address and port follow the rules below unless MASTER_ADDR and MASTER_PORT are set. */
#include <stdio.h>
#include <stdlib.h>

#include "env_internal.h"
#include "slurm.h"

#define MAX_WORLD (1 << 20)

/* A variable the launcher always sets: unset is GC_ERR_FORMAT naming it. */
static gc_status required(const char *name, long low, long high, int *value) {
    gc_status status = gc_env_read_int(name, low, high, -1, value);
    if (status == GC_OK && *value < 0) {
        gc_set_error(GC_ERR_FORMAT, "%s is not set (%s)", name, gc_dist_launcher_name(GC_DIST_SLURM));
        return GC_ERR_FORMAT;
    }
    return status;
}

/* Several machines: the master is MASTER_ADDR, else `derived` (NULL: none can be), else an
 * error naming what is missing. One machine: MASTER_ADDR or loopback. */
static gc_status master_addr(gc_dist_env *env, bool one_machine, const char *derived, const char *missing) {
    if (getenv("MASTER_ADDR") && *getenv("MASTER_ADDR")) return gc_env_read_addr("MASTER_ADDR", env->master_addr);
    if (one_machine) return GC_OK; /* 127.0.0.1 */
    if (derived) {
        snprintf(env->master_addr, sizeof env->master_addr, "%s", derived);
        return GC_OK;
    }
    gc_set_error(GC_ERR_FORMAT, "%d processes on several machines need MASTER_ADDR (rank 0's host): %s",
                 env->world_size, missing);
    return GC_ERR_FORMAT;
}

/* Open MPI: OMPI_COMM_WORLD_SIZE and _RANK, _LOCAL_SIZE and _LOCAL_RANK. PMI (MPICH's and Intel
 * MPI's Hydra, srun --mpi=pmi2): PMI_SIZE and PMI_RANK, and Hydra's MPI_LOCALNRANKS and
 * MPI_LOCALRANKID where set (else every process on this machine). The master: MASTER_ADDR, or
 * 127.0.0.1 when every process runs on this machine; the port MASTER_PORT, or torchrun's 29500. */
gc_status gc_env_read_mpi(gc_dist_env *env) {
    bool open_mpi = env->launcher == GC_DIST_OPENMPI;
    const char *size = open_mpi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE", *rank = open_mpi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK";
    const char *local_size = open_mpi ? "OMPI_COMM_WORLD_LOCAL_SIZE" : "MPI_LOCALNRANKS";
    const char *local_rank = open_mpi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "MPI_LOCALRANKID";
    gc_status status = gc_env_read_int(size, 1, MAX_WORLD, 1, &env->world_size);
    if (status == GC_OK) status = gc_env_read_int(rank, 0, env->world_size - 1, -1, &env->rank);
    if (status == GC_OK && env->rank < 0) {
        gc_set_error(GC_ERR_FORMAT, "%s=%d is set but %s is not", size, env->world_size, rank);
        return GC_ERR_FORMAT;
    }
    if (status == GC_OK) status = gc_env_read_int(local_size, 1, env->world_size, env->world_size, &env->local_world_size);
    if (status == GC_OK)
        status = gc_env_read_int(local_rank, 0, env->local_world_size - 1, env->rank % env->local_world_size, &env->local_rank);
    char missing[160];
    snprintf(missing, sizeof missing, "%s=%d here of %s=%d, and MPI does not say where rank 0 runs", local_size,
             env->local_world_size, size, env->world_size);
    if (status == GC_OK) status = master_addr(env, env->local_world_size == env->world_size, NULL, missing);
    return status == GC_OK ? gc_env_read_port(env, 29500) : status;
}

/* How many tasks run on this node: SLURM_STEP_TASKS_PER_NODE (srun's), else
 * SLURM_TASKS_PER_NODE (the job's), else every task when the step has one node. */
static gc_status slurm_local_size(gc_dist_env *env, int nnodes, int node) {
    const char *names[] = {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"};
    for (int i = 0; i < 2; i++) {
        const char *list = getenv(names[i]);
        if (!list) continue;
        gc_status status = gc_slurm_tasks_on_node(names[i], list, node, &env->local_world_size);
        if (status == GC_OK && env->local_world_size > env->world_size) {
            gc_set_error(GC_ERR_FORMAT, "%s='%.40s' gives node %d %d tasks, more than SLURM_NTASKS=%d", names[i], list,
                         node, env->local_world_size, env->world_size);
            return GC_ERR_FORMAT;
        }
        return status;
    }
    if (nnodes == 1) return GC_OK; /* every task */
    gc_set_error(GC_ERR_FORMAT, "SLURM_NNODES=%d but neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set",
                 nnodes);
    return GC_ERR_FORMAT;
}

/* srun: SLURM_NTASKS, SLURM_PROCID, SLURM_NNODES, SLURM_NODEID and SLURM_LOCALID, the tasks on
 * this node from the tasks-per-node list. The master: MASTER_ADDR, else 127.0.0.1 on one node,
 * else the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), where Slurm's block
 * and cyclic distributions put task 0; the port: MASTER_PORT, else 10000 + SLURM_JOB_ID mod
 * 10000 (two jobs on one node then differ unless their ids are 10000 apart; two steps of one
 * job running at once need MASTER_PORT). */
gc_status gc_env_read_slurm(gc_dist_env *env) {
    int nnodes = 0, node = 0, job = -1;
    gc_status status = required("SLURM_NTASKS", 1, MAX_WORLD, &env->world_size);
    if (status == GC_OK) status = required("SLURM_PROCID", 0, env->world_size - 1, &env->rank);
    if (status == GC_OK) status = required("SLURM_NNODES", 1, env->world_size, &nnodes);
    if (status == GC_OK) status = required("SLURM_NODEID", 0, nnodes - 1, &node);
    env->local_world_size = env->world_size;
    if (status == GC_OK) status = slurm_local_size(env, nnodes, node);
    if (status == GC_OK) status = required("SLURM_LOCALID", 0, env->local_world_size - 1, &env->local_rank);
    if (status != GC_OK) return status;
    char first[GC_DIST_ADDR_MAX];
    const char *list_name = getenv("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    const char *list = getenv(list_name);
    bool derive = nnodes > 1 && !(getenv("MASTER_ADDR") && *getenv("MASTER_ADDR"));
    if (derive && list) status = gc_slurm_first_host(list_name, list, first, sizeof first);
    if (status == GC_OK) status = master_addr(env, nnodes == 1, list ? first : NULL, "no SLURM_STEP_NODELIST or SLURM_JOB_NODELIST");
    if (status == GC_OK) status = gc_env_read_int("SLURM_JOB_ID", 0, 2147483647, -1, &job);
    if (status == GC_OK && job < 0 && !getenv("MASTER_PORT")) {
        gc_set_error(GC_ERR_FORMAT, "SLURM_JOB_ID is not set: MASTER_PORT is needed (the port is derived from the job)");
        return GC_ERR_FORMAT;
    }
    return status == GC_OK ? gc_env_read_port(env, 10000 + job % 10000) : status;
}
