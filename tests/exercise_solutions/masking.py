import torch

from DLStudio.Transformers import TransformerBERT

MASK_RATE = 0.15


def mask_tokens(ids, special, generator, mask_id=4, vocab_size=1000,
                special_ids=(0, 1, 2, 3, 4)):
    draw = torch.rand(ids.shape, generator=generator)
    selected = (draw < MASK_RATE) & ~special
    how = torch.rand(ids.shape, generator=generator)
    ordinary = torch.tensor([i for i in range(vocab_size) if i not in special_ids])
    random_ids = ordinary[torch.randint(len(ordinary), ids.shape, generator=generator)]
    corrupted = ids.clone()
    corrupted[selected & (how < 0.8)] = mask_id
    swap = selected & (how >= 0.8) & (how < 0.9)
    corrupted[swap] = random_ids[swap]
    return corrupted, selected


def masked_loss(logits, targets, selected):
    logp = torch.log_softmax(logits, dim=-1)
    per_token = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return per_token[selected].sum(), int(selected.sum())


class MyBERT(TransformerBERT):
    def mask_tokens(self, ids, special, generator):
        return mask_tokens(ids, special, generator, self.vocab.mask_id, self.vocab.size,
                           self.vocab.special_ids)

    def mlm_loss(self, ids, segments, selected, targets, label_smoothing=0.0, run=None):
        logits = (self if run is None else run)(ids, segments, pad=targets == self.pad_id)
        return masked_loss(logits, targets, selected)
