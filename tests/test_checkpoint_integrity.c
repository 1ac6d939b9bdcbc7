/* What makes a checkpoint trustworthy beyond its format: the data checksum (XXH64 against
 * the reference tool's values, a hand-built golden file, every single-bit flip of the data
 * refused, files without it still read), the writer's hidden temporary files and the removal
 * of those a killed writer left, and the strict load that refuses a dtype or a tensor the
 * caller did not ask for. */
#include <errno.h>
#include <sys/resource.h>

#include "checkpoint_files.h"
#include "gradcache/hash.h"
#include "values.h"

static uint64_t xxh64_in_pieces(const unsigned char *bytes, size_t size, size_t piece) {
    gc_xxh64 state;
    gc_xxh64_begin(&state);
    for (size_t done = 0; done < size; done += piece)
        gc_xxh64_update(&state, bytes + done, size - done < piece ? size - done : piece);
    return gc_xxh64_end(&state);
}

/* The values `xxhsum -H64` (xxHash 0.8.1) prints for the same bytes: every path of the
 * algorithm (under 4, 8 and 32 bytes, whole stripes, a tail of each size), fed in pieces of
 * every alignment. */
static void test_xxh64(void) {
    unsigned char pattern[1000];
    for (int i = 0; i < 1000; i++) pattern[i] = (unsigned char)((i * 7 + 3) % 256);
    static const struct {
        size_t size;
        uint64_t want;
    } cases[] = {{0, 0xef46db3751d8e999u},  {31, 0xa2aa5f33cc4a6119u}, {32, 0x23c3c17ef790fd97u},
                 {45, 0x86faee00897c4b41u}, {1000, 0x5f235fa033f1a3fbu}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t piece = 1; piece <= 64; piece += 7) {
            uint64_t got = xxh64_in_pieces(pattern, cases[c].size, piece);
            CHECK_MSG(got == cases[c].want, "%zu bytes in pieces of %zu: %016llx, want %016llx", cases[c].size, piece,
                      (unsigned long long)got, (unsigned long long)cases[c].want);
        }
    CHECK(xxh64_in_pieces((const unsigned char *)"abc", 3, 3) == 0x44bc2cf5ad770999u);
}

/* One F32 tensor "x" [2] = {1, 2} with metadata {"format": "pt"}, as gc_safetensors_save
 * writes it: the checksum entry among the sorted keys, its value the XXH64 of the 8 data
 * bytes as xxhsum computes it, the header padded to a multiple of 8. */
static const char golden_header[] = "{\"__metadata__\":{\"format\":\"pt\",\"gradcache.data_xxh64\":\"c86e535c30403d76\"},"
                                    "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} ";
static const unsigned char golden_data[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40}; /* 1.0f, 2.0f */

static void test_checksum_golden(const char *folder) {
    enum { HEADER = 128 };
    REQUIRE(sizeof golden_header - 1 == HEADER);
    unsigned char golden[8 + HEADER + 8] = {HEADER};
    memcpy(golden + 8, golden_header, HEADER);
    memcpy(golden + 8 + HEADER, golden_data, 8);

    gc_param_list list = {0};
    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2), (const double[]){1.0, 2.0});
    gc_param_list_add(&list, "", "x", x, false);
    gc_tensor_release(x);
    static const char *const metadata[] = {"format", "pt", NULL};
    char path[PATH_MAX];
    REQUIRE(gc_safetensors_save(gc_test_path(path, folder, "golden.safetensors"), &list, metadata) == GC_OK);
    size_t size = 0;
    unsigned char *written = gc_test_read_bytes(path, &size);
    CHECK_MSG(written && size == sizeof golden && memcmp(written, golden, size) == 0,
              "what we write differs from the golden file with its checksum");
    free(written);

    /* read back: checked, and not listed among the metadata (it is the file's, not the caller's) */
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open(path, &file) == GC_OK);
    CHECK(gc_safetensors_metadata_count(file) == 1 && strcmp(gc_safetensors_metadata_key(file, 0), "format") == 0);
    CHECK(gc_safetensors_metadata(file, GC_SAFETENSORS_CHECKSUM_KEY) == NULL);
    CHECK(gc_safetensors_data_size(file) == 8);
    gc_safetensors_close(file);
    gc_param_list_free(&list);
    REQUIRE(unlink(path) == 0);
}

