#!/usr/bin/env python3
"""Tiny decoder-family models and byte-level BPE tokenizers in the Hugging Face layout, with
transformers' outputs for them, for tests/test_decoder_parity.c and tests/test_bpe.c. Run by
hand (a minute) with PyTorch and transformers in a venv:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch transformers tokenizers safetensors
    /tmp/venv/bin/python tests/make_decoder_fixture.py           # everything below
    /tmp/venv/bin/python tests/make_decoder_fixture.py mistral   # tiny_mistral/ and its references alone

(tiny_mistral was made with transformers 4.51.3: its sliding window is the one of 4.51.3 and later,
q - window < k <= q; 4.40's lets a query see one key more.)

It writes under tests/fixtures/:
  - bpe_gpt2.json, bpe_qwen2.json, bpe_llama3.json: byte-level BPE tokenizers trained here by
    the tokenizers library's BPE trainer on the strings below (a small vocabulary), each with
    the real pre-tokenizer of its family: GPT-2's ByteLevel regex; Qwen2's NFC normaliser and
    Split regex (single digits) before a ByteLevel without regex, its <|endoftext|> appended by
    a TemplateProcessing (as Qwen3-Embedding's is); Llama-3's Split regex (runs of up to three
    digits) behind a <|begin_of_text|> template, and ignore_merges;
  - bpe_cases.json: a few hundred strings of many scripts (Latin with composed and decomposed
    accents, CJK, Arabic, Devanagari, emoji with joiners, digits, runs of whitespace and line
    breaks, contractions in any case, special tokens written in the text) and each
    tokenizer's ids for them;
  - tiny_qwen2/, tiny_qwen3/, tiny_llama/: model folders with random weights, as
    Qwen2ForCausalLM (tied embeddings: no lm_head, names under "model."), Qwen3Model (bare
    names, q/k norms, a head_dim of its own, sentence-transformers' last-token pooling and
    Normalize, a query prompt) and LlamaForCausalLM (an untied lm_head, linear rope scaling,
    two shards with model.safetensors.index.json) save them; grouped-query attention in all;
  - tiny_mistral/: MistralModel (bare names) with a sliding_window of 4, shorter than most of
    its texts (up to 20 tokens, Llama-3's tokenizer above), so that the window decides;
  - decoder_<name>_v1.bin (tests/fixture.h's format): for a few texts tokenized by the
    folder's tokenizer, transformers' last hidden states in f32 with right padding and the
    last-token embeddings in f32 with left padding (transformers' recipe for decoder
    embedders), and the same in f64 from the plain-PyTorch decoder below, which is checked
    here against transformers in f32 first (it must agree to 1e-5): transformers computes
    RMSNorm, rotary angles and the attention softmax in f32 even for an f64 model, so it
    cannot give f64 references itself.
"""
import json
import math
import os
import random
import sys
import unicodedata

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from make_bert_fixture import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                 r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                  r"""\s*[\r\n]+|\s+(?!\S)|\s+""")

# --- the strings ------------------------------------------------------------------------

