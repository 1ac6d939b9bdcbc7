/* One writer per run folder (train/run_lock.h): a second trainer on a folder, in this process
 * or another, is refused with GC_ERR_CONFIG and one line naming the holder's pid and host;
 * freeing the first releases the folder; a lock file nobody holds (a finished run's, or one
 * with junk in it) is taken over; and a holder killed with SIGKILL leaves nothing that blocks
 * the next run. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gradcache/files.h"
#include "gradcache/train.h"
#include "trainer_run.h"

static char folder[] = "/tmp/test_run_lock_XXXXXX";

/* gc_trainer_new refuses config: GC_ERR_CONFIG, one line naming pid `holder` and the rule. */
static void expect_held_by(const gc_trainer_config *config, pid_t holder) {
    gc_trainer *second = (gc_trainer *)1;
    char want[96];
    snprintf(want, sizeof want, "%s is being written by pid %ld on host ", config->out, (long)holder);
    CHECK_MSG(gc_trainer_new(config, &second) == GC_ERR_CONFIG, "%s", gc_last_error());
    CHECK(second == NULL);
    CHECK_MSG(strstr(gc_last_error(), want) != NULL, "want '%s', got '%s'", want, gc_last_error());
    CHECK_MSG(strstr(gc_last_error(), " since ") && strstr(gc_last_error(), ": one writer per run folder"), "%s",
              gc_last_error());
    CHECK(strchr(gc_last_error(), '\n') == NULL);
    gc_clear_error();
}

/* Two trainers of this process: an OFD lock conflicts between two opens of one process (a
 * process-wide POSIX lock would let the second in). */
static void test_same_process(void) {
    char out[256];
    gc_trainer_config config = gc_test_small_run(folder, "same", 1, out, sizeof out);
    gc_trainer *first, *again;
    REQUIRE(gc_trainer_new(&config, &first) == GC_OK);
    expect_held_by(&config, getpid());
    /* the refused trainer took nothing from the first: it still trains and writes */
    CHECK_MSG(gc_trainer_run(first) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(first);
    /* freed, the folder is free: its lock file stays, held by nobody, and is taken over */
    CHECK_MSG(gc_trainer_resume(&config, &again) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(again);
}

/* A lock file with anything in it, held by nobody, is no obstacle. */
static void test_stale_file(void) {
    char out[256], path[300];
    gc_trainer_config config = gc_test_small_run(folder, "stale", 1, out, sizeof out);
    REQUIRE(gc_make_directories(out) == GC_OK);
    snprintf(path, sizeof path, "%s/lock", out);
    FILE *file = fopen(path, "w");
    REQUIRE(file != NULL);
    fputs("pid 1 on host gone since long ago\n\x01junk", file);
    fclose(file);
    gc_trainer *trainer;
    CHECK_MSG(gc_trainer_new(&config, &trainer) == GC_OK, "%s", gc_last_error());
    gc_trainer_free(trainer);
}

/* Another process holds the folder, then is killed: refused while it lives, free after. */
static void test_killed_holder(void) {
    char out[256];
    gc_trainer_config config = gc_test_small_run(folder, "killed", 1, out, sizeof out);
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        gc_trainer *held;
        char ok = gc_trainer_new(&config, &held) == GC_OK ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1) _exit(1);
        for (;;) pause(); /* holding the folder until killed */
    }
    close(ready[1]);
    char ok = 'n';
    CHECK(read(ready[0], &ok, 1) == 1 && ok == 'y');
    close(ready[0]);
    expect_held_by(&config, child);
    kill(child, SIGKILL);
    int status;
    CHECK(waitpid(child, &status, 0) == child && WIFSIGNALED(status));
    gc_trainer *trainer;
    CHECK_MSG(gc_trainer_new(&config, &trainer) == GC_OK, "after the holder was killed: %s", gc_last_error());
    gc_trainer_free(trainer);
}

int main(void) {
    REQUIRE(mkdtemp(folder) != NULL);
    test_same_process();
    test_stale_file();
    test_killed_holder();
    gc_folder_remove(folder);
    gc_shutdown();
    return gc_test_result();
}
