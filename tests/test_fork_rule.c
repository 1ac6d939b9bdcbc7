/* The fork rule of the multi-process tests (tests/dist_spawn.h), on any machine: a test
 * process that asked for CUDA devices and then forks its ranks, or exits (to skip where
 * there is no GPU, as test_dist_nccl once did), fails; asking in a probe child does not
 * count. Each case runs this program again with the case's name, so that each starts as a
 * fresh test process. */
#include <string.h>

#include "dist_spawn.h"

static int trivial_rank(int rank, int world, void *arg) {
    (void)rank, (void)world, (void)arg;
    return GC_TEST_PASS;
}

/* The cases, as the test process runs them. */
static int run_case(const char *name) {
    if (strcmp(name, "ask-then-skip") == 0) {
        gc_cuda_device_count();
        return GC_TEST_SKIP; /* the rule turns this into a failure */
    }
    if (strcmp(name, "ask-then-fork") == 0) {
        gc_cuda_device_count();
        return dist_all_pass(2, trivial_rank, NULL, 30) ? GC_TEST_PASS : GC_TEST_FAIL;
    }
    if (strcmp(name, "probe-in-child-then-fork") == 0) {
        fflush(NULL);
        pid_t probe = fork();
        if (probe == 0) _exit(gc_cuda_device_count() >= 0 ? 0 : 1);
        int status = 0;
        if (probe < 0 || waitpid(probe, &status, 0) != probe || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return GC_TEST_SETUP_ERROR;
        if (gc_cuda_asked()) return GC_TEST_FAIL; /* the child's question is the child's */
        return dist_all_pass(2, trivial_rank, NULL, 30) ? GC_TEST_PASS : GC_TEST_FAIL;
    }
    return GC_TEST_SETUP_ERROR;
}

/* The case named by `arg`, as a fresh test process: this program run again. */
static void exec_case(void *arg) {
    execl("/proc/self/exe", "/proc/self/exe", (const char *)arg, (char *)NULL);
    _exit(GC_TEST_SETUP_ERROR);
}

/* Runs the case; its exit status, and whether its stderr names the broken rule. */
static int run_case_process(const char *name, bool *named_rule) {
    char output[4096];
    int status = gc_test_run_child(exec_case, (void *)name, output, sizeof output);
    *named_rule = strstr(output, "fork rule broken") != NULL;
    if (output[0]) fprintf(stderr, "%s printed: %s", name, output);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
    if (argc == 2) return run_case(argv[1]);
    const struct {
        const char *name;
        int status;
        bool names_rule;
    } cases[] = {
        {"ask-then-skip", GC_TEST_FAIL, true},
        {"ask-then-fork", GC_TEST_FAIL, true},
        {"probe-in-child-then-fork", GC_TEST_PASS, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bool named = false;
        int status = run_case_process(cases[i].name, &named);
        CHECK_MSG(status == cases[i].status && named == cases[i].names_rule,
                  "%s: exit status %d (want %d), the rule %snamed", cases[i].name, status, cases[i].status,
                  named ? "" : "not ");
    }
    CHECK(!gc_cuda_asked());
    return gc_test_result();
}
