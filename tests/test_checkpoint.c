/* Safetensors checkpoints: round trips of every dtype, 0-dim and empty tensors and
 * metadata; deterministic, byte-exact output (a hand-built golden file, and a file written
 * by the official Python library); atomic saves; all-or-nothing loading; I/O errors.
 * Malformed files are in test_checkpoint_malformed.c.
 *
 * With GC_CHECKPOINT_EXPORT=<path> set, the test also writes the file that
 * tests/make_safetensors_fixture.py reads back with the official library. */
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "checkpoint_files.h"
#include "values.h"

/* Checkpoints copy bytes: every value must come back bit for bit, so all comparisons
 * here are exact (atol = rtol = 0). */
#define EXACT 0.0, 0.0

static bool same_bytes(const unsigned char *a, size_t a_size, const unsigned char *b, size_t b_size) {
    return a && b && a_size == b_size && memcmp(a, b, a_size) == 0;
}

static bool files_equal(const char *path_a, const char *path_b) {
    size_t size_a = 0, size_b = 0;
    unsigned char *a = gc_test_read_bytes(path_a, &size_a), *b = gc_test_read_bytes(path_b, &size_b);
    bool equal = same_bytes(a, size_a, b, size_b);
    free(a);
    free(b);
    return equal;
}

/* Checks that `file` holds `want` under `name` (dtype, shape and every value). */
static void expect_entry(const gc_safetensors *file, const char *name, const gc_tensor *want) {
    gc_tensor *got = gc_safetensors_get(file, name, gc_cpu());
    CHECK_MSG(got, "%s: %s", name, gc_last_error());
    if (!got) return;
    CHECK_MSG(got->dtype == want->dtype, "%s: dtype %s, want %s", name, gc_dtype_name(got->dtype),
              gc_dtype_name(want->dtype));
    gc_test_expect_close(want, got, EXACT, name);
    gc_tensor_release(got);
}

/* Adds `tensor` (a new reference, handed over to the list) as prefix.name. */
static void add(gc_param_list *list, const char *prefix, const char *name, gc_tensor *tensor) {
    REQUIRE(tensor);
    gc_param_list_add(list, prefix, name, tensor, false);
    gc_tensor_release(tensor);
}

/* Every dtype as a matrix, a 0-dim scalar and two empty shapes; saved, reopened, compared. */
static void test_round_trip(const char *folder) {
    static const double values[] = {-2.0, -1.5, 0.0, 0.25, 3.0, 100.0}; /* exact in every dtype */
    gc_param_list list = {0};
    for (int d = 0; d < GC_DTYPE_COUNT; d++) {
        const char *dtype = gc_dtype_name((gc_dtype)d);
        add(&list, dtype, "matrix", gc_test_tensor((gc_dtype)d, GC_SHAPE(2, 3), values));
        add(&list, dtype, "scalar", gc_scalar(-7.0, (gc_dtype)d, gc_cpu()));
        add(&list, dtype, "empty_rows", gc_zeros(GC_SHAPE(0, 4), (gc_dtype)d, gc_cpu()));
        add(&list, dtype, "empty_cols", gc_zeros(GC_SHAPE(3, 0), (gc_dtype)d, gc_cpu()));
    }
    char path[PATH_MAX];
    gc_status status = gc_safetensors_save(gc_test_path(path, folder, "round_trip.safetensors"), &list, NULL);
    CHECK_MSG(status == GC_OK, "%s", gc_last_error());
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open(path, &file) == GC_OK);
    CHECK(gc_safetensors_count(file) == list.count);
    for (int i = 1; i < gc_safetensors_count(file); i++) /* in name order */
        CHECK(strcmp(gc_safetensors_name(file, i - 1), gc_safetensors_name(file, i)) < 0);
    for (int i = 0; i < list.count; i++) expect_entry(file, list.items[i].name, list.items[i].tensor);
    CHECK(gc_safetensors_metadata_count(file) == 0);
    CHECK(gc_safetensors_metadata(file, "format") == NULL);

    gc_clear_error();
    CHECK(gc_safetensors_get(file, "no.such.tensor", gc_cpu()) == NULL);
    gc_test_expect_format_error(gc_last_status(), path, "no tensor named 'no.such.tensor'", "get");
    gc_safetensors_close(file);
    gc_param_list_free(&list);
    REQUIRE(unlink(path) == 0);
}

