"""Prompts of different lengths in one batch. Each row is padded on the left to the longest,
so that every row's newest token sits at the same index and one step decodes them all. Two
things keep a row what it would be alone:

    its pad keys are masked      a real query never sees a pad; a pad query sees itself only
                                 (so that no row of the softmax is empty: all -inf is NaN)
    its positions count from     position = index - pads[b]: the rotary angles, the learned
    its first real token         or sinusoidal position codes of the row alone

A sliding window needs nothing more: within a row, index and position differ by a constant.

    with left_padded(gpt, pads):        # pads (B,): the pad tokens each row begins with
        logits = gpt(ids)               # ids (B, T), row b = pads[b] pads, then its prompt

While padded, the embeddings generator, each self-attention and each RotaryEmbedding hold
``left_pads`` (None otherwise: the model as it always is).
"""

import contextlib

import torch

__all__ = ["left_padded", "pad_mask", "positions", "padded_rows"]


def padded_rows(rows, pad_id, device=None):
    """Lists of ids of different lengths as one (B, T) tensor padded on the left with
    ``pad_id`` (any id of the vocabulary: its keys are masked), and pads (B,)."""
    T = max(len(row) for row in rows)
    pads = torch.tensor([T - len(row) for row in rows], device=device)
    ids = torch.tensor([[pad_id] * (T - len(row)) + list(row) for row in rows], device=device)
    return ids, pads


def positions(T, offset, pads, most=None):
    """Each row's positions of indices offset .. offset + T - 1, counted from its first real
    token (a pad's clamped to 0: its keys are masked; ``most``: the last position a table
    has, for a row that has already ended there). Shape: pads (B,) -> (B, T)"""
    index = torch.arange(offset, offset + T, device=pads.device)
    return (index[None, :] - pads[:, None]).clamp(min=0, max=most)


def pad_mask(mask, x, offset, pads):
    """``mask`` with each row's pad keys masked too, but for a pad query's own key.
    Shape: mask broadcastable to (B, H, T_q, T_k) or None, x (B, T_q, M)
        -> (B, 1 | H, T_q, T_k), True where a query may not look"""
    T_q = x.size(1)
    q = torch.arange(offset, offset + T_q, device=x.device)[None, None, :, None]
    k = torch.arange(offset + T_q, device=x.device)[None, None, None, :]
    pad = (k < pads[:, None, None, None]) & (k != q)                   # (B, 1, T_q, T_k)
    return pad if mask is None else mask | pad


@contextlib.contextmanager
def left_padded(gpt, pads):
    """Inside ``with``, ``gpt`` reads rows padded on the left by ``pads`` (B,) tokens."""
    attentions = [layer.self_attention for layer in gpt.master_decoder.basic_decoder_arr]
    rotaries = {id(a.rotary): a.rotary for a in attentions if a.rotary is not None}
    parts = [gpt.embeddings_generator, *attentions, *rotaries.values()]
    for part in parts:
        part.left_pads = pads
    try:
        yield
    finally:
        for part in parts:
            part.left_pads = None
