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


def trailing_padding(ids, pad_id):
    """True at a real model's trailing pad ids (its padding), wherever its end token sits:
    mBART writes its language's code after </s>. Shape: ids (B, T) -> (B, T)"""
    return (ids == pad_id).flip(1).cumprod(dim=1).flip(1).bool()


def padding_of(ids, end_id=EOS_INDEX, pad_id=None):
    """A batch's padding: after each first EOS (`padding_mask`: DLStudio's EOS-padded
    sentences), or a real model's trailing ``pad_id`` (`trailing_padding`).
    Shape: ids (B, T) -> (B, T)"""
    return padding_mask(ids, end_id) if pad_id is None else trailing_padding(ids, pad_id)


def causal_mask(T, device=None):
    """True above the diagonal: position t may not look at positions after t.

    Shape: (T, T)
    """
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(diagonal=1)
