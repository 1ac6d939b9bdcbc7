/* Which launcher started a process, and the world it describes (dist/env.c, env_cluster.c):
 * Slurm's srun (ranks, tasks per node, the master from the compressed host list, the port
 * from the job id), Open MPI's and PMI's mpirun/mpiexec, torchrun's variables first of all;
 * malformed and missing values refused naming the variable; and Slurm's two list parsers
 * (dist/slurm.c) on well-formed and malformed lists. No Slurm or MPI is needed: the variables
 * are set as they would be. */
#include "check.h"
#include "dist/slurm.h"
#include "dist_spawn.h"

#define SECRET "GC_DIST_SECRET=" DIST_TEST_SECRET

/* Forgets every launcher's variables, then sets "NAME=value" entries (NULL-terminated). */
static void set_only(const char *const *assignments) {
    dist_forget_launchers();
    for (int i = 0; assignments[i]; i++) {
        char name[64];
        const char *equals = strchr(assignments[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(equals - assignments[i]), assignments[i]);
        setenv(name, equals + 1, 1);
    }
}

typedef struct world_case {
    const char *env[20];
    gc_dist_launcher launcher;
    int rank, world, local_rank, local_world;
    const char *master;
    int port;
} world_case;

static void check_world(const world_case *c) {
    set_only(c->env);
    gc_dist_env env;
    gc_status status = gc_dist_env_read(&env);
    CHECK_MSG(status == GC_OK, "%s: %s", c->env[0], gc_last_error());
    if (status != GC_OK) return;
    CHECK_MSG(env.launcher == c->launcher && env.launched == (c->launcher != GC_DIST_ALONE), "%s: launcher %s",
              c->env[0], gc_dist_launcher_name(env.launcher));
    CHECK_MSG(env.rank == c->rank && env.world_size == c->world && env.local_rank == c->local_rank &&
                  env.local_world_size == c->local_world,
              "%s: rank %d of %d, local %d of %d", c->env[0], env.rank, env.world_size, env.local_rank,
              env.local_world_size);
    CHECK_MSG(strcmp(env.master_addr, c->master) == 0 && env.master_port == c->port, "%s: master %s:%d", c->env[0],
              env.master_addr, env.master_port);
}

static void check_refused(const char *const *assignments, const char *want) {
    set_only(assignments);
    gc_dist_env env;
    CHECK_MSG(gc_dist_env_read(&env) == GC_ERR_FORMAT && strstr(gc_last_error(), want) && !strchr(gc_last_error(), '\n'),
              "wanted '%s', got '%s'", want, gc_last_error());
}

#define STEP "SLURM_STEP_ID=0", "SLURM_JOB_ID=123456"

static void check_worlds(void) {
    const world_case cases[] = {
        /* srun -N 2 --ntasks-per-node 4: task 5 is the second on node 1 */
        {{"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_NNODES=2", "SLURM_NODEID=1", "SLURM_LOCALID=1",
          "SLURM_STEP_TASKS_PER_NODE=4(x2)", "SLURM_STEP_NODELIST=node[01-04,07]", STEP, SECRET},
         GC_DIST_SLURM, 5, 8, 1, 4, "node01", 13456},
        /* the job's lists when the step's are not set; uneven tasks per node */
        {{"SLURM_PROCID=3", "SLURM_NTASKS=5", "SLURM_NNODES=3", "SLURM_NODEID=1", "SLURM_LOCALID=0",
          "SLURM_TASKS_PER_NODE=3,1(x2)", "SLURM_JOB_NODELIST=a[1-2],b3", STEP, SECRET},
         GC_DIST_SLURM, 3, 5, 0, 1, "a1", 13456},
        /* one node: loopback, every task local */
        {{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=1", "SLURM_NODEID=0", "SLURM_LOCALID=1", STEP, SECRET},
         GC_DIST_SLURM, 1, 2, 1, 2, "127.0.0.1", 13456},
        /* MASTER_ADDR and MASTER_PORT win over the derived ones */
        {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NNODES=2", "SLURM_NODEID=0", "SLURM_LOCALID=0",
          "SLURM_STEP_TASKS_PER_NODE=1(x2)", "SLURM_STEP_NODELIST=n[1-2]", "MASTER_ADDR=head", "MASTER_PORT=4242", STEP,
          SECRET},
         GC_DIST_SLURM, 0, 2, 0, 1, "head", 4242},
        /* the batch script: SLURM_PROCID without a step is one process */
        {{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=7"}, GC_DIST_ALONE, 0, 1, 0, 1, "127.0.0.1", 0},
        /* mpirun -n 4 on one machine */
        {{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=2",
          "OMPI_COMM_WORLD_LOCAL_SIZE=4", SECRET},
         GC_DIST_OPENMPI, 2, 4, 2, 4, "127.0.0.1", 29500},
        /* across machines with MASTER_ADDR; inside a Slurm allocation MPI's variables win */
        {{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
          "OMPI_COMM_WORLD_LOCAL_SIZE=2", "MASTER_ADDR=node07", "SLURM_PROCID=1", "SLURM_NTASKS=2", STEP, SECRET},
         GC_DIST_OPENMPI, 3, 4, 1, 2, "node07", 29500},
        /* Hydra's mpiexec, inside Slurm too */
        {{"PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2", "SLURM_PROCID=0", STEP, SECRET},
         GC_DIST_PMI, 1, 2, 1, 2, "127.0.0.1", 29500},
        {{"PMI_RANK=0", "PMI_SIZE=1"}, GC_DIST_PMI, 0, 1, 0, 1, "127.0.0.1", 29500},
        /* torchrun's variables first of all */
        {{"WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29501", "OMPI_COMM_WORLD_SIZE=4",
          "OMPI_COMM_WORLD_RANK=0", "PMI_SIZE=8", "PMI_RANK=0", "SLURM_PROCID=3", STEP, SECRET},
         GC_DIST_TORCHRUN, 1, 2, 1, 2, "10.0.0.1", 29501},
        {{NULL}, GC_DIST_ALONE, 0, 1, 0, 1, "127.0.0.1", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_world(&cases[i]);
    CHECK(strcmp(gc_dist_launcher_name(GC_DIST_SLURM), "Slurm (srun)") == 0);
}

#define SLURM_2x2 "SLURM_NTASKS=4", "SLURM_NNODES=2", "SLURM_NODEID=1", "SLURM_LOCALID=1"

static void check_malformed(void) {
    struct {
        const char *env[16];
        const char *want;
    } cases[] = {
        {{"SLURM_PROCID=4", SLURM_2x2, "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_STEP_NODELIST=n[1-2]", STEP, SECRET},
         "SLURM_PROCID='4': expected an integer from 0 to 3"},
        {{"SLURM_PROCID=1", "SLURM_NNODES=1", "SLURM_NODEID=0", "SLURM_LOCALID=0", STEP}, "SLURM_NTASKS is not set"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_STEP_NODELIST=node[04-01]", STEP, SECRET},
         "SLURM_STEP_NODELIST='node[04-01]': a range ends below its start at character 9"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_JOB_NODELIST=node[01-04", STEP, SECRET},
         "SLURM_JOB_NODELIST='node[01-04': expected ',', '-' or ']' at character 11"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_STEP_TASKS_PER_NODE=2(x2", "SLURM_STEP_NODELIST=n[1-2]", STEP, SECRET},
         "SLURM_STEP_TASKS_PER_NODE='2(x2': expected ')'"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_STEP_TASKS_PER_NODE=4", "SLURM_STEP_NODELIST=n[1-2]", STEP, SECRET},
         "SLURM_STEP_TASKS_PER_NODE='4' lists 1 nodes: none for node 1"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_STEP_TASKS_PER_NODE=1(x2)", "SLURM_STEP_NODELIST=n[1-2]", STEP, SECRET},
         "SLURM_LOCALID='1': expected an integer from 0 to 0"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_STEP_TASKS_PER_NODE=5(x2)", "SLURM_STEP_NODELIST=n[1-2]", STEP, SECRET},
         "more than SLURM_NTASKS=4"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_STEP_NODELIST=n[1-2]", STEP, SECRET}, "SLURM_NNODES=2 but neither"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_TASKS_PER_NODE=2(x2)", STEP, SECRET}, "need MASTER_ADDR"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_ID=0", SECRET},
         "SLURM_JOB_ID is not set: MASTER_PORT is needed"},
        {{"SLURM_PROCID=1", SLURM_2x2, "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_STEP_NODELIST=n[1-2]", STEP},
         "GC_DIST_SECRET_FILE"},
        {{"OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_SIZE=2", SECRET}, "OMPI_COMM_WORLD_RANK='x'"},
        {{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2", SECRET},
         "4 processes on several machines need MASTER_ADDR (rank 0's host): OMPI_COMM_WORLD_LOCAL_SIZE=2 here"},
        {{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "MASTER_PORT=0", SECRET}, "MASTER_PORT='0'"},
        {{"PMI_SIZE=2", SECRET}, "PMI_SIZE=2 is set but PMI_RANK is not"},
        {{"PMI_SIZE= 2", "PMI_RANK=0", SECRET}, "PMI_SIZE=' 2'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_refused(cases[i].env, cases[i].want);
}

static void check_host_lists(void) {
    const char *good[][2] = {{"node[01-04,07]", "node01"}, {"a[1-2],b3", "a1"}, {"rack[1-2]-n[01-16]", "rack1-n01"},
                             {"n1", "n1"}, {"x-1.y_z,w", "x-1.y_z"}, {"node[7]", "node7"}, {"a[001-100,200]x", "a001x"},
                             {"gpu[000000001-999999999]", "gpu000000001"}};
    char host[GC_DIST_ADDR_MAX];
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        gc_status status = gc_slurm_first_host("LIST", good[i][0], host, sizeof host);
        CHECK_MSG(status == GC_OK && strcmp(host, good[i][1]) == 0, "'%s': %s (%s)", good[i][0], host,
                  status == GC_OK ? "" : gc_last_error());
    }
    const char *bad[] = {"", ",a", "a,", "a,,b", "a[", "a[]", "a[1-]", "a[-1]", "a[2-1]", "a[1,]", "a[1-2", "a]",
                         "a b", "a[1[2]]", "[1-2]", "-a", "a[1234567890]", "a[1-2],[3]", "a\n", "a[1-2]]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gc_status status = gc_slurm_first_host("LIST", bad[i], host, sizeof host);
        CHECK_MSG(status == GC_ERR_FORMAT && strstr(gc_last_error(), "LIST='") && !strchr(gc_last_error(), '\n'),
                  "'%s' was not refused (%s)", bad[i], status == GC_OK ? host : gc_last_error());
    }
    /* the first host must fit; a later one may be long; the list is bounded */
    char *text = malloc(GC_SLURM_LIST_MAX + 2);
    REQUIRE(text);
    memset(text, 'h', GC_SLURM_LIST_MAX + 1);
    text[GC_SLURM_LIST_MAX + 1] = '\0';
    CHECK(gc_slurm_first_host("LIST", text, host, sizeof host) == GC_ERR_FORMAT && strstr(gc_last_error(), "longer"));
    text[GC_DIST_ADDR_MAX] = '\0';
    CHECK(gc_slurm_first_host("LIST", text, host, sizeof host) == GC_ERR_FORMAT && strstr(gc_last_error(), "too long"));
    text[0] = 'a', text[1] = ',';
    CHECK(gc_slurm_first_host("LIST", text, host, sizeof host) == GC_OK && strcmp(host, "a") == 0);
    free(text);
}

static void check_tasks_lists(void) {
    int want[] = {2, 2, 2, 1}, tasks;
    for (int node = 0; node < 4; node++)
        CHECK_MSG(gc_slurm_tasks_on_node("TASKS", "2(x3),1", node, &tasks) == GC_OK && tasks == want[node], "node %d: %d",
                  node, tasks);
    CHECK(gc_slurm_tasks_on_node("TASKS", "2(x3),1", 4, &tasks) == GC_ERR_FORMAT && strstr(gc_last_error(), "none for node 4"));
    const char *bad[] = {"", "0", "2(x0)", "2(3)", "2(x3", "2x3", "2,,1", "1048577", "2(x3),", ",2", "2(x1048577)", "+2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_MSG(gc_slurm_tasks_on_node("TASKS", bad[i], 0, &tasks) == GC_ERR_FORMAT && strstr(gc_last_error(), "TASKS='"),
                  "'%s' was not refused", bad[i]);
}

int main(void) {
    check_worlds();
    check_malformed();
    check_host_lists();
    check_tasks_lists();
    dist_forget_launchers();
    return gc_test_result();
}
