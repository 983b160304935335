"""Exercise `masks`: the causal mask and the padding mask.

Masks are bool tensors, True where attention is NOT allowed (the model fills those scores
with -inf before the softmax).

`causal_mask(T, device=None)` -> (T, T): True above the diagonal. Row t is the position
    that looks; it may see positions 0..t (itself included), not t + 1 and later.
`padding_mask(ids)`: ids (B, T) token ids -> (B, T), True at the padding. A sentence is
    SOS (id 0), its words, then EOS (id 1); the rows are padded with more EOS. The padding
    is every position after a row's first EOS; that first EOS itself is not padding (the
    model must learn to predict it). A row may have no padding at all.
The model's own masks are switched off while the checks run; the checks put yours into a
model and see whether the decoder can see the future and the encoder reads the padding.

    dlstudio check masks masks.py
"""
import torch

SOS_INDEX, EOS_INDEX = 0, 1


def causal_mask(T, device=None):
    raise NotImplementedError


def padding_mask(ids):
    raise NotImplementedError
