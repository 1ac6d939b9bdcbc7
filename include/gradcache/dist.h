/* Distributed training: the processes of a run, how they find each other, and the
 * collectives they use to combine tensors.
 *
 * A run is WORLD_SIZE processes, each with a RANK in [0, WORLD_SIZE), started by
 * `gradcache launch`, torchrun, Slurm's srun or MPI's mpirun, each with the environment
 * variables of its ecosystem (gc_dist_env_read). Rank 0 serves a small key-value store at
 * MASTER_ADDR:MASTER_PORT (gc_store); through it the processes exchange what they need to
 * connect (addresses, NCCL's unique id) and then form a process group.
 *
 * Every connection of a run -- to the store, between the ranks -- opens with a handshake in
 * which both sides prove that they know the run's secret (an HMAC-SHA256 of fresh nonces; the
 * secret itself never crosses the network), so that nobody else can join, read the store or
 * pose as a rank. The secret is GC_DIST_SECRET_FILE's content or GC_DIST_SECRET (which
 * `gradcache launch` sets); the bytes exchanged after the handshake are neither encrypted nor
 * authenticated (docs/DESIGN.md, "Security").
 *
 * A process group runs collectives on tensors. Every rank must call the same collectives in
 * the same order with tensors of the same shape and dtype (all_gather and shift excepted: the
 * rows, or the sizes, may differ per rank); this is checked where it is cheap and is
 * otherwise a programmer error that a timeout turns into an error. Two backends share this interface:
 *   - GC_DIST_TCP: a ring of TCP connections between the ranks. all_reduce is written out
 *     as a reduce-scatter then an all-gather around the ring, in segments so that sending,
 *     receiving and adding overlap: the readable reference of "ring all-reduce" (gloo's
 *     role). It works on CPU tensors; CUDA tensors are staged through host memory.
 *   - GC_DIST_NCCL: NCCL over CUDA tensors, on a stream of its own ordered after the
 *     compute stream with events (CPU tensors are staged through the GPU).
 *
 * Every collective is started asynchronously (gc_*_start returns a gc_dist_work) and
 * completed by gc_dist_work_wait; until then the tensors it was given belong to it (the
 * caller must not read or write them). The blocking forms are start + wait. Works complete
 * in the order they were started.
 *
 * Failures: a peer that dies, hangs up or does not answer within the group's timeout
 * (default 10 minutes, GC_DIST_TIMEOUT seconds in the environment, or the options) makes
 * the collective fail with GC_ERR_PEER and a message naming the collective and the rank; the
 * group is then broken (every later collective fails at once) and its connections are
 * closed, so that the failure reaches every other rank quickly instead of a hang. */
#ifndef GRADCACHE_DIST_H
#define GRADCACHE_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradcache/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- the environment of a distributed run --- */

#define GC_DIST_ADDR_MAX 256
#define GC_DIST_SECRET_MIN 32   /* bytes: 256 bits when they are random */
#define GC_DIST_SECRET_MAX 1024
/* A connection (to the store, or to a rank) that has not finished the handshake within this
 * many seconds is closed. */
#define GC_DIST_HANDSHAKE_SECONDS 10.0

/* The run's secret: the key of the handshake's HMAC. */
typedef struct gc_dist_secret {
    size_t size;                        /* 0: none */
    uint8_t bytes[GC_DIST_SECRET_MAX];
} gc_dist_secret;

/* What started this process: whose variables gc_dist_env_read found. */
typedef enum gc_dist_launcher {
    GC_DIST_ALONE,    /* none: a single process */
    GC_DIST_TORCHRUN, /* WORLD_SIZE, RANK, ...: gradcache launch, torchrun, any launcher that sets them */
    GC_DIST_OPENMPI,  /* OMPI_COMM_WORLD_SIZE, ...: Open MPI's mpirun and mpiexec */
    GC_DIST_PMI,      /* PMI_SIZE, PMI_RANK: MPICH's and Intel MPI's mpiexec (Hydra), srun --mpi=pmi2 */
    GC_DIST_SLURM,    /* SLURM_PROCID, SLURM_NTASKS, ... in a job step: srun */
} gc_dist_launcher;
/* A phrase naming it, for the one line a program prints ("Slurm (srun)"). */
const char *gc_dist_launcher_name(gc_dist_launcher launcher);

typedef struct gc_dist_env {
    gc_dist_launcher launcher;
    bool launched;        /* a launcher's variables were set: this process is one of a distributed run */
    int rank;             /* in [0, world_size) */
    int world_size;       /* >= 1 */
    int local_rank;       /* this process's index on its machine */
    int local_world_size; /* processes on its machine */
    char master_addr[GC_DIST_ADDR_MAX]; /* where rank 0 serves the store */
    int master_port;
    char bind_addr[GC_DIST_ADDR_MAX];   /* GC_DIST_BIND: the interface rank 0's store listens on
                                           (empty: MASTER_ADDR's; 0.0.0.0: every interface) */
    gc_dist_secret secret; /* GC_DIST_SECRET_FILE's bytes or GC_DIST_SECRET (world > 1 only) */
} gc_dist_env;

