/* What the BERT loader's tests share: a model folder with an edited config.json, and a load
 * that must be refused before anything is built. */
#ifndef GC_TESTS_BERT_FOLDERS_H
#define GC_TESTS_BERT_FOLDERS_H

#include <unistd.h>

#include "checkpoint_files.h"
#include "gradcache/pretrained.h"

/* The files of a model folder that gc_bert_load reads besides config.json. */
static const char *const gc_test_bert_linked[] = {"model.safetensors", "tokenizer.json", "modules.json", "1_Pooling"};
#define GC_TEST_BERT_LINKED (sizeof gc_test_bert_linked / sizeof *gc_test_bert_linked)

/* A new folder under /tmp standing for the model folder `model`: its files as symbolic links
 * (a real model is large, and read-only here), config.json a copy of the model's with the
 * text `from` replaced by `to`. Remove it with gc_test_remove_edited_folder. */
static inline void gc_test_edited_folder(char folder[PATH_MAX], const char *model, const char *from, const char *to) {
    char source[PATH_MAX], link[PATH_MAX];
    gc_test_make_folder(folder);
    for (size_t i = 0; i < GC_TEST_BERT_LINKED; i++)
        REQUIRE(symlink(gc_test_path(source, model, gc_test_bert_linked[i]),
                        gc_test_path(link, folder, gc_test_bert_linked[i])) == 0);
    size_t size;
    unsigned char *bytes = gc_test_read_bytes(gc_test_path(source, model, "config.json"), &size);
    char *text = calloc(size + 1, 1); /* a string, for strstr */
    REQUIRE(bytes && text);
    memcpy(text, bytes, size);
    char *at = strstr(text, from);
    REQUIRE(at);
    *at = '\0';
    FILE *out = fopen(gc_test_path(link, folder, "config.json"), "wb");
    REQUIRE(out && fputs(text, out) >= 0 && fputs(to, out) >= 0 && fputs(at + strlen(from), out) >= 0 &&
            fclose(out) == 0);
    free(bytes);
    free(text);
}

static inline void gc_test_remove_edited_folder(const char *folder) {
    char path[PATH_MAX];
    for (size_t i = 0; i < GC_TEST_BERT_LINKED; i++) unlink(gc_test_path(path, folder, gc_test_bert_linked[i]));
    unlink(gc_test_path(path, folder, "config.json"));
    gc_test_remove_folder(folder);
}

/* A loader of a whole folder: gc_bert_load, or gc_pretrained_load for either family. */
typedef gc_status (*gc_test_folder_loader)(const char *dir, gc_device device, gc_text_encoder *encoder,
                                           gc_tokenizer **tokenizer, gc_bert_unused *unused);

/* Loading `folder` with `loader` fails with `want`, one line naming `file` (inside the folder)
 * and containing `problem`, with nothing left allocated and nothing allocated at all on the
 * way: the peak of live bytes does not move. Under a 1 MiB memory limit, so that a loader which
 * builds the model before checking it fails at once on memory (and this check with it)
 * instead of spending minutes and gigabytes on a model it then refuses. */
static inline void gc_test_expect_refused_by(gc_test_folder_loader loader, const char *folder, gc_status want,
                                             const char *file, const char *problem) {
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_bert_unused unused;
    size_t live = gc_memory_get_stats(gc_cpu()).live_bytes;
    gc_memory_reset_peak(gc_cpu());
    gc_memory_set_limit(gc_cpu(), live + (1u << 20));
    gc_status status = loader(folder, gc_cpu(), &encoder, &tokenizer, &unused);
    gc_memory_set_limit(gc_cpu(), 0);
    char path[PATH_MAX];
    gc_test_path(path, folder, file);
    CHECK_MSG(status == want && strstr(gc_last_error(), path) && strstr(gc_last_error(), problem) &&
                  !strchr(gc_last_error(), '\n'),
              "want %s and \"%s: ...%s\", got %s \"%s\"", gc_status_name(want), path, problem, gc_status_name(status),
              gc_last_error());
    gc_memory_stats stats = gc_memory_get_stats(gc_cpu());
    CHECK_MSG(tokenizer == NULL && stats.live_bytes == live && stats.peak_bytes == live,
              "%s: %zu bytes live and a peak of %zu, from %zu before the refused load", folder, stats.live_bytes,
              stats.peak_bytes, live);
    gc_clear_error();
}

/* gc_test_expect_refused_by with gc_bert_load. */
static inline void gc_test_expect_load_refused(const char *folder, gc_status want, const char *file,
                                               const char *problem) {
    gc_test_expect_refused_by(gc_bert_load, folder, want, file, problem);
}

/* A config.json edit and what the load must say of it: {old text, new text, the problem
 * (with %s where the path of the edited config.json goes)}. */
typedef const char *const gc_test_config_edit[3];

/* Each edit made to a copy of the folder `source`, whose load must be refused naming
 * model.safetensors and the problem, with nothing allocated. */
static inline void gc_test_expect_edits_refused(const char *source, gc_test_config_edit *edits, size_t count) {
    for (size_t i = 0; i < count; i++) {
        char folder[PATH_MAX], config[PATH_MAX], problem[PATH_MAX + 300];
        gc_test_edited_folder(folder, source, edits[i][0], edits[i][1]);
        snprintf(problem, sizeof problem, edits[i][2], gc_test_path(config, folder, "config.json"));
        gc_test_expect_load_refused(folder, GC_ERR_FORMAT, "model.safetensors", problem);
        gc_test_remove_edited_folder(folder);
    }
}

#endif
