/* A program outside the tree that embeds the installed library, built by CI with nothing
 * but `pkg-config --cflags --libs gradcache`: proves the installed headers, library and
 * .pc file are complete, down to tokenizing and encoding text with a pretrained model
 * (the tiny BERT folder of the tests, when run from the source tree as CI runs it). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include <gradcache/gradcache.h>

/* Encodes two texts with the model folder `dir`; 0 when they come out as unit vectors. */
static int encode(const char *dir) {
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_bert_unused unused;
    if (gc_bert_load(dir, gc_cpu(), &encoder, &tokenizer, &unused) != GC_OK) {
        fprintf(stderr, "embed: %s\n", gc_last_error());
        return 1;
    }
    const char *texts[] = {"the cat sat on the mat", "a big dog"};
    gc_tensor *vectors = gc_encode_texts(&encoder, tokenizer, texts, 2, 16, 2); /* [2, dim] */
    gc_tensor *squares = gc_mul(vectors, vectors);
    gc_tensor *total = gc_sum_all(squares);
    double length = total ? gc_item(total) : NAN;
    printf("embed: %s encodes 2 texts into %lld-wide vectors, squared lengths summing to %g\n", dir,
           vectors ? (long long)vectors->shape[1] : -1LL, length);
    gc_tensor_release(vectors);
    gc_tensor_release(squares);
    gc_tensor_release(total);
    gc_bert_unused_free(&unused);
    gc_tokenizer_free(tokenizer);
    gc_text_encoder_free(&encoder);
    return fabs(length - 2.0) < 1e-4 ? 0 : 1;
}

int main(void) {
    gc_tensor *a = gc_ones(GC_SHAPE(2, 3), GC_F32, gc_cpu());
    gc_tensor *b = gc_add_scalar(a, 1.0);
    gc_tensor *total = gc_sum_all(b);
    if (!total) {
        fprintf(stderr, "embed: %s\n", gc_last_error());
        return 1;
    }
    double value = gc_item(total);
    printf("gradcache %s: sum of 2 x 3 twos = %g (cuda built: %s)\n", GC_VERSION, value,
           gc_cuda_built() ? "yes" : "no");
    /* the collectives too: a process group of one (not launched) averages to itself */
    gc_process_group *group = gc_process_group_from_env(&(gc_dist_options){GC_DIST_TCP, 0, gc_cpu()});
    bool reduced = group && gc_dist_all_reduce(group, b, GC_DIST_AVG) == GC_OK && gc_dist_world_size(group) == 1;
    gc_process_group_free(group);
    gc_tensor_release(a);
    gc_tensor_release(b);
    gc_tensor_release(total);
    if (value != 12.0 || !reduced) return 1;
    return encode("tests/fixtures/tiny_bert");
}
