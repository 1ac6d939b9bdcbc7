"""sentence-transformers' own Gradient Cache, CachedMultipleNegativesRankingLoss, as the
`--sentence-transformers FOLDER` model of bench/torch_gradcache.py: what a user of that
library runs to train a BERT (all-MiniLM-L6-v2 here) at a batch larger than fits, set beside
the engine's GradCache on the same folder (`gradcache bench memory --init FOLDER`).

The model is the folder's BERT (transformers' BertModel, its attention as transformers
chooses: SDPA where the version has it) with mean pooling over the mask, tied (one encoder for
queries and passages, as --init makes the engine's). The loss scores cosine similarities
times 1 / temperature (the library's scale), query i's positive passage i. A GradCache step
is CachedMultipleNegativesRankingLoss(mini_batch_size = the chunk) and its backward; the plain
step, MultipleNegativesRankingLoss, the same loss over one graph.

The batches are token ids drawn here rather than texts through the tokenizer (the same ids
for the same seed, and no tokenizing inside the timed step): [CLS], 0 to max_length - 2 word
pieces drawn from the vocabulary past its special tokens, [SEP], padding; the engine draws
random words, which its tokenizer cuts to the same kind of lengths.
"""
import torch
from sentence_transformers import SentenceTransformer, losses, models



def synthetic_features(rows, max_length, tokenizer, generator, device):
    """The inputs of a SentenceTransformer's forward for `rows` texts: input_ids,
    attention_mask and token_type_ids, each [rows, max_length], the special tokens the
    tokenizer's, the word pieces any id past them."""
    lengths = torch.randint(0, max_length - 1, (rows,), generator=generator)  # word pieces per text
    ids = torch.randint(max(tokenizer.all_special_ids) + 1, len(tokenizer), (rows, max_length), generator=generator)
    positions = torch.arange(max_length)[None, :]
    last = lengths[:, None] + 1  # where [SEP] goes
    ids = torch.where(positions == 0, tokenizer.cls_token_id, torch.where(positions == last, tokenizer.sep_token_id, ids))
    mask = positions <= last
    ids = torch.where(mask, ids, tokenizer.pad_token_id)
    return {"input_ids": ids.to(device), "attention_mask": mask.long().to(device),
            "token_type_ids": torch.zeros_like(ids).to(device)}


class CachedMnrlModel:
    """The model side of bench/torch_gradcache.py's benchmark: batch(rows), step(batch,
    chunk, loss) -> a function that runs one step, zero_grad(), description."""

    def __init__(self, folder, max_length, temperature, seed, device):
        torch.manual_seed(seed)
        transformer = models.Transformer(folder, max_seq_length=max_length)
        pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
        self.model = SentenceTransformer(modules=[transformer, pooling], device=str(device))
        self.model.train()
        self.scale, self.max_length, self.device = 1 / temperature, max_length, device
        self.tokenizer = transformer.tokenizer
        self.generator = torch.Generator().manual_seed(seed + 1)
        attention = getattr(transformer.auto_model.config, "_attn_implementation", "eager")
        self.description = (f"sentence-transformers' CachedMultipleNegativesRankingLoss on {folder} (tied, max "
                            f"length {max_length}, mean pooling, {attention} attention)")

    def batch(self, rows):
        return [synthetic_features(rows, self.max_length, self.tokenizer, self.generator, self.device) for _ in range(2)]

    def step(self, batch, chunk, loss):
        """loss: "full" (the library computes its own, CachedMNRL a mini-batch of rows at a time)."""
        if chunk:
            objective = losses.CachedMultipleNegativesRankingLoss(self.model, scale=self.scale, mini_batch_size=chunk)
        else:
            objective = losses.MultipleNegativesRankingLoss(self.model, scale=self.scale)

        def run():
            # the model's forward adds its outputs to the features it is given: a copy each step
            objective([dict(features) for features in batch], None).backward()
        return run

    def zero_grad(self):
        self.model.zero_grad(set_to_none=True)