/* Reads the environment of the first launcher, in this order, whose variables are set (each
 * read strictly: GC_ERR_FORMAT naming the variable when one is malformed, out of range or
 * missing):
 *   1. torchrun's (WORLD_SIZE set; gradcache launch sets them too): WORLD_SIZE, RANK,
 *      LOCAL_WORLD_SIZE and LOCAL_RANK (defaults: every process and RANK's place among them),
 *      MASTER_ADDR and MASTER_PORT (needed by a world of several). Explicit variables win:
 *      set them to override what a cluster's launcher says.
 *   2. Open MPI's (OMPI_COMM_WORLD_SIZE set): OMPI_COMM_WORLD_SIZE, _RANK, _LOCAL_SIZE,
 *      _LOCAL_RANK;
 *   3. PMI's (PMI_SIZE set): PMI_SIZE, PMI_RANK, and MPI_LOCALNRANKS, MPI_LOCALRANKID where
 *      set. MPI does not say where rank 0 runs: MASTER_ADDR, else 127.0.0.1 when every process
 *      is on this machine (else GC_ERR_FORMAT); MASTER_PORT, else 29500. MPI comes before
 *      Slurm because mpirun inside an allocation starts its processes through srun's daemons,
 *      whose SLURM_ variables describe the daemons;
 *   4. Slurm's (SLURM_PROCID and SLURM_STEP_ID set: a task of an srun step; the batch script
 *      itself has no step and is one process): SLURM_NTASKS, SLURM_PROCID, SLURM_NNODES,
 *      SLURM_NODEID, SLURM_LOCALID, the tasks of this node from SLURM_STEP_TASKS_PER_NODE
 *      (else SLURM_TASKS_PER_NODE; "2(x3),1"); the master MASTER_ADDR, else 127.0.0.1 on one
 *      node, else the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST; a compressed
 *      list such as "node[01-04,07]"), where Slurm's block and cyclic distributions put task
 *      0; the port MASTER_PORT, else 10000 + SLURM_JOB_ID mod 10000;
 *   5. none: a single process (launched false, rank 0 of 1) and GC_OK.
 * env->launcher says which (gc_dist_launcher_name, for the line rank 0 prints). GC_DIST_BIND
 * names the store's interface whatever the launcher. A run of several processes needs its
 * secret: the file named by GC_DIST_SECRET_FILE (a regular file no other user may read, of
 * GC_DIST_SECRET_MIN to GC_DIST_SECRET_MAX bytes, the same on every machine), else
 * GC_DIST_SECRET's text, which only gradcache launch makes: a run started by srun, mpirun or
 * torchrun needs GC_DIST_SECRET_FILE. Without one, or with a bad one, GC_ERR_FORMAT
 * (GC_ERR_IO: the file cannot be read). A process of a world of one needs none. */
gc_status gc_dist_env_read(gc_dist_env *env);

/* The timeout of collectives and rendezvous in seconds: GC_DIST_TIMEOUT when set (a
 * positive number), else 600; -1 with GC_ERR_FORMAT when GC_DIST_TIMEOUT is malformed. */
double gc_dist_default_timeout(void);

/* --- the rendezvous store: a key-value store served by rank 0 over TCP --- */

typedef struct gc_store gc_store;

typedef struct gc_store_options {
    const char *host;        /* the server's address (MASTER_ADDR) */
    int port;                /* its port (serving with 0: any free one, see gc_store_port) */
    bool serve;              /* also serve the store, from a thread of this process (rank 0) */
    const char *bind;        /* serving: the interface to listen on; NULL: host's (0.0.0.0: all) */
    int rank;                /* this process's rank, claimed in the handshake */
    int world_size;          /* serving: the run's processes; connections and stored bytes are
                                bounded by it (GC_STORE_CONNECTION_MARGIN more connections) */
    const gc_dist_secret *secret; /* the run's, at least GC_DIST_SECRET_MIN bytes */
    double timeout_seconds;  /* connecting, the handshake, and each request's reply */
} gc_store_options;