WORDS = ["the", "The", "cat", "sat", "on", "mat", "retrieval", "embedding", "gradient", "cache", "Ünïcödé",
         "naïve", "café", "cafe\u0301", "Å", "A\u030a", "ﬁne", "straße", "ΣΊΣΥΦΟΣ", "Москва", "привет",
         "東京", "日本語の文章", "中文句子", "한국어", "مرحبا", "العربية", "हिन्दी", "नमस्ते", "ไทย",
         "עברית", "Ελληνικά", "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "∑", "√2", "x²", "½", "Ⅻ", "٣٤", "१२३"]
PUNCTUATION = [".", ",", "!", "?", "...", "—", "-", "(", ")", "\"", "'", ":", ";", "«", "»", "“", "”", "@#$%", "&&"]
CONTRACTIONS = ["don't", "I'M", "we'Ve", "they'LL", "she'd", "it's", "It'S", "you're", "O'Neil", "'s", "ſ'ſ", "'ſ"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\r\n", "\u00a0", "\u3000", "\u2003", " \t\n"]
NUMBERS = ["7", "42", "123", "2024", "1234567", "3.14159", "1,000,000", "0x1F", "10e-3", "٣٤٥"]


def strings():
    rng = random.Random(29)
    out = ["", " ", "a", "Hello world", "Hello  world  ", " leading space", "trailing space ", "\n", "   ",
           "don't stop", "HELLO'S", "12345678901", "Instruct: Given a query, find passages\nQuery: what is it?",
           "<|endoftext|>", "a<|endoftext|>b", "<|im_start|>user\nhi<|im_end|>", "x <|endoftext|> y", "aaaaaaaaaaaa",
           "\r\n\r\n", "a\r\nb", "tab\there", "end.\n\n\nnext", "  \n  x", "x  \n  ", "ü", "u\u0308", "e\u0301\u0301",
           "\u0301start", "a\u0323\u0302", "ệ", "한", "\u1100\u1161\u11a8", "한국어 문장입니다", "ﬀ", "Ⅸ",
           "x'ſt", "IT'ſ ok", "WE'RE", "they'Re", "a'LL'd", "'ﬆ"]
    pools = [WORDS, PUNCTUATION, CONTRACTIONS, SPECIALS, SPACES, NUMBERS]
    weights = [10, 3, 2, 1, 4, 3]
    while len(out) < 300:
        parts = []
        for _ in range(rng.randint(1, 9)):
            pool = rng.choices(pools, weights)[0]
            parts.append(rng.choice(pool))
            if rng.random() < 0.5:
                parts.append(" ")
        out.append("".join(parts))
    return out


def training_text():
    rng = random.Random(7)
    lines = strings()
    return lines * 3 + [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(200)]

# --- the tokenizers -------------------------------------------------------------------------


def train(kind, vocab_size):
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] if kind != "llama3" else ["<|begin_of_text|>",
                                                                                       "<|end_of_text|>"]
    tok = Tokenizer(models.BPE(ignore_merges=kind == "llama3"))
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.post_processor = processors.ByteLevel(trim_offsets=True)
    else:
        pattern = QWEN2_PATTERN if kind == "qwen2" else LLAMA3_PATTERN
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    if kind == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer)
    if kind == "qwen2":
        eos = tok.token_to_id("<|endoftext|>")
        tok.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", eos)])
    if kind == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])])
    return tok

# --- the models -------------------------------------------------------------------------------


def make_model(name, tokenizer):
    vocab = tokenizer.get_vocab_size() + 3  # a few rows no token uses, as real models have
    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6,
                  attn_implementation="eager")
    if name == "qwen2":
        config = transformers.Qwen2Config(rope_theta=1e6, tie_word_embeddings=True, **common)
        model = transformers.Qwen2ForCausalLM(config)
    elif name == "qwen3":
        config = transformers.Qwen3Config(rope_theta=1e6, head_dim=16, tie_word_embeddings=True, **common)
        model = transformers.Qwen3Model(config)
    elif name == "mistral":
        config = transformers.MistralConfig(rope_theta=1e4, sliding_window=MISTRAL_WINDOW, **common)
        model = transformers.MistralModel(config)
    else:
        config = transformers.LlamaConfig(rope_theta=5e5, rope_scaling={"rope_type": "linear", "factor": 2.0},
                                          tie_word_embeddings=False, **common)
        model = transformers.LlamaForCausalLM(config)
    torch.manual_seed({"qwen2": 1, "qwen3": 2, "llama": 3, "mistral": 4}[name])
    with torch.no_grad():
        for p in model.parameters():  # large enough that a wrong formula shows (0.02 is nearly linear)
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() > 1 else 0.2) + (1.0 if p.dim() == 1 else 0.0))
        for n, p in model.named_parameters():
            if n.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.2)
    return model.eval()


def save_folder(name, model, tokenizer):
    folder = os.path.join(FIXTURES, "tiny_" + name)
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        if os.path.isfile(os.path.join(folder, old)):
            os.remove(os.path.join(folder, old))
    model.save_pretrained(folder, max_shard_size="60KB" if name == "llama" else "10GB")
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    if name == "qwen3":  # sentence-transformers' files, as Qwen3-Embedding has them
        os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
        with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as f:
            json.dump({"word_embedding_dimension": 32, "pooling_mode_cls_token": False,
                       "pooling_mode_mean_tokens": False, "pooling_mode_lasttoken": True}, f, indent=2)
        with open(os.path.join(folder, "modules.json"), "w") as f:
            json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                       {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                       {"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"}], f, indent=2)
        with open(os.path.join(folder, "config_sentence_transformers.json"), "w") as f:
            json.dump({"prompts": {"query": "Instruct: Given a question, find its answer\nQuery:", "document": ""},
                       "default_prompt_name": None}, f, indent=2)
    return folder