static void test_metadata(const char *folder) {
    static const char *const metadata[] = {"format", "pt", "b", "\"quoted\" \\ new\nline \x01 \xe2\x9c\x93", "a", "",
                                           NULL};
    gc_param_list list = {0};
    add(&list, "", "x", gc_full(GC_SHAPE(1), GC_F32, gc_cpu(), 1.0));
    char path[PATH_MAX];
    REQUIRE(gc_safetensors_save(gc_test_path(path, folder, "metadata.safetensors"), &list, metadata) == GC_OK);
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open(path, &file) == GC_OK);
    CHECK(gc_safetensors_metadata_count(file) == 3);
    static const char *const sorted[] = {"a", "b", "format"};
    for (int i = 0; i < 3 && i < gc_safetensors_metadata_count(file); i++)
        CHECK(strcmp(gc_safetensors_metadata_key(file, i), sorted[i]) == 0);
    for (int i = 0; metadata[i]; i += 2) {
        const char *value = gc_safetensors_metadata(file, metadata[i]);
        CHECK_MSG(value && strcmp(value, metadata[i + 1]) == 0, "metadata '%s'", metadata[i]);
    }
    CHECK(gc_safetensors_metadata(file, "missing") == NULL);
    gc_safetensors_close(file);
    gc_param_list_free(&list);
    REQUIRE(unlink(path) == 0);
}

/* The same content gives the same bytes, whatever the order of the list or of the
 * metadata pairs. */
static void test_deterministic(const char *folder) {
    static const char *const names[] = {"h", "a", "c", "b"};
    static const gc_dtype dtypes[] = {GC_F16, GC_F32, GC_F32, GC_F64};
    gc_tensor *tensors[4];
    gc_param_list forward = {0}, backward = {0};
    for (int i = 0; i < 4; i++) REQUIRE(tensors[i] = gc_arange(3 + i, i, 0.5, dtypes[i], gc_cpu()));
    for (int i = 0; i < 4; i++) {
        gc_param_list_add(&forward, "", names[i], tensors[i], false);
        gc_param_list_add(&backward, "", names[3 - i], tensors[3 - i], false);
    }
    static const char *const metadata[] = {"z", "1", "a", "2", NULL}, *const swapped[] = {"a", "2", "z", "1", NULL};
    char first[PATH_MAX], again[PATH_MAX], reversed[PATH_MAX];
    REQUIRE(gc_safetensors_save(gc_test_path(first, folder, "first.safetensors"), &forward, metadata) == GC_OK);
    REQUIRE(gc_safetensors_save(gc_test_path(again, folder, "again.safetensors"), &forward, metadata) == GC_OK);
    REQUIRE(gc_safetensors_save(gc_test_path(reversed, folder, "reversed.safetensors"), &backward, swapped) == GC_OK);
    CHECK(files_equal(first, again));
    CHECK(files_equal(first, reversed));
    for (int i = 0; i < 4; i++) gc_tensor_release(tensors[i]);
    gc_param_list_free(&forward);
    gc_param_list_free(&backward);
    REQUIRE(unlink(first) == 0 && unlink(again) == 0 && unlink(reversed) == 0);
}

/* One F32 tensor "x" [2] = {1, 2} with metadata {"format": "pt"}, byte by byte as the
 * format specifies (it is also what the official library writes for this content): the
 * header's length as a little-endian u64, the compact JSON header padded with spaces to a
 * multiple of 8 bytes, then the data, little-endian. */
static const char golden_header[] =
    "{\"__metadata__\":{\"format\":\"pt\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}   ";
static const unsigned char golden_length[8] = {88, 0, 0, 0, 0, 0, 0, 0};
static const unsigned char golden_data[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40}; /* 1.0f, 2.0f */

static void test_golden(const char *folder) {
    unsigned char golden[8 + 88 + 8];
    REQUIRE(sizeof golden_header - 1 == 88);
    memcpy(golden, golden_length, 8);
    memcpy(golden + 8, golden_header, 88);
    memcpy(golden + 96, golden_data, 8);

    gc_tensor *x = gc_test_tensor(GC_F32, GC_SHAPE(2), (const double[]){1.0, 2.0});
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open_memory(golden, sizeof golden, "golden", &file) == GC_OK);
    CHECK(gc_safetensors_count(file) == 1 && strcmp(gc_safetensors_name(file, 0), "x") == 0);
    expect_entry(file, "x", x);
    const char *format = gc_safetensors_metadata(file, "format");
    CHECK(format && strcmp(format, "pt") == 0);
    gc_safetensors_close(file);

    gc_param_list list = {0};
    gc_param_list_add(&list, "", "x", x, false);
    char path[PATH_MAX];
    static const char *const metadata[] = {"format", "pt", NULL};
    REQUIRE(gc_safetensors_save_plain(gc_test_path(path, folder, "golden.safetensors"), &list, metadata) == GC_OK);
    size_t size = 0;
    unsigned char *written = gc_test_read_bytes(path, &size);
    CHECK_MSG(same_bytes(written, size, golden, sizeof golden), "what we write differs from the golden file");
    free(written);
    gc_param_list_free(&list);
    gc_tensor_release(x);
    REQUIRE(unlink(path) == 0);
}

