/* Malformed safetensors files: each is rejected with GC_ERR_FORMAT and a message naming
 * the file and the specific problem, both from memory and from disk, and nothing leaks
 * (the sanitizer build checks that). */
#include <stdint.h>

#include "checkpoint_files.h"

/* A file of `header` (its length written before it, little-endian) and data_size zero bytes. */
static unsigned char *file_of(const char *header, size_t data_size, size_t *size) {
    size_t length = strlen(header);
    *size = 8 + length + data_size;
    unsigned char *bytes = calloc(1, *size);
    REQUIRE(bytes);
    for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)((uint64_t)length >> (8 * i));
    memcpy(bytes + 8, header, length);
    return bytes;
}

/* Opens `bytes` from memory and from a file in `folder`: both must fail with `problem`. */
static void expect_rejected(const char *folder, const unsigned char *bytes, size_t size, const char *problem) {
    gc_safetensors *file = (gc_safetensors *)&file; /* must come back NULL */
    gc_status status = gc_safetensors_open_memory(bytes, size, "case.safetensors", &file);
    gc_test_expect_format_error(status, "case.safetensors", problem, "from memory");
    CHECK(file == NULL);

    char path[PATH_MAX];
    gc_test_write_bytes(gc_test_path(path, folder, "case.safetensors"), bytes, size);
    file = (gc_safetensors *)&file;
    status = gc_safetensors_open(path, &file);
    gc_test_expect_format_error(status, path, problem, "from a file");
    CHECK(file == NULL);
    REQUIRE(unlink(path) == 0);
    gc_clear_error();
}

static void expect_header_rejected(const char *folder, const char *header, size_t data_size, const char *problem) {
    size_t size;
    unsigned char *bytes = file_of(header, data_size, &size);
    expect_rejected(folder, bytes, size, problem);
    free(bytes);
}

/* The 8-byte length itself: too short a file, a header past the end, a header too large
 * (rejected before anything is allocated for it: a length of 2^64 - 1 would otherwise be
 * an allocation failure, not a format error). */
static void test_length_prefix(const char *folder) {
    unsigned char bytes[16] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    expect_rejected(folder, bytes, 0, "truncated: 0 bytes, fewer than the 8");
    expect_rejected(folder, bytes, 5, "truncated: 5 bytes, fewer than the 8");
    expect_rejected(folder, bytes, 10, "truncated: the 100-byte header runs past the end of the 10-byte file");

    uint64_t too_large = GC_SAFETENSORS_MAX_HEADER + 1ull;
    for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(too_large >> (8 * i));
    expect_rejected(folder, bytes, 10, "header of 104857601 bytes is larger than the limit of 104857600");
    memset(bytes, 0xff, 8);
    expect_rejected(folder, bytes, 10, "header of 18446744073709551615 bytes is larger than the limit");
}

/* JSON that is not well-formed, or outside the subset a header uses; the byte position
 * counts from the header's first byte. */
static void test_invalid_json(const char *folder) {
    static const struct {
        const char *header, *problem;
    } cases[] = {
        {"", "the header does not start with '{'"},
        {" {}", "the header does not start with '{'"},
        {"[1]", "the header does not start with '{'"},
        {"{\"a\":}", "invalid JSON header at byte 5: unexpected '}', expected a value"},
        {"{\"a\" 1}", "at byte 5: unexpected '1', expected ':' after a key"},
        {"{\"a\":{}", "at byte 7: unexpected end of text, expected ',' or '}'"},
        {"{\"a\":{},}", "at byte 8: unexpected '}', expected a string key"},
        {"{1:{}}", "at byte 1: unexpected '1', expected a string key"},
        {"{} x", "at byte 3: unexpected 'x', expected the end of the text"},
        {"{}\x01", "at byte 2: unexpected byte 0x01, expected the end of the text"},
        {"{\"a", "at byte 1: unterminated string"},
        {"{\"a\\\"}", "at byte 1: unterminated string"},
        {"{\"a\x01\":{}}", "at byte 3: control byte 0x01 in a string"},
        {"{\"\xff\":{}}", "at byte 2: invalid UTF-8"},
        {"{\"\xc0\x80\":{}}", "at byte 2: invalid UTF-8"},        /* overlong NUL */
        {"{\"\xed\xa0\x80\":{}}", "at byte 2: invalid UTF-8"},    /* an encoded surrogate */
        {"{\"\xf4\x90\x80\x80\":{}}", "at byte 2: invalid UTF-8"}, /* past U+10FFFF */
        {"{\"\xe2\x9c\":{}}", "at byte 2: invalid UTF-8"},        /* cut short */
        {"{\"\\q\":{}}", "at byte 2: invalid escape '\\q'"},
        {"{\"\\u12\":{}}", "at byte 2: \\u needs 4 hex digits"},
        {"{\"\\u12g4\":{}}", "at byte 2: \\u needs 4 hex digits"},
        {"{\"\\ud800\":{}}", "at byte 2: high surrogate \\ud800 without a low surrogate"},
        {"{\"\\ud800\\u0041\":{}}", "at byte 2: high surrogate \\ud800 without a low surrogate"},
        {"{\"\\udc00\":{}}", "at byte 2: lone low surrogate"},
        {"{\"\\u0000\":{}}", "at byte 2: \\u0000 in a string"},
        {"{\"a\":1.5}", "at byte 6: only integers are accepted"},
        {"{\"a\":1e3}", "at byte 6: only integers are accepted"},
        {"{\"a\":-1}", "at byte 5: negative numbers are not accepted"},
        {"{\"a\":01}", "at byte 5: leading zero in an integer"},
        {"{\"a\":9223372036854775808}", "at byte 5: integer larger than 2^63 - 1"},
        {"{\"a\":true}", "at byte 5: true, false and null are not accepted"},
        {"{\"a\":null}", "at byte 5: true, false and null are not accepted"},
        {"{\"a\":[[[[[[[[1]]]]]]]]}", "at byte 12: nesting deeper than 8 levels"},
        /* duplicate names: the second one is reported */
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]},\"t\":{}}", "at byte 53: duplicate key \"t\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_header_rejected(folder, cases[i].header, 0, cases[i].problem);
}

