/* decoder_hidden FOLDER OUT: a model folder's last hidden states as the engine computes them
 * (gc_pretrained_load, f32), for a few texts of several scripts and lengths (so that some rows
 * are padded), written to OUT with the ids and the mask that made them ("ids", "mask",
 * "hidden"), for tests/test_decoder_transformers.sh to compute again with transformers. A tool,
 * not a test: exit 0, or 99 after a line on stderr (a setup error for the test that runs it). */
#include <stdio.h>
#include <stdlib.h>

#include "gradcache/gradcache.h"

static void die(const char *what) {
    fprintf(stderr, "decoder_hidden: %s: %s\n", what, gc_last_error());
    exit(99);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: decoder_hidden FOLDER OUT.safetensors\n");
        return 99;
    }
    static const char *const texts[] = {"the cat sat on the mat", "a café in Paris", "Tokyo has 14 million",
                                        "mats are flat", "finding passages for a query", "東京 123"};
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    if (gc_pretrained_load(argv[1], gc_cpu(), &encoder, &tokenizer, NULL) != GC_OK) die(argv[1]);
    gc_tensor *ids, *mask;
    if (gc_tokenize(tokenizer, texts, 6, 32, GC_PAD_TO_LONGEST, GC_F32, gc_cpu(), &ids, &mask) != GC_OK)
        die("tokenize");
    gc_tensor *hidden = gc_text_encoder_hidden(&encoder, ids, mask, false);
    if (!hidden) die("forward");
    gc_param_list out = {0};
    gc_param_list_add(&out, "", "ids", ids, false);
    gc_param_list_add(&out, "", "mask", mask, false);
    gc_param_list_add(&out, "", "hidden", hidden, false);
    if (gc_safetensors_save_plain(argv[2], &out, NULL) != GC_OK) die(argv[2]);
    gc_param_list_free(&out);
    gc_tensor_release(ids);
    gc_tensor_release(mask);
    gc_tensor_release(hidden);
    gc_tokenizer_free(tokenizer);
    gc_text_encoder_free(&encoder);
    return 0;
}