/* Every single-bit flip of the tensor data is refused, from memory and from disk, naming the
 * file; the same flip in a file without the checksum (another writer's) still loads. */
static void test_bit_flips(const char *folder) {
    gc_param_list list = {0};
    gc_tensor *w = gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){1.5, -2, 0.25, 8, -0.0, 3});
    gc_tensor *ids = gc_test_tensor(GC_I32, GC_SHAPE(3), (const double[]){7, -1, 0});
    gc_param_list_add(&list, "", "w", w, false);
    gc_param_list_add(&list, "", "ids", ids, false);
    RELEASE(w, ids);
    char path[PATH_MAX], plain[PATH_MAX];
    REQUIRE(gc_safetensors_save(gc_test_path(path, folder, "flips.safetensors"), &list, NULL) == GC_OK);
    REQUIRE(gc_safetensors_save_plain(gc_test_path(plain, folder, "plain.safetensors"), &list, NULL) == GC_OK);
    size_t size = 0, plain_size = 0;
    unsigned char *bytes = gc_test_read_bytes(path, &size), *plain_bytes = gc_test_read_bytes(plain, &plain_size);
    REQUIRE(bytes && plain_bytes && size > 36 && plain_size > 36);
    size_t data = size - 36, plain_data = plain_size - 36; /* 6 f32 and 3 i32 at the end */
    int refused = 0, flips = 0;
    for (size_t byte = 0; byte < 36; byte++)
        for (int bit = 0; bit < 8; bit++) {
            bytes[data + byte] ^= (unsigned char)(1u << bit);
            gc_safetensors *file = NULL;
            gc_status status = gc_safetensors_open_memory(bytes, size, "flipped", &file);
            refused += status == GC_ERR_FORMAT && strstr(gc_last_error(), "flipped: the tensor data does not match "
                                                                          "its checksum") != NULL && !file;
            gc_safetensors_close(file);
            bytes[data + byte] ^= (unsigned char)(1u << bit);
            flips++;
        }
    CHECK_MSG(refused == flips, "%d of %d bit flips refused", refused, flips);

    bytes[data + 5] ^= 0x10;
    gc_test_write_bytes(path, bytes, size);
    gc_safetensors *file = NULL;
    gc_test_expect_format_error(gc_safetensors_open(path, &file), path, "does not match its checksum", "a flip on disk");
    CHECK(file == NULL);
    plain_bytes[plain_data + 5] ^= 0x10;
    CHECK(gc_safetensors_open_memory(plain_bytes, plain_size, "plain", &file) == GC_OK); /* nothing to compare with */
    gc_safetensors_close(file);
    free(bytes);
    free(plain_bytes);
    gc_param_list_free(&list);
    REQUIRE(unlink(path) == 0 && unlink(plain) == 0);
}

/* A checksum entry that is not what the writer writes is refused, not ignored. */
static void test_malformed_checksum(void) {
    static const char *const values[] = {"c86e535c30403d7", "C86E535C30403D76", "c86e535c30403d76 ", "xyz"};
    for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
        char header[160];
        int length = snprintf(header, sizeof header, "{\"__metadata__\":{\"gradcache.data_xxh64\":\"%s\"},\"x\":{\"dtype\":"
                              "\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", values[v]);
        unsigned char bytes[8 + 160 + 8] = {(unsigned char)length};
        memcpy(bytes + 8, header, (size_t)length);
        memcpy(bytes + 8 + length, golden_data, 8);
        gc_safetensors *file = NULL;
        gc_test_expect_format_error(gc_safetensors_open_memory(bytes, 8 + (size_t)length + 8, "odd", &file), "odd",
                                    "metadata 'gradcache.data_xxh64' is not 16 lowercase hex digits", values[v]);
        CHECK(file == NULL);
    }
}

static void save_reserved_key(void *unused) {
    (void)unused;
    gc_param_list none = {0};
    static const char *const metadata[] = {GC_SAFETENSORS_CHECKSUM_KEY, "0000000000000000", NULL};
    gc_safetensors_save("/nonexistent/gc_checkpoint/never.safetensors", &none, metadata);
}