/* The values tests/make_safetensors_fixture.py gives the official library; the names sort
 * in the reverse of the layout order (F64, F32, I32, BF16, F16), so that matching the
 * library's bytes tests that rule and not just name order. */
static void fixture_tensors(gc_param_list *list) {
    add(list, "", "y.weight",
        gc_test_tensor(GC_F32, GC_SHAPE(2, 3), (const double[]){1.5, -2.0, 0.25, 1024.0, -0.0, (double)0.1f}));
    add(list, "", "v.half", gc_test_tensor(GC_F16, GC_SHAPE(4), (const double[]){1.0, -0.5, 65504.0, ldexp(1, -24)}));
    add(list, "", "w.brain",
        gc_test_tensor(GC_BF16, GC_SHAPE(2, 2), (const double[]){1.0, -3.0, ldexp(1, -7), ldexp(255, 120)}));
    add(list, "", "x.ids", gc_test_tensor(GC_I32, GC_SHAPE(3), (const double[]){-2147483648.0, 0.0, 2147483647.0}));
    add(list, "", "z.scale", gc_scalar(3.141592653589793, GC_F64, gc_cpu()));
    add(list, "", "y.empty", gc_zeros(GC_SHAPE(0, 3), GC_F32, gc_cpu()));
}

static const char *const fixture_metadata[] = {"source", "make_safetensors_fixture.py \"h\xc3\xa9llo\" \xe2\x9c\x93\n",
                                               NULL};

/* A file written by the official Python library (with PyTorch tensors) reads correctly,
 * and what we write for the same content (without our checksum) is byte-identical to it. */
static void test_pytorch_fixture(const char *folder) {
    const char *fixture = GC_TEST_FIXTURES "/pytorch.safetensors";
    gc_safetensors *file;
    gc_status status = gc_safetensors_open(fixture, &file);
    CHECK_MSG(status == GC_OK, "%s", gc_last_error());
    if (status != GC_OK) return;
    gc_param_list want = {0};
    fixture_tensors(&want);
    CHECK(gc_safetensors_count(file) == want.count);
    for (int i = 0; i < want.count; i++) expect_entry(file, want.items[i].name, want.items[i].tensor);
    gc_tensor *weight = gc_safetensors_get(file, "y.weight", gc_cpu());
    REQUIRE(weight);
    CHECK(signbit(((const float *)gc_data(weight))[4])); /* -0.0 kept its sign */
    gc_tensor_release(weight);
    CHECK(gc_safetensors_metadata_count(file) == 1);
    const char *source = gc_safetensors_metadata(file, "source");
    CHECK(source && strcmp(source, fixture_metadata[1]) == 0);
    gc_safetensors_close(file);

    char path[PATH_MAX];
    REQUIRE(gc_safetensors_save_plain(gc_test_path(path, folder, "fixture.safetensors"), &want, fixture_metadata) ==
            GC_OK);
    CHECK_MSG(files_equal(path, fixture), "our file differs from the official library's for the same content");
    gc_param_list_free(&want);
    REQUIRE(unlink(path) == 0);
}