/* Well-formed JSON that is not a valid header. */
static void test_invalid_entries(const char *folder) {
    static const struct {
        const char *header;
        size_t data_size;
        const char *problem;
    } cases[] = {
        {"{\"__metadata__\":[]}", 0, "__metadata__ is not an object"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "metadata \"k\" is not a string"},
        {"{\"t\":[]}", 0, "tensor 't' is not an object"},
        {"{\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, "a tensor has an empty name"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"foo\":1}}", 4, "tensor 't': unknown field \"foo\""},
        {"{\"t\":{\"shape\":[],\"data_offsets\":[0,4]}}", 4, "tensor 't': missing field \"dtype\""},
        {"{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 't': missing field \"shape\""},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[]}}", 4, "tensor 't': missing field \"data_offsets\""},
        {"{\"t\":{\"dtype\":32,\"shape\":[],\"data_offsets\":[0,4]}}", 4, "tensor 't': \"dtype\" is not a string"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
         "tensor 't': \"shape\" is not an array of integers"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4,
         "tensor 't': \"shape\" is not an array of integers"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":4}}", 4,
         "tensor 't': \"data_offsets\" is not an array of integers"},
        {"{\"t\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, "shape [] of I64 takes 8 bytes"},
        {"{\"t\":{\"dtype\":\"f32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, "tensor 't': unknown dtype \"f32\""},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "tensor 't' has 5 dims, more than the 4 supported"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4,8]}}", 8,
         "tensor 't': data_offsets has 3 values, not [begin, end]"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4]}}", 4,
         "tensor 't': data_offsets has 1 values, not [begin, end]"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
         "tensor 't': data_offsets [4, 0] end before they begin"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 8,
         "tensor 't': data_offsets [0, 12] run past the end of the 8-byte data"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
         "tensor 't': shape [3] of F32 takes 12 bytes but data_offsets [0, 8] hold 8"},
        {"{\"t\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,4]}}", 4,
         "tensor 't': shape [2, 2] of BF16 takes 8 bytes but data_offsets [0, 4] hold 4"},
        /* 2^32 * 2^32 * 4 elements: the byte count would wrap around to 0 */
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,0]}}", 0,
         "tensor 't': shape [4294967296, 4294967296, 4] of F32 overflows 64 bits"},
        /* a partial product overflows even though a later 0 would make the total 0 */
        {"{\"t\":{\"dtype\":\"F16\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}", 0,
         "overflows 64 bits"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
         "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "tensors 'a' [0, 8) and 'b' [0, 8) overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}", 8,
         "tensors 'a' [0, 8) and 'e' [4, 4) overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12,
         "bytes [4, 8) of the data belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
         "bytes [0, 4) of the data belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
         "bytes [4, 8) of the data belong to no tensor"},
        {"{}", 4, "bytes [0, 4) of the data belong to no tensor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_header_rejected(folder, cases[i].header, cases[i].data_size, cases[i].problem);
}

/* The edges that are valid: nothing at all, padding, tensors in any order, empty tensors
 * between others, escapes in names. */
static void test_valid_edges(void) {
    static const char *headers[] = {
        "{}",
        "{}   \t\n\r ",
        "{\"__metadata__\":{}}",
        "{ \"b\" : { \"data_offsets\" : [ 4 , 8 ] , \"shape\" : [ 1 ] , \"dtype\" : \"I32\" } ,"
        " \"e\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
        " \"\\u00e9\\ud83d\\ude00\\/\\\"\\\\\\b\\f\\n\\r\\t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}} ",
    };
    static const uint64_t data_sizes[] = {0, 0, 0, 8};
    static const int counts[] = {0, 0, 0, 3};
    for (int i = 0; i < 4; i++) {
        size_t size;
        unsigned char *bytes = file_of(headers[i], data_sizes[i], &size);
        gc_safetensors *file;
        gc_status status = gc_safetensors_open_memory(bytes, size, "valid.safetensors", &file);
        CHECK_MSG(status == GC_OK, "header %d: %s", i, gc_last_error());
        free(bytes);
        if (status != GC_OK) continue;
        CHECK(gc_safetensors_count(file) == counts[i]);
        CHECK(gc_safetensors_metadata_count(file) == 0);
        if (counts[i] == 3) { /* in name order; the escapes decoded */
            CHECK(strcmp(gc_safetensors_name(file, 0), "b") == 0);
            CHECK(strcmp(gc_safetensors_name(file, 1), "e") == 0);
            CHECK(strcmp(gc_safetensors_name(file, 2), "\xc3\xa9\xf0\x9f\x98\x80/\"\\\b\f\n\r\t") == 0);
            gc_tensor *empty = gc_safetensors_get(file, "e", gc_cpu());
            REQUIRE(empty);
            CHECK(empty->dtype == GC_F16 && empty->ndim == 2 && empty->shape[0] == 0 && empty->shape[1] == 5);
            gc_tensor_release(empty);
        }
        gc_safetensors_close(file);
    }
}

int main(void) {
    char folder[PATH_MAX];
    gc_test_make_folder(folder);
    test_length_prefix(folder);
    test_invalid_json(folder);
    test_invalid_entries(folder);
    test_valid_edges();
    gc_test_remove_folder(folder);
    return gc_test_result();
}