/* A save killed part way (here by the file-size limit's default signal, which ends the
 * process as kill -9 would) leaves a hidden temporary named by its process, and never the
 * file; the removal of stale temporaries takes it (tests/test_files.c checks what else it
 * takes and leaves). */
static void test_temporaries(const char *folder) {
    char path[PATH_MAX];
    gc_test_path(path, folder, "x.safetensors");
    fflush(NULL);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        struct rlimit small = {512, 512}, none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        setrlimit(RLIMIT_FSIZE, &small);
        signal(SIGXFSZ, SIG_DFL);
        gc_param_list list = {0};
        gc_tensor *w = gc_full(GC_SHAPE(4096), GC_F32, gc_cpu(), 1.0);
        gc_param_list_add(&list, "", "w", w, false);
        gc_safetensors_save(path, &list, NULL);
        _exit(0); /* not reached: the write past 512 bytes ends the process */
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ, "the writer was not killed (status %d)", status);
    char leftover[PATH_MAX], name[64];
    snprintf(name, sizeof name, ".x.safetensors.tmp.%ld.", (long)child);
    CHECK_MSG(gc_test_find_entry(leftover, folder, name), "no hidden temporary %s*", name);
    CHECK(gc_test_folder_entries(folder) == 1 && access(path, F_OK) != 0);

    int removed = -1;
    CHECK(gc_remove_stale_temporaries(path, &removed) == GC_OK);
    CHECK_MSG(removed == 1 && access(leftover, F_OK) != 0, "removed %d leftovers, want the killed save's", removed);
    gc_test_expect_fatal(save_reserved_key, NULL,
                         "safetensors_save: metadata key 'gradcache.data_xxh64' is reserved for the checksum");
}

/* The strict load: the dtype must match and every entry must be asked for or claimed. */
static void test_load_exact(const char *folder) {
    gc_param_list saved = {0}, into = {0};
    gc_tensor *w = gc_test_tensor(GC_F32, GC_SHAPE(2, 2), (const double[]){1, 2, 3, 4});
    gc_tensor *ids = gc_test_tensor(GC_I32, GC_SHAPE(2), (const double[]){5, 6});
    gc_tensor *moment = gc_zeros(GC_SHAPE(2, 2), GC_F32, gc_cpu());
    gc_param_list_add(&saved, "", "w", w, false);
    gc_param_list_add(&saved, "", "b", ids, false); /* i32 where the model has f32 */
    gc_param_list_add(&saved, "", "opt.w", moment, false);
    gc_tensor *target_w = gc_zeros(GC_SHAPE(2, 2), GC_F32, gc_cpu()), *target_b = gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu());
    gc_param_list_add(&into, "", "w", target_w, false);
    char path[PATH_MAX];
    REQUIRE(gc_safetensors_save(gc_test_path(path, folder, "exact.safetensors"), &saved, NULL) == GC_OK);
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open(path, &file) == GC_OK);
    CHECK(gc_safetensors_data_size(file) == 16 + 8 + 16);

    gc_test_expect_format_error(gc_safetensors_load_exact(file, &into, NULL), path, "unexpected tensor 'b'",
                                "a tensor not asked for");
    static const char *const claimed[] = {"opt.", "b", NULL};
    CHECK(gc_safetensors_load_exact(file, &into, claimed) == GC_OK);
    gc_test_expect_close(w, target_w, 0, 0, "w loaded exactly");

    gc_param_list_add(&into, "", "b", target_b, false);
    gc_test_expect_format_error(gc_safetensors_load_exact(file, &into, claimed), path,
                                "tensor 'b' is I32 in the file but F32 in the tensor to load", "another dtype");
    gc_tensor *zeros = gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu());
    gc_test_expect_close(zeros, target_b, 0, 0, "b untouched");
    gc_safetensors_close(file);
    RELEASE(w, ids, moment, target_w, target_b, zeros);
    gc_param_list_free(&saved);
    gc_param_list_free(&into);
    REQUIRE(unlink(path) == 0);
}

int main(void) {
    char folder[PATH_MAX];
    gc_test_make_folder(folder);
    test_xxh64();
    test_checksum_golden(folder);
    test_bit_flips(folder);
    test_malformed_checksum();
    test_temporaries(folder);
    test_load_exact(folder);
    gc_test_remove_folder(folder);
    return gc_test_result();
}