/* The other direction: a file for make_safetensors_fixture.py to check (values there). */
static void export_for_python(void) {
    const char *path = getenv("GC_CHECKPOINT_EXPORT");
    if (!path) return;
    gc_param_list list = {0};
    add(&list, "", "a.f64", gc_test_tensor(GC_F64, GC_SHAPE(2), (const double[]){0.5, -1e300}));
    add(&list, "", "b.f32", gc_test_tensor(GC_F32, GC_SHAPE(2, 2), (const double[]){1.0, 2.0, 3.0, 4.0}));
    add(&list, "", "c.bf16", gc_test_tensor(GC_BF16, GC_SHAPE(3), (const double[]){1.0, -2.0, 0.5}));
    add(&list, "", "d.f16", gc_test_tensor(GC_F16, GC_SHAPE(1, 1, 1, 2), (const double[]){0.25, -8.0}));
    add(&list, "", "e.i32", gc_test_tensor(GC_I32, GC_SHAPE(2), (const double[]){-7.0, 123456789.0}));
    add(&list, "", "scalar", gc_scalar(42.0, GC_F32, gc_cpu()));
    add(&list, "", "empty", gc_zeros(GC_SHAPE(0), GC_F16, gc_cpu()));
    add(&list, "", "na\xc3\xafve \"quoted\" name", gc_test_tensor(GC_F32, GC_SHAPE(1), (const double[]){7.0}));
    static const char *const metadata[] = {"format", "pt", "note", "tab\there \"quoted\" \xe2\x9c\x93", "z", "last", NULL};
    gc_status status = gc_safetensors_save_plain(path, &list, metadata);
    CHECK_MSG(status == GC_OK, "%s", gc_last_error());
    fprintf(stderr, "wrote %s for tests/make_safetensors_fixture.py\n", path);
    gc_param_list_free(&list);
}

/* The status is GC_ERR_IO and the message names `path` and contains `reason`. */
static void expect_io_error(gc_status status, const char *path, const char *reason, const char *what) {
    const char *message = gc_last_error();
    CHECK_MSG(status == GC_ERR_IO && strstr(message, path) && strstr(message, reason),
              "%s: got status %s and \"%s\"; want an I/O error naming %s and \"%s\"", what, gc_status_name(status),
              message, path, reason);
    gc_clear_error();
}

static void test_open_io_errors(const char *folder) {
    char missing[PATH_MAX];
    gc_safetensors *file = (gc_safetensors *)&file;
    gc_status status = gc_safetensors_open(gc_test_path(missing, folder, "missing.safetensors"), &file);
    expect_io_error(status, missing, strerror(ENOENT), "a missing file");
    CHECK(file == NULL);
    file = (gc_safetensors *)&file;
    expect_io_error(gc_safetensors_open(folder, &file), folder, "not a regular file", "a folder");
    expect_io_error(gc_safetensors_open("/dev/null", &file), "/dev/null", "not a regular file", "a device");
    CHECK(file == NULL);
}

/* A failed save leaves whatever was at the path as it was, and no temporary file. */
static void test_atomic_save(const char *folder) {
    gc_param_list first = {0}, second = {0};
    add(&first, "", "w", gc_full(GC_SHAPE(256), GC_F32, gc_cpu(), 3.0));
    add(&second, "", "w", gc_full(GC_SHAPE(256), GC_F32, gc_cpu(), 5.0));
    int entries = gc_test_folder_entries(folder);

    char missing[PATH_MAX]; /* a folder that does not exist: the temporary file cannot be made */
    gc_status status = gc_safetensors_save(gc_test_path(missing, folder, "no/such/x.safetensors"), &first, NULL);
    expect_io_error(status, missing, strerror(ENOENT), "a missing folder");
    CHECK(gc_test_folder_entries(folder) == entries);

    char directory[PATH_MAX], inside[PATH_MAX]; /* the path is a folder: the rename fails */
    REQUIRE(mkdir(gc_test_path(directory, folder, "a_folder"), 0700) == 0);
    gc_test_write_bytes(gc_test_path(inside, directory, "keep"), "kept", 4);
    status = gc_safetensors_save(directory, &first, NULL);
    expect_io_error(status, directory, "cannot rename its temporary file to it", "a folder in the way");
    size_t size = 0;
    unsigned char *kept = gc_test_read_bytes(inside, &size);
    CHECK(same_bytes(kept, size, (const unsigned char *)"kept", 4) && gc_test_folder_entries(directory) == 1);
    free(kept);
    CHECK(gc_test_folder_entries(folder) == entries + 1);
    REQUIRE(unlink(inside) == 0 && rmdir(directory) == 0);

    /* A write that fails part way, over an existing checkpoint: the file-size limit (which
     * holds for root too) lets the 1 KB of data start and stops it. */
    char path[PATH_MAX], copy[PATH_MAX];
    REQUIRE(gc_safetensors_save(gc_test_path(path, folder, "kept.safetensors"), &first, NULL) == GC_OK);
    REQUIRE(gc_safetensors_save(gc_test_path(copy, folder, "copy.safetensors"), &first, NULL) == GC_OK);
    struct rlimit limit, small;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &limit) == 0);
    small = limit;
    small.rlim_cur = 512;
    void (*previous)(int) = signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    status = gc_safetensors_save(path, &second, NULL);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &limit) == 0);
    signal(SIGXFSZ, previous);
    expect_io_error(status, path, strerror(EFBIG), "a full disk");
    CHECK(files_equal(path, copy));
    CHECK(gc_test_folder_entries(folder) == entries + 2);
    REQUIRE(unlink(path) == 0 && unlink(copy) == 0);
    gc_param_list_free(&first);
    gc_param_list_free(&second);
}