# --- the decoder in plain PyTorch (any dtype, f64 throughout) ----------------------------------


def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def plain_decoder(w, config, ids, mask, prefix, window=None):
    """The last hidden state of Llama / Qwen2 / Qwen3 / Mistral for ids [B, T] with mask [B, T];
    with a window, query q sees key k when q - window < k <= q (transformers >= 4.51's Mistral)."""
    dtype = next(iter(w.values())).dtype
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    batch, length = ids.shape
    scale = 1.0
    if getattr(config, "rope_scaling", None) and config.rope_scaling.get("rope_type") == "linear":
        scale = config.rope_scaling["factor"]
    theta = config.rope_parameters["rope_theta"] if hasattr(config, "rope_parameters") and config.rope_parameters \
        else config.rope_theta
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)) / scale
    angles = torch.arange(length, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat((angles.cos(), angles.cos()), -1).to(dtype)
    sin = torch.cat((angles.sin(), angles.sin()), -1).to(dtype)
    causal = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
    if window:  # the keys window or more before the query hidden too
        causal |= torch.tril(torch.ones(length, length, dtype=torch.bool), -window)
    hidden = (~causal)[None, None] & (mask[:, None, None, :] > 0)
    x = w[prefix + "embed_tokens.weight"][ids.long()]
    for i in range(config.num_hidden_layers):
        p = "%slayers.%d." % (prefix, i)
        h = rms_norm(x, w[p + "input_layernorm.weight"], config.rms_norm_eps)

        def project(name, n):
            y = h @ w[p + "self_attn.%s.weight" % name].T
            if p + "self_attn.%s.bias" % name in w:
                y = y + w[p + "self_attn.%s.bias" % name]
            y = y.view(batch, length, n, head_dim)
            norm = p + "self_attn.%s_norm.weight" % name[0]
            if norm in w:
                y = rms_norm(y, w[norm], config.rms_norm_eps)
            return y.transpose(1, 2)

        q, k, v = project("q_proj", heads), project("k_proj", kv_heads), project("v_proj", kv_heads)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(head_dim)
        scores = scores.masked_fill(~hidden, float("-inf"))
        probs = torch.nan_to_num(torch.softmax(scores, -1))  # a left-padded pad row sees nothing
        context = (probs @ v).transpose(1, 2).reshape(batch, length, heads * head_dim)
        out = context @ w[p + "self_attn.o_proj.weight"].T
        if p + "self_attn.o_proj.bias" in w:
            out = out + w[p + "self_attn.o_proj.bias"]
        x = x + out
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], config.rms_norm_eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    return rms_norm(x, w[prefix + "norm.weight"], config.rms_norm_eps)

# --- references ------------------------------------------------------------------------------


def pad(rows, left):
    length = max(len(r) for r in rows)
    ids = [([0] * (length - len(r)) + r) if left else (r + [0] * (length - len(r))) for r in rows]
    mask = [([0.0] * (length - len(r)) + [1.0] * len(r)) if left else ([1.0] * len(r) + [0.0] * (length - len(r)))
            for r in rows]
    return torch.tensor(ids, dtype=torch.int32), torch.tensor(mask, dtype=torch.float32)


