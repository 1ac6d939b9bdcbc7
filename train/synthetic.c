/* Synthetic token batches (see gradcache/measure.h). */
#include <stdlib.h>

#include "gradcache/measure.h"
#include "gradcache/random.h"
#include "gradcache/tokenizer.h"

/* A random byte as text another tokenizer reads: a letter, or now and then a space between
 * words (any vocabulary has the letters; random bytes need not even be UTF-8). */
static char as_word_letter(unsigned char byte) { return byte % 6 == 0 ? ' ' : (char)('a' + byte % 26); }

gc_status gc_synthetic_tokens(const gc_tokenizer *tokenizer, int64_t rows, int64_t max_length, gc_dtype mask_dtype,
                              gc_device device, gc_generator *generator, gc_tensor **ids, gc_tensor **mask) {
    bool bytes_kept = tokenizer == gc_tokenizer_bytes();
    *ids = *mask = NULL;
    int64_t bytes_per_row = max_length > 1 ? max_length - 1 : 1; /* the first position is [CLS] */
    /* f64, not f32: 1 + 255 u rounds to 256 in f32 for u close to 1, a byte that does not exist */
    gc_tensor *bytes = gc_uniform(GC_SHAPE(rows, bytes_per_row), GC_F64, gc_cpu(), 1, 256, generator->seed,
                                  gc_generator_take(generator, gc_uniform_words(rows * bytes_per_row)));
    gc_tensor *lengths = gc_uniform(GC_SHAPE(rows), GC_F64, gc_cpu(), 0, (double)max_length, generator->seed,
                                    gc_generator_take(generator, gc_uniform_words(rows)));
    char *text_bytes = malloc((size_t)(rows * max_length));
    const char **texts = malloc((size_t)rows * sizeof *texts);
    if (!text_bytes || !texts) gc_fatal("synthetic_tokens: out of host memory for %lld rows", (long long)rows);
    gc_status status = bytes && lengths ? GC_OK : gc_last_status();
    if (status == GC_OK) {
        const double *byte_values = gc_data(bytes), *length_values = gc_data(lengths);
        for (int64_t row = 0; row < rows; row++) {
            char *text = text_bytes + row * max_length;
            int64_t length = (int64_t)length_values[row]; /* truncation: 0 .. max_length - 1 */
            for (int64_t i = 0; i < length; i++) {
                unsigned char byte = (unsigned char)byte_values[row * bytes_per_row + i];
                text[i] = bytes_kept ? (char)byte : as_word_letter(byte);
            }
            text[length] = '\0';
            texts[row] = text;
        }
        status = gc_tokenize(tokenizer, texts, rows, max_length, GC_PAD_TO_MAX_LENGTH, mask_dtype, device, ids, mask);
    }
    gc_tensor_release(bytes);
    gc_tensor_release(lengths);
    free(text_bytes);
    free(texts);
    return status;
}
