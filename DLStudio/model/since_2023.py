"""What changed since 2023, as switches of the same classes (read after since_2017.py). Each
is a few lines where the architecture attends, in today's small open models:

    qk_norm=True          each head's queries and keys    Henry et al. 2020; Dehghani et al.
                          normalised before the scores     2023 (ViT-22B)   (Qwen3, Gemma 3)
    qk_norm="all_heads"   ... over all heads at once        (OLMo 2)
    window=W              a token sees the last W tokens  Child et al. 2019; Beltagy et al.
                          only (itself included)           2020; Jiang et al. 2023 (Mistral)
    window_layers=(i, ..) the layers that slide; the     Gemma Team 2024, 2025 (Gemma 2, 3:
    window_rope_base      others see all, with their own   five local layers to one global)
                          rotary base
    nope_layers=(i, ...)  layers without rotary positions Kazemnejad et al. 2023 (SmolLM3)
    norm_placement=       x + Norm(Sublayer(x)): the norm  OLMo et al. 2024 (OLMo 2)
      "output"            on the sublayer's output
    norm_placement=       x + Norm(Sublayer(Norm(x))):     Ding et al. 2021 (CogView's
      "sandwich"          before and after                 Sandwich-LN; Gemma 2, 3)
    score_scale=c         scores q . k times c instead of  (Gemma 2, 3: query_pre_attn_scalar)
                          1 / sqrt(s_qkv)
    norm="rmsnorm_plus_one", feed_forward="geglu": Gemma's RMSNorm (gain 1 + g) and GELU-gated
                          feed-forward network (since_2017.RMSNorm, SwiGLU)

Why each. *QK-norm*: the scores q . k / sqrt(s) grow with the size of q and k; in large
models some heads' scores grow until their softmax is one-hot and training diverges.
RMS-normalising each head's q and k (one learned gain per number of a head, shared by the
heads of a layer) bounds the scores; Qwen3 applies it before the rotation. *A sliding
window*: each token attends to the W tokens up to it, so a layer's cost and its cache stop
growing with the text; stacked layers still pass information further back (layer l reaches
l W tokens). *NoPE layers*: a causal model can infer order without any position code (a
token at position t sees t tokens), and a few layers without rotary positions help it reach
beyond the lengths it was trained on.

*Norms after the sublayers*: with the norm before each sublayer only (pre-LN), what a
sublayer adds to the residual stream is unbounded, and in long runs a few layers' outputs
grow until training spikes; a norm on each sublayer's output bounds what it adds (OLMo 2
drops the norm before; Gemma keeps both). *Local and global layers*: Gemma 3 lets five of
every six layers slide over a short window (a small cache) and one see everything, and gives
the two kinds their own rotary bases (10,000 locally, 1,000,000 globally).

Shapes: T_q queries, T_k keys (the cached ones first), s_qkv a head's width.
"""

import torch
import torch.nn as nn

from .overrides import OverrideError
from .since_2017 import heads_must_read, rotary_heads

__all__ = ["set_switches", "qk_norms", "across_heads", "score_scale", "sublayer_norms",
           "windowed", "per_layer", "without_positions", "NORM_PLACEMENTS"]

NORM_PLACEMENTS = (None, "output", "sandwich")


def _layers(value, name):
    layers = tuple(value or ())
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in layers):
        raise ValueError(f"{name} are layer indices (0, 1, ...), got {value!r}")
    return layers


