/* gradcache launch: N processes of a program with torchrun's environment (the library's
 * gc_launch does the work; this parses the flags). */
#include <string.h>

#include "commands.h"
#include "errors.h"
#include "flags.h"
#include "gradcache/error.h"
#include "gradcache/launch.h"

#define SUMMARY                                                                                               \
    "Runs PROGRAM in N processes with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and\n"       \
    "MASTER_PORT set, as torchrun does, e.g. gradcache launch -n 2 -- gradcache train --gc ...; their output\n" \
    "lines are prefixed with [RANK]. When one process fails, the others are stopped (SIGTERM, then SIGKILL\n"   \
    "after --grace seconds), a last line names the first to fail (its rank, pid, exit status or signal)\n"     \
    "and the launcher exits with its status; SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on.\n"              \
    "Every connection of the run proves it knows the run's secret: on one machine the launcher makes a\n"       \
    "fresh one (passed on as GC_DIST_SECRET); several machines need GC_DIST_SECRET_FILE naming the same\n"      \
    "file on each (32 or more random bytes, chmod 600: head -c 32 /dev/urandom >FILE). Rank 0's store\n"        \
    "listens on --master-addr's interface only; GC_DIST_BIND=ADDR names another (0.0.0.0: every one).\n"        \
    "usage: gradcache launch -n N [flags] -- PROGRAM [ARGS...]"

int cli_command_launch(int argc, char **argv) {
    int dash = 2;
    while (dash < argc && strcmp(argv[dash], "--") != 0) dash++;
    int64_t nproc = 0, nnodes = 1, node_rank = 0, port = 0;
    double grace = 5;
    const char *addr = NULL, *log_dir = NULL;
    cli_flag table[] = {
        {"n", CLI_FLAG_INT, &nproc, 1, 1024, NULL, "processes on this machine (required)"},
        {"nnodes", CLI_FLAG_INT, &nnodes, 1, 65536, NULL, "machines taking part"},
        {"node-rank", CLI_FLAG_INT, &node_rank, 0, 65535, NULL, "this machine's index, from 0"},
        {"master-addr", CLI_FLAG_STRING, &addr, 0, 0, NULL, "where rank 0 serves the rendezvous (default 127.0.0.1)"},
        {"master-port", CLI_FLAG_INT, &port, 0, 65535, NULL, "its port (0: a free one; needed with --nnodes > 1)"},
        {"grace", CLI_FLAG_DOUBLE, &grace, 0.01, 3600, NULL, "seconds between SIGTERM and SIGKILL when stopping"},
        {"log-dir", CLI_FLAG_STRING, &log_dir, 0, 0, NULL, "write DIR/rank_R.out and .err instead of prefixing"},
    };
    int status = cli_flags_parse("launch", SUMMARY, table, (int)(sizeof table / sizeof *table), dash, argv, 2);
    if (status) return status == 1 ? 0 : status;
    if (nproc < 1) return cli_fail("launch", 2, "-n is required (the number of processes)");
    if (dash >= argc - 1) return cli_fail("launch", 2, "no program: put it after --, e.g. -- gradcache train ...");
    if (node_rank >= nnodes)
        return cli_fail("launch", 2, "--node-rank %lld: the nodes are numbered 0 to %lld", (long long)node_rank,
                        (long long)nnodes - 1);
    if (nnodes > 1 && (!addr || port == 0))
        return cli_fail("launch", 2, "--nnodes %lld needs --master-addr and --master-port (the same on every node)",
                        (long long)nnodes);
    gc_launch_options options = {(int)nproc, (int)nnodes, (int)node_rank, addr, (int)port, grace, log_dir};
    status = gc_launch(&options, argv + dash + 1);
    if (status < 0) return cli_fail("launch", 1, "%s", gc_last_error());
    return status;
}