/* A header past GC_SAFETENSORS_MAX_HEADER would make a file no reader accepts: not written. */
static void test_header_limit(const char *folder) {
    char *value = malloc(GC_SAFETENSORS_MAX_HEADER + 1);
    REQUIRE(value);
    memset(value, 'v', GC_SAFETENSORS_MAX_HEADER);
    value[GC_SAFETENSORS_MAX_HEADER] = '\0';
    const char *const metadata[] = {"big", value, NULL};
    gc_param_list list = {0};
    add(&list, "", "x", gc_zeros(GC_SHAPE(1), GC_F32, gc_cpu()));
    char path[PATH_MAX];
    int entries = gc_test_folder_entries(folder);
    gc_status status = gc_safetensors_save(gc_test_path(path, folder, "huge.safetensors"), &list, metadata);
    /* the value, the rest of the header and the checksum's entry */
    gc_test_expect_format_error(status, path, "the header would take 104857728 bytes, more than the limit of 104857600",
                                "a huge header");
    CHECK(gc_test_folder_entries(folder) == entries);
    gc_param_list_free(&list);
    free(value);
}

static void expect_values(const gc_tensor *got, gc_dtype dtype, int ndim, const int64_t *shape, const double *values,
                          const char *what) {
    gc_tensor *want = gc_test_tensor(dtype, ndim, shape, values);
    CHECK_MSG(got->dtype == dtype, "%s: dtype %s", what, gc_dtype_name(got->dtype));
    gc_test_expect_close(want, got, EXACT, what);
    gc_tensor_release(want);
}

/* Every tensor is checked before any is copied: a missing or misshapen one changes nothing. */
static void test_load_into(const char *folder) {
    static const double w_values[] = {1.0, 2.0, 3.0, 4.0}, b_values[] = {5.0, 6.0}, zeros[] = {0, 0, 0, 0};
    gc_param_list saved = {0};
    add(&saved, "", "w", gc_test_tensor(GC_F32, GC_SHAPE(2, 2), w_values));
    add(&saved, "", "b", gc_test_tensor(GC_F32, GC_SHAPE(2), b_values));
    add(&saved, "", "extra", gc_test_tensor(GC_I32, GC_SHAPE(1), (const double[]){9.0}));
    char path[PATH_MAX];
    REQUIRE(gc_safetensors_save(gc_test_path(path, folder, "model.safetensors"), &saved, NULL) == GC_OK);

    gc_param_list missing = {0};
    add(&missing, "", "w", gc_zeros(GC_SHAPE(2, 2), GC_F32, gc_cpu()));
    add(&missing, "", "absent", gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu()));
    gc_test_expect_format_error(gc_safetensors_load_into(path, &missing), path, "no tensor named 'absent' to load",
                                "a missing tensor");
    expect_values(missing.items[0].tensor, GC_F32, GC_SHAPE(2, 2), zeros, "w untouched (missing)");

    gc_param_list misshapen = {0};
    add(&misshapen, "", "w", gc_zeros(GC_SHAPE(2, 2), GC_F32, gc_cpu()));
    add(&misshapen, "", "b", gc_zeros(GC_SHAPE(3), GC_F32, gc_cpu()));
    gc_test_expect_format_error(gc_safetensors_load_into(path, &misshapen), path,
                                "tensor 'b' is [2] in the file but [3] in the tensor to load", "a misshapen tensor");
    expect_values(misshapen.items[0].tensor, GC_F32, GC_SHAPE(2, 2), zeros, "w untouched (misshapen)");

    /* Other dtypes than the file's are converted; the values are exact in each. */
    gc_param_list converted = {0};
    add(&converted, "", "w", gc_zeros(GC_SHAPE(2, 2), GC_BF16, gc_cpu()));
    add(&converted, "", "b", gc_zeros(GC_SHAPE(2), GC_F64, gc_cpu()));
    add(&converted, "", "extra", gc_zeros(GC_SHAPE(1), GC_F32, gc_cpu()));
    gc_tensor *leaf = converted.items[0].tensor;
    gc_set_requires_grad(leaf, true); /* a parameter, as a model's would be */
    gc_status status = gc_safetensors_load_into(path, &converted);
    CHECK_MSG(status == GC_OK, "%s", gc_last_error());
    expect_values(converted.items[0].tensor, GC_BF16, GC_SHAPE(2, 2), w_values, "w as bf16");
    expect_values(converted.items[1].tensor, GC_F64, GC_SHAPE(2), b_values, "b as f64");
    expect_values(converted.items[2].tensor, GC_F32, GC_SHAPE(1), (const double[]){9.0}, "extra as f32");
    CHECK(gc_is_leaf(leaf) && gc_requires_grad(leaf));

    char absent[PATH_MAX];
    expect_io_error(gc_safetensors_load_into(gc_test_path(absent, folder, "absent.safetensors"), &converted), absent,
                    strerror(ENOENT), "load_into a missing file");
    gc_param_list_free(&saved);
    gc_param_list_free(&missing);
    gc_param_list_free(&misshapen);
    gc_param_list_free(&converted);
    REQUIRE(unlink(path) == 0);
}

