/* SHA-256 against FIPS 180-4's examples (and a message that crosses blocks in pieces, as
 * `model fetch` hashes files 64 KiB at a time); HMAC-SHA256 against the seven test cases of
 * RFC 4231 (keys shorter than, as long as and longer than a block; case 5 truncated to 128
 * bits); the constant-time comparison. */
#include "check.h"
#include "gradcache/hash.h"

static void hex_of(const uint8_t *bytes, size_t size, char *hex) {
    for (size_t i = 0; i < size; i++) snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
}

static void test_sha256(void) {
    static const struct {
        const char *message, *digest;
    } cases[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gc_sha256 hash;
        char hex[65];
        gc_sha256_init(&hash);
        size_t length = strlen(cases[i].message), half = length / 2;
        gc_sha256_update(&hash, cases[i].message, half);
        gc_sha256_update(&hash, cases[i].message + half, length - half);
        gc_sha256_hex(&hash, hex);
        CHECK_MSG(strcmp(hex, cases[i].digest) == 0, "sha256(\"%s\") = %s", cases[i].message, hex);
    }
    gc_sha256 hash; /* a million 'a's: many blocks */
    char hex[65], block[1000];
    memset(block, 'a', sizeof block);
    gc_sha256_init(&hash);
    for (int i = 0; i < 1000; i++) gc_sha256_update(&hash, block, sizeof block);
    gc_sha256_hex(&hash, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
}

/* RFC 4231 section 4: key and data as (byte, count) runs or text. */
static void test_hmac_rfc4231(void) {
    uint8_t counting[25], aa[131], dd[50], cd[50];
    for (int i = 0; i < 25; i++) counting[i] = (uint8_t)(i + 1);
    memset(aa, 0xaa, sizeof aa);
    memset(dd, 0xdd, sizeof dd);
    memset(cd, 0xcd, sizeof cd);
    uint8_t k0b[20], k0c[20];
    memset(k0b, 0x0b, sizeof k0b);
    memset(k0c, 0x0c, sizeof k0c);
    static const char long_data[] = "This is a test using a larger than block-size key and a larger than block-size "
                                    "data. The key needs to be hashed before being used by the HMAC algorithm.";
    const struct {
        const void *key;
        size_t key_size;
        const void *data;
        size_t data_size;
        const char *mac; /* hex; case 5 gives only the first 128 bits */
    } cases[] = {
        {k0b, 20, "Hi There", 8, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"Jefe", 4, "what do ya want for nothing?", 28,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {aa, 20, dd, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {counting, 25, cd, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {k0c, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b"},
        {aa, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {aa, 131, long_data, sizeof long_data - 1, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gc_hmac_sha256 mac;
        gc_hmac_sha256_init(&mac, cases[i].key, cases[i].key_size);
        size_t half = cases[i].data_size / 2; /* in two pieces: streaming gives the same MAC */
        gc_hmac_sha256_update(&mac, cases[i].data, half);
        gc_hmac_sha256_update(&mac, (const uint8_t *)cases[i].data + half, cases[i].data_size - half);
        uint8_t out[GC_SHA256_SIZE];
        gc_hmac_sha256_final(&mac, out);
        char hex[2 * GC_SHA256_SIZE + 1];
        hex_of(out, sizeof out, hex);
        size_t want = strlen(cases[i].mac);
        CHECK_MSG(strncmp(hex, cases[i].mac, want) == 0, "RFC 4231 case %zu: %s", i + 1, hex);
    }
}

static void test_equal_constant_time(void) {
    uint8_t a[32] = {0}, b[32] = {0};
    CHECK(gc_equal_constant_time(a, b, sizeof a));
    CHECK(gc_equal_constant_time(a, b, 0));
    for (size_t i = 0; i < sizeof a; i += 31) { /* a difference in the first or the last byte */
        b[i] = 0x80;
        CHECK(!gc_equal_constant_time(a, b, sizeof a));
        b[i] = 0;
    }
}

int main(void) {
    test_sha256();
    test_hmac_rfc4231();
    test_equal_constant_time();
    return gc_test_result();
}