/* serve: listen on bind:port and serve the store from a thread of this process, then connect
 * to it like every client. Otherwise: connect to host:port, retrying until the timeout (the
 * server may not be up yet). Either way the connection is authenticated both ways with the
 * secret before anything else crosses it. NULL with GC_ERR_PEER (unreachable, timed out,
 * the server does not know the secret or refused ours), GC_ERR_IO (the port is in use or the
 * address is not this machine's) or GC_ERR_FORMAT (a bad address) and a message naming host
 * and port. A secret shorter than GC_DIST_SECRET_MIN is a programmer error.
 *
 * The server refuses, with one line on stderr naming the address and the reason, a client
 * that fails the handshake or does not finish it within GC_DIST_HANDSHAKE_SECONDS, and a
 * request longer than the protocol allows, before reading it. It holds world_size +
 * GC_STORE_CONNECTION_MARGIN connections: past that, the oldest one still in its handshake is
 * closed to make room (a client turned away that way tries again until its timeout), so
 * strangers cannot lock the run out; and at most GC_STORE_BYTES_PER_CONNECTION bytes of keys
 * and values per connection it may hold. */
#define GC_STORE_CONNECTION_MARGIN 16
#define GC_STORE_BYTES_PER_CONNECTION (64u << 10)
gc_store *gc_store_new(const gc_store_options *options);
/* The port the store listens on (useful after port 0). */
int gc_store_port(const gc_store *store);
/* Sets key (a NUL-terminated string, at most GC_STORE_KEY_MAX bytes) to a copy of the
 * value (at most GC_STORE_VALUE_MAX bytes: addresses and ids, not data). A key is written
 * once: setting a key that is set already is refused (GC_ERR_FORMAT), so that no process can
 * change what another published (its address, say); so is a key past the store's bound on
 * bytes. */
#define GC_STORE_KEY_MAX 1024
#define GC_STORE_VALUE_MAX 4096u
gc_status gc_store_set(gc_store *store, const char *key, const void *value, size_t size);
/* Waits until key is set (up to the store's timeout), then returns a malloc'ed copy of its
 * value in *value (NUL-terminated one byte past *size, for text) and its size. */
gc_status gc_store_get(gc_store *store, const char *key, void **value, size_t *size);
/* Adds delta to the integer stored at key (absent: 0) and returns the new value: a counter
 * for barriers and for handing out unique numbers. GC_ERR_FORMAT when the key was set with
 * gc_store_set (it is not a counter) or the store is full. */
gc_status gc_store_add(gc_store *store, const char *key, int64_t delta, int64_t *result);
/* Whether key is set, without waiting. */
gc_status gc_store_check(gc_store *store, const char *key, bool *exists);
/* Closes the connection. The server (on rank 0) first waits for its authenticated clients --
 * the run's processes -- to disconnect, at most the timeout (those still connected then see
 * GC_ERR_PEER); a connection that never finished the handshake does not delay it. */
void gc_store_free(gc_store *store);

/* --- process groups and collectives --- */

typedef enum gc_dist_backend { GC_DIST_TCP, GC_DIST_NCCL } gc_dist_backend;
typedef enum gc_dist_op { GC_DIST_SUM, GC_DIST_AVG, GC_DIST_MAX, GC_DIST_MIN } gc_dist_op;

typedef struct gc_dist_options {
    gc_dist_backend backend;
    double timeout_seconds; /* 0: gc_dist_default_timeout() */
    gc_device device;       /* NCCL: the GPU of this rank (usually cuda:LOCAL_RANK) */
} gc_dist_options;

typedef struct gc_process_group gc_process_group;

/* Forms the group of env->world_size processes: rank 0 serves the store (on env->bind_addr,
 * else MASTER_ADDR's interface), every rank connects to it, the ranks exchange what the
 * backend needs and check that they agree on the world size and backend; every connection is
 * authenticated with env->secret. Every rank must call it. NULL with GC_ERR_PEER (a peer
 * never arrived within the timeout, the master is unreachable, a peer does not know the
 * secret), GC_ERR_IO (the master port is in use, MASTER_ADDR is not rank 0's), GC_ERR_FORMAT
 * (no secret of GC_DIST_SECRET_MIN bytes), GC_ERR_UNAVAILABLE (NCCL not built or no GPU) and
 * a message naming the rank. A world of one process needs no network at all. */
gc_process_group *gc_process_group_new(const gc_dist_env *env, const gc_dist_options *options);
/* gc_dist_env_read + gc_process_group_new, for a program started by a launcher. */
gc_process_group *gc_process_group_from_env(const gc_dist_options *options);
void gc_process_group_free(gc_process_group *group);

int gc_dist_rank(const gc_process_group *group);
int gc_dist_world_size(const gc_process_group *group);
gc_dist_backend gc_dist_backend_of(const gc_process_group *group);
/* The store the group was formed with (still usable for small exchanges). */
gc_store *gc_dist_store(gc_process_group *group);

