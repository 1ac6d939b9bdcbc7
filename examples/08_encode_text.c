/* Step 8: a pretrained encoder. gc_bert_load reads a BERT-family model in the Hugging Face
 * folder layout (config.json, model.safetensors, tokenizer.json) -- here
 * sentence-transformers/all-MiniLM-L6-v2, which `gradcache model fetch minilm` puts in
 * models/minilm -- and gc_encode_texts turns texts into unit vectors, so that a dot product
 * is their cosine similarity. Two sentences that mean the same thing score higher than
 * either does with an unrelated one.
 * Build: cc 08_encode_text.c $(pkg-config --cflags --libs gradcache). Usage: 08_encode_text
 * [MODEL_DIR] (default models/minilm). Exit status 0 when the paraphrases are the closest
 * pair; 77 (skipped) when there is no model folder. */
#include <stdio.h>
#include <sys/stat.h>

#include <gradcache/gradcache.h>

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "models/minilm";
    struct stat info;
    if (stat(dir, &info) != 0) {
        printf("skip: no model folder %s (gradcache model fetch minilm makes it)\n", dir);
        return 77;
    }
    gc_text_encoder encoder;
    gc_tokenizer *tokenizer;
    gc_bert_unused unused; /* the file's weights the encoder does not use (BertModel's pooler) */
    if (gc_bert_load(dir, gc_cpu(), &encoder, &tokenizer, &unused) != GC_OK) {
        fprintf(stderr, "%s\n", gc_last_error());
        return 1;
    }
    const char *texts[] = {"A dog is running through the park.", "A puppy runs across the grass outside.",
                           "Interest rates rose again this quarter."};
    gc_tensor *vectors = gc_encode_texts(&encoder, tokenizer, texts, 3, 128, 32); /* [3, 384] */
    gc_tensor *similarity = vectors ? gc_matmul(vectors, vectors, false, true) : NULL; /* [3, 3] */
    if (!similarity) {
        fprintf(stderr, "%s\n", gc_last_error());
        return 1;
    }
    const float *s = gc_data(similarity);
    printf("%lld-wide vectors; cosine similarities:\n", (long long)vectors->shape[1]);
    for (int i = 0; i < 3; i++) printf("  %.3f %.3f %.3f  %s\n", s[3 * i], s[3 * i + 1], s[3 * i + 2], texts[i]);
    bool right = s[1] > s[2] && s[1] > s[5];
    printf("example 08_encode_text: %s\n", right ? "ok" : "WRONG");
    gc_tensor_release(vectors);
    gc_tensor_release(similarity);
    gc_text_encoder_free(&encoder);
    gc_tokenizer_free(tokenizer);
    gc_bert_unused_free(&unused);
    gc_shutdown();
    return right ? 0 : 1;
}
