"""Exercise `masking`: BERT's masked-language pre-training (Devlin et al. 2019, 3.1).

Every batch, pre-training hides some tokens and asks the model to fill them in. Write
`mask_tokens(ids, special, generator, mask_id, vocab_size, special_ids)`:
    ids (B, T): the batch's token ids; special (B, T) bool: True at [CLS], [SEP] and [PAD],
        which are never selected; special_ids: the ids of the special tokens.
    Select each other token with probability MASK_RATE (0.15). Of the selected ones, 80%
    become mask_id ([MASK]), 10% a random ordinary token (any id in [0, vocab_size) that is
    not in special_ids, each as likely: a random [PAD] would hide a position the model must
    predict), and 10% stay as they were. Every random number comes from ``generator``
    (torch.rand(..., generator=generator), torch.randint(..., generator=generator)):
    pre-training passes a generator of the seed, the epoch and the batch, so that every
    epoch masks anew and a resumed run masks as an unbroken one.
    Returns (corrupted ids (B, T), selected (B, T) bool). Tokens not selected are unchanged.
and `masked_loss(logits, targets, selected)`:
    logits (B, T, V): the model's scores at every position; targets (B, T): the original
    ids. Returns (loss, N): the cross-entropy SUMMED over the N selected positions only (the
    others tell the model nothing it was not shown), and N as an int.
Use log_softmax; F.cross_entropy and F.nll_loss are switched off while the checks run. The
model class below (given) pre-trains with both.

    dlstudio check masking masking.py [--train]
    python3 pretrain_bert.py  (with MyBERT: see docs/bert.md)
"""
import torch

from DLStudio.Transformers import TransformerBERT

MASK_RATE = 0.15


def mask_tokens(ids, special, generator, mask_id=4, vocab_size=1000,
                special_ids=(0, 1, 2, 3, 4)):
    raise NotImplementedError


def masked_loss(logits, targets, selected):
    raise NotImplementedError


# Given: a BERT that pre-trains with your masking and your loss.
class MyBERT(TransformerBERT):
    def mask_tokens(self, ids, special, generator):
        return mask_tokens(ids, special, generator, self.vocab.mask_id, self.vocab.size,
                           self.vocab.special_ids)

    def mlm_loss(self, ids, segments, selected, targets, label_smoothing=0.0, run=None):
        # the padding: where the uncorrupted row (targets) has [PAD]
        logits = (self if run is None else run)(ids, segments, pad=targets == self.pad_id)
        return masked_loss(logits, targets, selected)