/* Counts of what this process has sent through the group, for benchmarks and tests. */
typedef struct gc_dist_stats {
    int64_t collectives; /* collectives started */
    int64_t bytes;       /* tensor bytes they covered (each collective's input on this rank) */
    int64_t sent_bytes;  /* bytes this rank sent to its peers for the collectives waited for: on
                            the wire, counted by the TCP ring as it sends; NCCL's are the bytes its
                            ring algorithm sends (2 (W-1)/W of an all-reduce's buffer, (W-1)/W of a
                            reduce-scatter's input or an all-gather's output) */
} gc_dist_stats;
gc_dist_stats gc_dist_get_stats(const gc_process_group *group);

typedef struct gc_dist_work gc_dist_work;

/* Waits until the work is done and frees it: GC_OK, or GC_ERR_PEER / an allocation error
 * with the message naming the collective. */
gc_status gc_dist_work_wait(gc_dist_work *work);

/* t (any shape; the same on every rank) becomes op over every rank's t, in place. AVG
 * divides the sum by the world size (floating dtypes only). f16 and bf16 are added in f32
 * and rounded once per addition, as NCCL does. */
gc_dist_work *gc_dist_all_reduce_start(gc_process_group *group, gc_tensor *t, gc_dist_op op);
gc_status gc_dist_all_reduce(gc_process_group *group, gc_tensor *t, gc_dist_op op);

/* input [R, ...] is the same shape on every rank; output [counts[rank], ...] receives rows
 * [start, start + counts[rank]) of op over every rank's input, where start is the sum of
 * the counts of the ranks before. counts has world_size entries summing to R; NULL splits R
 * as evenly as possible (the first R % world_size ranks get one row more). In place: when
 * output is input's own rows [start, start + counts[rank]) (a gc_slice0 of it), the collective
 * reduces in the input itself instead of a copy of it, and the input's other rows hold
 * partial sums afterwards. With the even split, the TCP ring's reduce-scatter adds each row
 * in the order its all-reduce does: rank r's rows are bitwise those of the all-reduce. */
gc_dist_work *gc_dist_reduce_scatter_start(gc_process_group *group, const gc_tensor *input, gc_tensor *output,
                                      const int64_t *counts, gc_dist_op op);
gc_status gc_dist_reduce_scatter(gc_process_group *group, const gc_tensor *input, gc_tensor *output,
                            const int64_t *counts, gc_dist_op op);

/* output [sum of counts, ...] receives every rank's input [counts[rank], ...] in rank order
 * (rows may differ per rank; the other dims and the dtype may not). counts has world_size
 * entries, the same on every rank. In place: input may be output's own rows (a gc_slice0 of
 * it), which are then not copied. */
gc_dist_work *gc_dist_all_gather_start(gc_process_group *group, const gc_tensor *input, gc_tensor *output,
                                  const int64_t *counts);
/* The blocking form for when the counts are not known: exchanges the ranks' row counts
 * first, then returns the gathered rows as a new tensor (NULL on error) and, when counts is
 * not NULL, writes each rank's count into counts[world_size]. */
gc_tensor *gc_dist_all_gather(gc_process_group *group, const gc_tensor *input, int64_t *counts);

/* Every rank's `size` bytes of host memory (the same size on every rank) into
 * all[world_size * size], in rank order: for small exchanges of state (random-number
 * positions, counters) without making tensors. */
gc_status gc_dist_all_gather_host(gc_process_group *group, const void *mine, size_t size, void *all);

/* *flag becomes true on every rank when it is true on any (one MAX all-reduce of one value):
 * a verdict every rank must share, such as a loss scaler's found_inf (one rank's overflow
 * skips the step everywhere, so the ranks' parameters never drift apart). On an error *flag
 * is set true (a step that could not be agreed on is not taken). */
gc_status gc_dist_any(gc_process_group *group, bool *flag);

/* t (the same shape on every rank) becomes root's t on every rank. */
gc_dist_work *gc_dist_broadcast_start(gc_process_group *group, gc_tensor *t, int root);
gc_status gc_dist_broadcast(gc_process_group *group, gc_tensor *t, int root);

/* One step of a ring: every rank sends `send` to rank + 1 and receives rank - 1's into
 * `receive` (ranks modulo the world size; in a world of one, send is copied into receive).
 * Shapes may differ between ranks and steps -- a ring's step carries another rank's block --
 * but `receive` must have exactly as many bytes as the previous rank's `send`, and one dtype
 * and device throughout. On TCP the sizes travel with the bytes, and a mismatch stops the
 * receiving rank naming both (the ranks disagree: a programmer error); NCCL (ncclSend and
 * ncclRecv in one group) cannot tell. What this rank sends counts in gc_dist_get_stats. */
gc_dist_work *gc_dist_shift_start(gc_process_group *group, const gc_tensor *send, gc_tensor *receive);
gc_status gc_dist_shift(gc_process_group *group, const gc_tensor *send, gc_tensor *receive);

/* Returns once every rank has entered it. */
gc_status gc_dist_barrier(gc_process_group *group);

#ifdef __cplusplus
}
#endif
#endif
