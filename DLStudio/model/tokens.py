"""Token conventions shared by the model, the trainer and the decoder."""

import torch

SOS_INDEX, EOS_INDEX = 0, 1   # every DLStudio vocabulary starts with "SOS", "EOS"
SPECIAL_WORDS = ("SOS", "EOS")   # their words, which the archive writes around a sentence


def padding_mask(ids, end_id=EOS_INDEX):
    """True at the positions after a sentence's first EOS (the padding; EOS itself stays);
    ``end_id``: a real model's end token, where it is not DLStudio's.

    Shape: ids (B, T) -> (B, T)
    """
    is_eos = ids == end_id
    return (is_eos.cumsum(dim=1) - is_eos.long()) > 0


def causal_mask(T, device=None):
    """True above the diagonal: position t may not look at positions after t.

    Shape: (T, T)
    """
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(diagonal=1)