/* --- programmer errors (each run in a child process that must abort) --- */

/* The save must stop the program before it touches the disk; if it went on, it would fail
 * on the missing folder and return, which the test reports as "did not abort". */
static void save_nowhere(gc_param_list *list, const char *const *metadata) {
    gc_safetensors_save("/nonexistent/gc_checkpoint/never.safetensors", list, metadata);
}

static void save_duplicate_names(void *unused) {
    (void)unused;
    gc_param_list list = {0};
    add(&list, "layer", "w", gc_zeros(GC_SHAPE(1), GC_F32, gc_cpu()));
    add(&list, "layer", "w", gc_zeros(GC_SHAPE(2), GC_F32, gc_cpu()));
    save_nowhere(&list, NULL);
}

/* Saves one tensor named `name` (a const char *). */
static void save_named(void *name) {
    gc_param_list list = {0};
    add(&list, "", name, gc_zeros(GC_SHAPE(1), GC_F32, gc_cpu()));
    save_nowhere(&list, NULL);
}

/* Saves no tensor with `metadata` (a const char *const *). */
static void save_metadata(void *metadata) {
    gc_param_list list = {0};
    save_nowhere(&list, metadata);
}

static void name_out_of_range(void *unused) {
    (void)unused;
    static const unsigned char empty[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    gc_safetensors *file;
    REQUIRE(gc_safetensors_open_memory(empty, sizeof empty, "empty", &file) == GC_OK);
    gc_safetensors_name(file, 0);
}

static void test_programmer_errors(void) {
    gc_test_expect_fatal(save_duplicate_names, NULL, "safetensors_save: tensor name 'layer.w' appears twice");
    gc_test_expect_fatal(save_named, "", "safetensors_save: a tensor has an empty name");
    gc_test_expect_fatal(save_named, "__metadata__", "safetensors_save: '__metadata__' cannot name a tensor");
    gc_test_expect_fatal(save_named, "bad\xff", "safetensors_save: tensor name 'bad\xff' is not valid UTF-8");
    static const char *const without_value[] = {"key", NULL, NULL}, *const repeated[] = {"k", "1", "k", "2", NULL},
                             *const invalid_value[] = {"k", "\xc0\xaf", NULL};
    gc_test_expect_fatal(save_metadata, (void *)without_value, "safetensors_save: metadata key 'key' has no value");
    gc_test_expect_fatal(save_metadata, (void *)repeated, "safetensors_save: metadata key 'k' appears twice");
    gc_test_expect_fatal(save_metadata, (void *)invalid_value,
                         "safetensors_save: the value of metadata key 'k' is not valid UTF-8");
    gc_test_expect_fatal(name_out_of_range, NULL, "safetensors_name: index 0 outside [0, 0) in empty");
}

int main(void) {
    char folder[PATH_MAX];
    gc_test_make_folder(folder);
    test_round_trip(folder);
    test_metadata(folder);
    test_deterministic(folder);
    test_golden(folder);
    test_pytorch_fixture(folder);
    test_open_io_errors(folder);
    test_atomic_save(folder);
    test_header_limit(folder);
    test_load_into(folder);
    test_programmer_errors();
    export_for_python();
    gc_test_remove_folder(folder);
    return gc_test_result();
}