def set_switches(xformer, *, qk_norm, window, nope_layers, norm_placement, score_scale,
                 window_layers, window_rope_base):
    """The settings of this file, checked, as attributes of ``xformer`` (its norm_first
    already set)."""
    if qk_norm not in (False, True, "all_heads"):
        raise ValueError(f"qk_norm is True, False or 'all_heads', got {qk_norm!r}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 1):
        raise ValueError(f"window is a number of tokens (>= 1: each token sees itself and "
                         f"the window - 1 before it), or None for no window; got {window!r}")
    if norm_placement not in NORM_PLACEMENTS:
        raise ValueError(f"norm_placement is None (the layout's), 'output' or 'sandwich', "
                         f"got {norm_placement!r}")
    if norm_placement and not xformer.norm_first:
        raise ValueError(f"norm_placement={norm_placement!r} adds norms to a pre-LN layout "
                         "(norm_first=True, layout 'PreLN'): post-LN has its norm after the sum")
    for name, value in (("score_scale", score_scale), ("window_rope_base", window_rope_base)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or value <= 0):
            raise ValueError(f"{name} is a positive number or None, got {value!r}")
    xformer.qk_norm, xformer.window, xformer.norm_placement = qk_norm, window, norm_placement
    xformer.nope_layers = _layers(nope_layers, "nope_layers")
    xformer.window_layers = None if window_layers is None else _layers(window_layers,
                                                                       "window_layers")
    xformer.score_scale, xformer.window_rope_base = score_scale, window_rope_base


def qk_norms(attention, xformer):
    """With ``qk_norm``: the two norms of an attention module (queries, keys; the model's
    norm over a head's s_qkv numbers, shared by its heads), handed to each head as
    ``head.q_norm``, ``head.k_norm`` (not registered there: the weights are the module's
    once). A student's head with a forward of its own must read them or call super().
    With ``qk_norm="all_heads"`` the norms are over all H (keys: G) heads' numbers at once:
    they are the attention's alone (`across_heads`), so its heads must be the standard ones.
    Returns (q_norm, k_norm), or (None, None) without the switch."""
    kind = getattr(xformer, "qk_norm", False)
    if not kind:
        return None, None
    s = attention.qkv_size
    if kind == "all_heads":
        G = getattr(xformer, "kv_heads", None) or attention.num_atten_heads
        forward = type(attention.heads[0]).forward          # the standard head's, or own
        if getattr(forward, "__qualname__", "") != "TransformerParts.AttentionHead.forward":
            raise OverrideError(f"{type(attention.heads[0]).__qualname__} has a forward of its "
                                "own, but qk_norm='all_heads' normalises every head's queries "
                                "together, which no single head sees: override "
                                "SelfAttention instead, or use qk_norm=True")
        attention.qk_across_heads = True                     # read by the batched path
        return (xformer.norm_layer(attention.num_atten_heads * s), xformer.norm_layer(G * s))
    q_norm, k_norm = xformer.norm_layer(s), xformer.norm_layer(s)
    heads_must_read(attention.heads, "q_norm", "with qk_norm=True its queries and keys "
                    "would not be normalised: write Q, K = self.q_norm(Q), self.k_norm(K) "
                    "before the rotation (see AttentionHead.forward), or build the model "
                    "without qk_norm.")
    for head in attention.heads:
        head.__dict__.update(q_norm=q_norm, k_norm=k_norm)
    return q_norm, k_norm


def across_heads(norm, X):
    """``norm`` over all heads' numbers of each position at once (qk_norm="all_heads").
    Shape: X (B, H, T, s_qkv) -> (B, H, T, s_qkv)"""
    B, H, T, s = X.shape
    return norm(X.transpose(1, 2).reshape(B, T, H * s)).view(B, T, H, s).transpose(1, 2)


def score_scale(attention, xformer):
    """With ``score_scale``: the number the scores q . k are multiplied by (instead of
    1 / sqrt(s_qkv)), handed to each head as ``head.score_scale``; None without it."""
    scale = getattr(xformer, "score_scale", None)
    if scale is not None:
        heads_must_read(attention.heads, "score_scale", f"with score_scale={scale} its scores "
                        "would be scaled by 1 / sqrt(s_qkv) instead: pass self.score_scale "
                        "to scaled_dot_product (see AttentionHead.forward).")
        for head in attention.heads:
            head.score_scale = scale
    return scale


def sublayer_norms(layer, xformer, count):
    """The norms a layer applies to its ``count`` sublayers' outputs (``norm_placement``),
    each an nn.Identity without one; with "output" the norms before the sublayers (the
    layer's norm1, norm2, ...) become nn.Identity: x + Norm(Sublayer(x))."""
    placement, M = getattr(xformer, "norm_placement", None), xformer.embedding_size
    if placement == "output":
        for i in range(1, count + 1):
            setattr(layer, f"norm{i}", nn.Identity())
    return tuple(xformer.norm_layer(M) if placement else nn.Identity() for _ in range(count))


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


def per_layer(xformer, layers):
    """What differs between a GPT's layers: the NoPE layers turn nothing; with
    ``window_layers`` only those layers slide (the others see every earlier token), each
    sliding layer with rotary positions of base ``window_rope_base`` where that is set."""
    for name in ("nope_layers", "window_layers"):
        outside = [i for i in getattr(xformer, name) or () if i >= len(layers)]
        if outside:
            raise ValueError(f"{name} {outside} are not layers of a model of {len(layers)}")
    for i, layer in enumerate(layers):
        attention = layer.self_attention
        if xformer.window_layers is not None and i not in xformer.window_layers:
            attention.window = None
        elif attention.window and xformer.window_rope_base and attention.rotary is not None:
            attention.rotary = xformer.RotaryEmbedding(attention.qkv_size,
                                                       base=xformer.window_rope_base)
            rotary_heads(attention.heads, attention.rotary)
        if i in xformer.nope_layers:
            without_positions(attention)


def without_positions(attention):
    """A NoPE layer: its self-attention (and heads) turn nothing, whatever the model's
    positions."""
    attention.rotary = None
    for head in attention.heads:
        head.rotary = None