def references(name, model, tokenizer, texts):
    rows = [e.ids for e in tokenizer.encode_batch(texts)]
    base = model.model if hasattr(model, "model") else model
    prefix = "model." if hasattr(model, "model") else ""
    right_ids, right_mask = pad(rows, left=False)
    left_ids, left_mask = pad(rows, left=True)
    with torch.no_grad():
        hidden32 = base(input_ids=right_ids.long(), attention_mask=right_mask.long()).last_hidden_state
        left32 = base(input_ids=left_ids.long(), attention_mask=left_mask.long()).last_hidden_state[:, -1]
        window = getattr(model.config, "sliding_window", None) if name == "mistral" else None
        w32 = {n: t.float() for n, t in model.state_dict().items()}
        plain32 = plain_decoder(w32, model.config, right_ids, right_mask, prefix, window)
        real = right_mask[..., None] > 0
        difference = ((plain32 - hidden32).abs() * real).max().item()
        assert difference < 1e-5, "the plain decoder is not transformers' (%g)" % difference
        if window:  # a window one key wider (transformers 4.40's) is not the same function
            wider = ((plain_decoder(w32, model.config, right_ids, right_mask, prefix, window + 1) - hidden32).abs()
                     * real).max().item()
            assert wider > 1e-2, "the window's width makes no difference (%g)" % wider
            print("%s: a window of %d instead of %d differs by %.3g" % (name, window + 1, window, wider))
        w64 = {n: t.double() for n, t in model.state_dict().items()}
        hidden64 = plain_decoder(w64, model.config, right_ids, right_mask.double(), prefix, window)
        last = right_mask.sum(1).long() - 1
        pooled64 = hidden64[torch.arange(len(rows)), last]
    print("%s: plain against transformers in f32: %.3g" % (name, difference))
    write_fixture(os.path.join(FIXTURES, "decoder_%s_v1.bin" % name), [
        ("ids", right_ids), ("mask", right_mask), ("hidden_f32", hidden32.float()), ("last_f32_left", left32.float()),
        ("hidden_f64", hidden64), ("last_f64", pooled64)])


MISTRAL_WINDOW = 4
MISTRAL_TEXTS = ["the cat sat on the mat", "a", "retrieval embedding gradient cache", "Hello world, 123 café",
                 "the gradient of the cache"]


def main_mistral():
    """tiny_mistral/ and decoder_mistral_v1.bin alone, with the committed Llama-3 tokenizer."""
    tokenizer = Tokenizer.from_file(os.path.join(FIXTURES, "bpe_llama3.json"))
    lengths = [len(tokenizer.encode(t).ids) for t in MISTRAL_TEXTS]
    assert max(lengths) <= 20 and sum(n > MISTRAL_WINDOW for n in lengths) >= 3, lengths
    print("mistral: text lengths %s, window %d" % (lengths, MISTRAL_WINDOW))
    model = make_model("mistral", tokenizer)
    save_folder("mistral", model, tokenizer)
    references("mistral", model, tokenizer, MISTRAL_TEXTS)


def main():
    if sys.argv[1:] == ["mistral"]:
        return main_mistral()
    random.seed(0)
    torch.manual_seed(0)
    cases = strings()
    tokenizers_by_kind = {kind: train(kind, size) for kind, size in (("gpt2", 420), ("qwen2", 420), ("llama3", 420))}
    ids, pieces = {}, {}
    for kind, tok in tokenizers_by_kind.items():
        tok.save(os.path.join(FIXTURES, "bpe_%s.json" % kind))
        ids[kind] = [tok.encode(s).ids for s in cases]
        # the pre-tokenizer's pieces alone (code point offsets into the normalised text): a
        # split's difference shows here even where the small vocabulary's merges hide it
        split = pre_tokenizers.Split(Regex({"gpt2": GPT2_PATTERN, "qwen2": QWEN2_PATTERN, "llama3": LLAMA3_PATTERN}[kind]),
                                     behavior="isolated")
        pieces[kind] = [[end for _, (_, end) in split.pre_tokenize_str(unicodedata.normalize("NFC", s))]
                        for s in cases]
    with open(os.path.join(FIXTURES, "bpe_cases.json"), "w") as f:
        json.dump({"strings": cases, "ids": ids, "piece_ends": pieces}, f, ensure_ascii=False, indent=0)
    texts = ["Hello world", "the cat sat, naïve café", "東京 123 😀!", "a", "Instruct: find it\nQuery:what?"]
    for name, kind in (("qwen2", "qwen2"), ("qwen3", "qwen2"), ("llama", "llama3")):
        model = make_model(name, tokenizers_by_kind[kind])
        save_folder(name, model, tokenizers_by_kind[kind])
        references(name, model, tokenizers_by_kind[kind], texts)
    main_mistral()


if __name__ == "__main__":
    sys.exit(main())
