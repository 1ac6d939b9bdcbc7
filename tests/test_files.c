/* Files and folders written whole or not at all (gradcache/files.h): a committed file has its
 * content and the usual mode and leaves no temporary; an aborted or failed one leaves the old
 * file as it was; a folder moves into place whole, over nothing or an empty folder only; the
 * temporaries of a killed writer are removed, a live writer's and look-alikes are not; a
 * removal does not follow links out of the folder. */
#include <limits.h>
#include <sys/stat.h>

#include "check.h"
#include "checkpoint_files.h"

static bool holds(const char *path, const char *text) {
    char buf[64] = {0};
    FILE *file = fopen(path, "rb");
    if (!file) return false;
    size_t got = fread(buf, 1, sizeof buf - 1, file);
    fclose(file);
    return got == strlen(text) && memcmp(buf, text, got) == 0;
}

static gc_status write_whole(const char *path, const char *text) {
    gc_file_writer writer;
    gc_status status = gc_file_begin(&writer, path);
    if (status != GC_OK) return status;
    fputs(text, writer.file);
    return gc_file_commit(&writer);
}

static void test_file(const char *folder) {
    char path[PATH_MAX], missing[PATH_MAX];
    gc_test_path(path, folder, "a.txt");
    CHECK(write_whole(path, "first") == GC_OK && holds(path, "first"));
    struct stat info;
    CHECK(stat(path, &info) == 0 && (info.st_mode & 0777) == 0644); /* 0666 less the umask 022 */
    CHECK(write_whole(path, "second") == GC_OK && holds(path, "second"));
    CHECK(gc_test_folder_entries(folder) == 1); /* no temporary left */

    gc_file_writer writer;
    REQUIRE(gc_file_begin(&writer, path) == GC_OK);
    fputs("never", writer.file);
    char temporary[PATH_MAX];
    CHECK_MSG(gc_test_find_entry(temporary, folder, ".a.txt.tmp."), "no hidden temporary while writing");
    gc_file_abort(&writer);
    CHECK(holds(path, "second") && gc_test_folder_entries(folder) == 1);

    gc_test_path(missing, folder, "no/such/folder/b.txt");
    CHECK(write_whole(missing, "x") == GC_ERR_IO && strstr(gc_last_error(), missing));
    /* a destination that cannot be replaced (a folder holding something): the rename fails,
     * the temporary goes, the folder stays */
    char blocked[PATH_MAX], inside[PATH_MAX];
    gc_test_path(blocked, folder, "blocked");
    REQUIRE(mkdir(blocked, 0755) == 0);
    gc_test_write_bytes(gc_test_path(inside, blocked, "keep"), "k", 1);
    CHECK(write_whole(blocked, "x") == GC_ERR_IO && strstr(gc_last_error(), blocked));
    CHECK(gc_test_folder_entries(folder) == 2 && holds(inside, "k"));
    REQUIRE(gc_folder_remove(blocked) == GC_OK && gc_folder_remove(path) == GC_OK);
}

