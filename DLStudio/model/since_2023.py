"""What changed since 2023, as switches of the same classes (read after since_2017.py). Each
is a few lines where the architecture attends, in today's small open models:

    qk_norm=True          each head's queries and keys    Henry et al. 2020; Dehghani et al.
                          normalised before the scores     2023 (ViT-22B)   (Qwen3, Gemma 3)
    window=W              a token sees the last W tokens  Child et al. 2019; Beltagy et al.
                          only (itself included)           2020; Jiang et al. 2023 (Mistral)
    nope_layers=(i, ...)  layers without rotary positions Kazemnejad et al. 2023 (SmolLM3)

Why each. *QK-norm*: the scores q . k / sqrt(s) grow with the size of q and k; in large
models some heads' scores grow until their softmax is one-hot and training diverges.
RMS-normalising each head's q and k (one learned gain per number of a head, shared by the
heads of a layer) bounds the scores; Qwen3 applies it before the rotation. *A sliding
window*: each token attends to the W tokens up to it, so a layer's cost and its cache stop
growing with the text; stacked layers still pass information further back (layer l reaches
l W tokens). *NoPE layers*: a causal model can infer order without any position code (a
token at position t sees t tokens), and a few layers without rotary positions help it reach
beyond the lengths it was trained on.

Shapes: T_q queries, T_k keys (the cached ones first), s_qkv a head's width.
"""

import torch

from .since_2017 import heads_must_read

__all__ = ["switches", "qk_norms", "windowed", "without_positions"]


def switches(qk_norm, window, nope_layers):
    """The three settings, checked: (qk_norm, window, nope_layers as a tuple)."""
    if not isinstance(qk_norm, bool):
        raise ValueError(f"qk_norm is True or False, got {qk_norm!r}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 1):
        raise ValueError(f"window is a number of tokens (>= 1: each token sees itself and "
                         f"the window - 1 before it), or None for no window; got {window!r}")
    layers = tuple(nope_layers or ())
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in layers):
        raise ValueError(f"nope_layers are layer indices (0, 1, ...), got {nope_layers!r}")
    return qk_norm, window, layers


def qk_norms(attention, xformer):
    """With ``qk_norm``: the two norms of an attention module (queries, keys; the model's
    norm over a head's s_qkv numbers, shared by its heads), handed to each head as
    ``head.q_norm``, ``head.k_norm`` (not registered there: the weights are the module's
    once). A student's head with a forward of its own must read them or call super().
    Returns (q_norm, k_norm), or (None, None) without the switch."""
    if not getattr(xformer, "qk_norm", False):
        return None, None
    q_norm, k_norm = xformer.norm_layer(attention.qkv_size), xformer.norm_layer(
        attention.qkv_size)
    heads_must_read(attention.heads, "q_norm", "with qk_norm=True its queries and keys "
                    "would not be normalised: write Q, K = self.q_norm(Q), self.k_norm(K) "
                    "before the rotation (see AttentionHead.forward), or build the model "
                    "without qk_norm.")
    for head in attention.heads:
        head.__dict__.update(q_norm=q_norm, k_norm=k_norm)
    return q_norm, k_norm


def windowed(mask, x, offset, window):
    """``mask`` with every key more than ``window`` - 1 positions before its query masked
    too: query i of ``x`` (at position offset + i) sees keys j with offset + i - window < j.
    The cache keeps every key; the mask decides, so decoding with and without it agree.
    Shape: mask broadcastable to (B, H, T_q, T_k) or None, x (B, T_q, M)
        -> (B | 1, H | 1, T_q, T_k), True where a query may not look"""
    T_q = x.size(1)
    q = torch.arange(offset, offset + T_q, device=x.device)[:, None]     # (T_q, 1)
    k = torch.arange(offset + T_q, device=x.device)[None, :]             # (1, T_k)
    far = (k <= q - window)[None, None]                                  # (1, 1, T_q, T_k)
    return far if mask is None else mask | far


def without_positions(attention):
    """A NoPE layer: its self-attention (and heads) turn nothing, whatever the model's
    positions."""
    attention.rotary = None
    for head in attention.heads:
        head.rotary = None
