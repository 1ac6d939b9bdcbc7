/* The two compressed lists of Slurm's environment that a job step's processes need to find
 * each other: the host list (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST) and the tasks per node
 * (SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE). Outside input: parsed strictly, in one
 * pass, never expanded (a range of a billion hosts costs nothing), every number bounded.
 * Private to dist/; tests/fuzz/fuzz_slurm.c feeds them arbitrary bytes.
 *
 * A host list is hosts separated by commas; a host is name characters (letters, digits, '-',
 * '.', '_'), starting with a letter or digit, and bracketed groups of numbers and ranges in
 * between ("node[01-04,07]", "a[1-2],b3", "rack[1-2]-n[01-16]"); a range's bounds are at most
 * 9 digits, the first not above the second, and a bound keeps the digits it is written with
 * ("node[01-04]"'s first host is node01). A tasks-per-node list is counts, each optionally
 * repeated ("2(x3),1": 2 tasks on each of nodes 0 to 2, 1 on node 3). */
#ifndef GC_DIST_SLURM_H
#define GC_DIST_SLURM_H

#include <stddef.h>

#include "gradcache/error.h"

/* The longest list accepted (a job of many thousands of nodes, compressed, is far shorter). */
#define GC_SLURM_LIST_MAX (64u << 10)

/* The first host of `list` into host[size]. GC_ERR_FORMAT (recorded, naming `what`, the
 * offending position and a bounded excerpt of the text) when the list is not well formed, is
 * longer than GC_SLURM_LIST_MAX, or its first host does not fit in size - 1 bytes. */
gc_status gc_slurm_first_host(const char *what, const char *list, char *host, size_t size);

/* How many tasks node `node` (0-based) runs, from a tasks-per-node list, into *tasks.
 * GC_ERR_FORMAT naming `what` when the list is malformed (a count or repetition outside 1 to
 * 2^20) or has fewer than node + 1 nodes. */
gc_status gc_slurm_tasks_on_node(const char *what, const char *list, int node, int *tasks);

#endif