static void test_folder(const char *folder) {
    char path[PATH_MAX], file[PATH_MAX], *temporary = NULL;
    gc_test_path(path, folder, "model");
    REQUIRE(gc_folder_begin(path, &temporary) == GC_OK);
    struct stat info;
    CHECK(stat(temporary, &info) == 0 && S_ISDIR(info.st_mode) && (info.st_mode & 0777) == 0755);
    CHECK(strstr(temporary, "/.model.tmp.") != NULL);
    gc_test_write_bytes(gc_test_path(file, temporary, "w"), "w", 1);
    CHECK(gc_folder_commit(temporary, path) == GC_OK && holds(gc_test_path(file, path, "w"), "w"));
    free(temporary);

    /* over an empty folder: yes; over one that holds something: no, and nothing is lost */
    REQUIRE(gc_folder_remove(path) == GC_OK && mkdir(path, 0755) == 0);
    REQUIRE(gc_folder_begin(path, &temporary) == GC_OK);
    gc_test_write_bytes(gc_test_path(file, temporary, "v"), "v", 1);
    CHECK(gc_folder_commit(temporary, path) == GC_OK && holds(gc_test_path(file, path, "v"), "v"));
    free(temporary);
    REQUIRE(gc_folder_begin(path, &temporary) == GC_OK);
    CHECK(gc_folder_commit(temporary, path) == GC_ERR_IO && strstr(gc_last_error(), path));
    CHECK(holds(gc_test_path(file, path, "v"), "v") && access(temporary, F_OK) == 0);
    CHECK(gc_folder_remove(temporary) == GC_OK && access(temporary, F_OK) != 0);
    free(temporary);

    /* a link out of the folder is removed, not followed */
    char outside[PATH_MAX], link_path[PATH_MAX];
    gc_test_write_bytes(gc_test_path(outside, folder, "outside"), "o", 1);
    REQUIRE(symlink(outside, gc_test_path(link_path, path, "link")) == 0);
    CHECK(gc_folder_remove(path) == GC_OK && access(path, F_OK) != 0 && holds(outside, "o"));
    CHECK(gc_folder_remove(path) == GC_OK); /* not there: nothing to do */
    REQUIRE(unlink(outside) == 0);
}

/* A writer killed half way (here it just exits) leaves a file and a folder; the next run's
 * clean-up takes both and the older names, and leaves a live writer's and look-alikes. */
static void test_stale(const char *folder) {
    char path[PATH_MAX];
    gc_test_path(path, folder, "x.safetensors");
    fflush(NULL);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        gc_file_writer writer;
        char *temporary;
        _exit(gc_file_begin(&writer, path) == GC_OK && gc_folder_begin(path, &temporary) == GC_OK ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(gc_test_folder_entries(folder) == 2);

    char old[PATH_MAX], live[PATH_MAX], other[PATH_MAX], not_pid[PATH_MAX], empty_suffix[PATH_MAX], name[64];
    gc_file_writer writer;
    REQUIRE(gc_file_begin(&writer, path) == GC_OK); /* this process's: alive */
    gc_test_write_bytes(gc_test_path(old, folder, "x.safetensors.tmp.99999999"), "old", 3); /* no such process */
    snprintf(name, sizeof name, ".x.safetensors.tmp.%ld", (long)getpid());
    gc_test_write_bytes(gc_test_path(live, folder, name), "live", 4);
    gc_test_write_bytes(gc_test_path(other, folder, ".y.safetensors.tmp.99999999"), "y", 1);
    gc_test_write_bytes(gc_test_path(not_pid, folder, ".x.safetensors.tmp.12a"), "z", 1);
    gc_test_write_bytes(gc_test_path(empty_suffix, folder, ".x.safetensors.tmp.99999999."), "e", 1);
    int removed = -1;
    CHECK(gc_remove_stale_temporaries(path, &removed) == GC_OK);
    CHECK_MSG(removed == 3, "removed %d leftovers, want 3", removed);
    CHECK(access(old, F_OK) != 0 && access(writer.temporary, F_OK) == 0 && access(live, F_OK) == 0);
    CHECK(access(other, F_OK) == 0 && access(not_pid, F_OK) == 0 && access(empty_suffix, F_OK) == 0);
    CHECK(gc_test_folder_entries(folder) == 5);
    gc_file_abort(&writer);
    REQUIRE(unlink(live) == 0 && unlink(other) == 0 && unlink(not_pid) == 0 && unlink(empty_suffix) == 0);

    char missing[PATH_MAX];
    CHECK(gc_remove_stale_temporaries(gc_test_path(missing, folder, "none/x"), NULL) == GC_OK);
}

int main(void) {
    umask(022);
    char folder[PATH_MAX];
    gc_test_make_folder(folder);
    test_file(folder);
    test_folder(folder);
    test_stale(folder);
    gc_test_remove_folder(folder);
    return gc_test_result();
}
