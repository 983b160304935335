"""What changed since 2017, as classes the architecture's containers nest and a setting
switches on (architecture.py is the 2017 model; this file is read after it). Each class
stands beside its paper's equation; torch only, built from sizes.

    norm="rmsnorm"          RMSNorm           Zhang and Sennrich 2019   (Llama, Qwen, Gemma)
    positions="rope"        RotaryEmbedding   Su et al. 2021            (Llama, Qwen, Gemma)
    feed_forward="swiglu"   SwiGLU            Shazeer 2020              (Llama, Qwen, Gemma)
    kv_heads=G              grouped_heads     Ainslie et al. 2023       (Llama 2 70B, Llama 3,
                                              (G = 1: Shazeer 2019)      Qwen, Gemma)

A subclass overrides them as it overrides AttentionHead: ``class MyFG(TransformerFG):
class RMSNorm(TransformerFG.RMSNorm): ...`` is used wherever the model normalises.

Shapes: M embedding_size, F the ReLU block's hidden width (2 M, or feed_forward_size),
H query heads, G key/value heads, s_qkv a head's width, T positions.
"""

import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import left_padding, relative_positions
from .hooks import add_hook_points
from .overrides import OverrideError

__all__ = ["RMSNorm", "SwiGLU", "RotaryEmbedding", "grouped_heads", "checked_kv_heads",
           "attention_switches",
           "repeat_kv", "rotary_heads", "heads_must_read", "rope_settings", "ROPE_SCALINGS"]


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang and Sennrich 2019, eq. 4):

        RMSNorm(x) = x / sqrt(mean_i(x_i^2) + eps) * g

    LayerNorm without its centring and its bias: the vector is scaled to a root mean square
    of 1, never shifted. Cheaper, and as good in today's models. In bf16 the normalising is
    done in fp32 and its result rounded to bf16 before g multiplies it (as Llama's code
    and transformers do); in fp32 that changes nothing.
    ``plus_one`` (Gemma's, ``norm="rmsnorm_plus_one"``): the gain is 1 + g, g stored and
    starting at 0 (weight decay then pulls the gain towards 1, not 0). ``gain_in_fp32``
    (Gemma's and OLMo 2's code): g multiplies before the rounding to bf16, not after.
    Args: size (M), eps (inside the root), plus_one. Shape: (..., M) -> (..., M)
    """

    gain_in_fp32 = False

    def __init__(self, size, eps=1e-5, plus_one=False):
        super().__init__()
        self.eps, self.plus_one, self.gain_in_fp32 = eps, plus_one, plus_one
        self.weight = nn.Parameter(torch.zeros(size) if plus_one else torch.ones(size))  # g

    def forward(self, x):
        dtype, x = x.dtype, x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.gain_in_fp32:
            return (x * (self.plus_one + self.weight.float())).to(dtype)
        return self.weight * x.to(dtype)


class SwiGLU(nn.Module):
    """A gated feed-forward network (Shazeer 2020, eq. 6):

        FFN_SwiGLU(x) = W2 (SiLU(W1 x) * V x),       SiLU(z) = z sigmoid(z)

    One half of the hidden layer gates the other. Its hidden width is round(2 F / 3), so
    that with three matrices it has the ReLU block's number of weights (biases as in the
    ReLU block; within 1% of its parameters).
    ``activation``: the gate's nonlinearity; GEGLU (``feed_forward="geglu"``, Gemma's)
    takes GELU in its tanh form instead of SiLU (Shazeer 2020, eq. 5).
    Args: dls, xformer (for M and F). Shape: (B, T, M) -> (B, T, M), position by position.
    """

    activation = staticmethod(F.silu)

    def __init__(self, dls, xformer):
        super().__init__()
        if getattr(xformer, "feed_forward", None) == "geglu":
            self.activation = functools.partial(F.gelu, approximate="tanh")
        M = xformer.embedding_size
        hidden = (getattr(xformer, "gated_size", None)          # a real model's own width
                  or round(2 * (xformer.feed_forward_size or 2 * M) / 3))
        self.W1 = nn.Linear(M, hidden)
        self.V = nn.Linear(M, hidden)
        self.W2 = nn.Linear(hidden, M)
        add_hook_points(self, xformer, "hidden", "out")                # hooks.py

    def forward(self, x):
        return self.hook_out(self.W2(self.hook_hidden(self.activation(self.W1(x)) * self.V(x))))


class RotaryEmbedding(nn.Module):
    """Rotary position embedding, RoPE (Su et al. 2021, eq. 34): no position code is added
    to the words; instead, in self-attention, each pair (x_2i, x_2i+1) of a query or key at
    position m is turned by the angle m theta_i, theta_i = base^(-2i/d):

        x'_2i   = x_2i cos(m theta_i) - x_2i+1 sin(m theta_i)
        x'_2i+1 = x_2i sin(m theta_i) + x_2i+1 cos(m theta_i)

    A rotation by m theta, dotted with one by n theta, is a rotation by (m - n) theta: the
    score q_m . k_n depends on the words and on their offset m - n only, never on where
    the pair sits in the sentence. The values are not turned (they carry content, not
    positions to compare). Cross-attention is not turned either: a Spanish word's position
    and an English word's have no offset that means anything (the encoder's
    self-attention has put the English order into the memory already).
    Args: size (d: a head's s_qkv, even), base, scaling (a longer context than trained on:
        None, or {"rope_type": "linear" | "llama3", "factor": ...}: `ROPE_SCALINGS`).
    Shape: x (..., T, d), offset (the position of x's first row: while decoding with a
        cache, the number of words before it) -> (..., T, d)
    """

    def __init__(self, size, base=10000.0, scaling=None):
        super().__init__()
        if size % 2:
            raise ValueError(f"rotary positions turn pairs of numbers: a head's width "
                             f"(s_qkv = M / H) must be even, got {size}")
        self.size, self.base = size, base
        two_i = torch.arange(0, size, 2, dtype=torch.int64).float()       # 2i, (d/2,)
        theta = 1.0 / (base ** (two_i / size))     # base^(-2i/d), as transformers rounds it
        if scaling:
            theta = ROPE_SCALINGS[scaling["rope_type"]](theta, scaling)
        self.register_buffer("theta", theta, persistent=False)
        self.table = None                  # (cos, sin) of angles, grown as asked: `cos_sin`

    turn_in_fp32 = False   # bf16: turned in fp32 and rounded once (OLMo 2's code), not in bf16

    def angles(self, T, offset, device):
        """m theta_i for the positions offset .. offset + T - 1. Shape: (T, d/2)"""
        m = torch.arange(offset, offset + T, device=device, dtype=torch.float32)
        return m[:, None] * self.theta[None, :]

    def cos_sin(self, T, offset, x):
        """cos and sin of `angles`, read from a table grown (doubling) to the furthest
        position asked for: while decoding, every step and Q and K reuse it (the same
        numbers as computing them afresh). Shape: (T, d/2) each, x's dtype (float32 with
        ``turn_in_fp32``) and device"""
        end, table = offset + T, self.table
        dtype = torch.float32 if self.turn_in_fp32 else x.dtype
        if table is None or table[0].size(0) < end or table[0].dtype != dtype \
                or table[0].device != x.device:
            with torch.inference_mode(False):  # (kept: training after generating reads it)
                angle = self.angles(max(end, 2 * (0 if table is None else table[0].size(0))),
                                    0, x.device)
                self.table = table = (angle.cos().to(dtype), angle.sin().to(dtype))
        return table[0][offset:end], table[1][offset:end]

    left_pads = None     # (B,): rows padded on the left count from their first real token

    def forward(self, x, offset=0):
        cos, sin = self.cos_sin(x.size(-2), offset, x)                    # (T, d/2)
        if self.left_pads is not None:       # each row's own positions (left_padding.py)
            at = left_padding.positions(x.size(-2), offset, self.left_pads)   # (B, T)
            cos, sin = self.cos_sin(int(at.max()) + 1, 0, x)
            cos, sin = cos[at], sin[at]                                    # (B, T, d/2)
            if x.dim() == 4:                                               # (B, H, T, d)
                cos, sin = cos[:, None], sin[:, None]
        even, odd = x[..., 0::2], x[..., 1::2]                             # (..., T, d/2)
        turned = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
        return turned.flatten(-2).to(x.dtype)                              # (..., T, d)


def _linear(theta, s):
    """Position interpolation (Chen et al. 2023): position m is read as m / factor."""
    return theta / s["factor"]


def _llama3(theta, s):
    """Llama 3.1's scaling: wavelengths longer than the old context / low_freq_factor are
    slowed by ``factor``, those shorter than old / high_freq_factor kept, those between
    blended linearly in old / wavelength."""
    old, low, high = (s["original_max_position_embeddings"], s["low_freq_factor"],
                      s["high_freq_factor"])
    wavelength = 2 * math.pi / theta
    slowed = torch.where(wavelength > old / low, theta / s["factor"], theta)
    blend = (old / wavelength - low) / (high - low)
    smoothed = (1 - blend) * slowed / s["factor"] + blend * slowed
    between = (wavelength >= old / high) & (wavelength <= old / low)
    return torch.where(between, smoothed, slowed)


#: How each kind of rope_scaling changes theta_i (a kind not here is refused by name).
ROPE_SCALINGS = {"linear": _linear, "llama3": _llama3}


def rope_settings(xformer):
    """The RotaryEmbedding's keywords other than the default (base 10000, no scaling) that
    ``xformer`` sets, so that a student's RotaryEmbedding(size) still builds by default."""
    found = {"base": getattr(xformer, "rope_base", 10000.0),
             "scaling": getattr(xformer, "rope_scaling", None)}
    return {k: v for k, v in found.items() if v not in (10000.0, None)}


def names_in(code):
    """The global and attribute names a function's code reads, its nested code included
    (a comprehension, a lambda, an inner function): a set."""
    if code is None:
        return {"rotary"}                      # not Python code of a student's: trusted
    found = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            found |= names_in(const)
    return found


def attention_switches(attention, xformer):
    """Self-attention's (and cross-attention's) switches of today, set from the model's
    settings: ``kv_heads`` (grouped heads), and the positions that enter the attention:
    RoPE (a RotaryEmbedding the heads share), relative positions or ALiBi (each head's
    own: relative_positions.py). Cross-attention takes no positions. An xformer of before
    the switches (a namespace) has none of them. Returns: (group, rotary or None)"""
    H, group = len(attention.heads), 1
    G = getattr(xformer, "kv_heads", None) or H
    if G != H and not attention.full_width:
        raise ValueError(f"kv_heads={G} needs full_width_heads=True: a sliced head's "
                         "keys are numbers of its own slice (grouped_heads says why)")
    if G != H:
        group = grouped_heads(attention.heads, G)
    rotary, kind = None, getattr(xformer, "positions", None)
    if kind == "rope" and not attention.reads_memory:
        rotary = xformer.RotaryEmbedding(attention.qkv_size, **rope_settings(xformer))
        rotary_heads(attention.heads, rotary)
    if relative_positions.score_positions(attention, xformer):
        heads_must_read(attention.heads, "score_bias", f"with positions={kind!r} its words "
                        "would have no positions at all: pass score_bias(self, Q, K) to the "
                        "scores (see AttentionHead.forward), or use another positions.")
    return group, rotary


def rotary_heads(heads, rotary):
    """Hand self-attention's RotaryEmbedding to its heads (``head.rotary``). A student's head
    with a forward of its own must turn its queries and keys itself (as AttentionHead.forward
    does) or call ``super().forward``: one that does neither is refused, not run without
    positions."""
    heads_must_read(heads, "rotary", "with positions='rope' its words would have no "
                    "positions at all: turn Q and K with Q, K = self.rotary(Q), "
                    "self.rotary(K) before the scores (see AttentionHead.forward), or use "
                    "positions='sinusoidal' or 'learned'.")
    for head in heads:
        head.rotary = rotary


def heads_must_read(heads, name, why):
    """Refuse a student's head whose own forward never reads ``self.<name>`` (nor calls
    super().forward), saying ``why`` it must: a switch it would silently skip."""
    for head in heads:
        forward = type(head).forward
        if not {name, "super"} & names_in(getattr(forward, "__code__", None)):
            raise OverrideError(f"{type(head).__qualname__}.forward never reads self.{name}, "
                                f"so {why}")


def checked_kv_heads(kv_heads):
    """``kv_heads`` as a model's setting: None (one per query head) or a number >= 1."""
    if kv_heads is not None and (isinstance(kv_heads, bool) or not isinstance(kv_heads, int)
                                 or kv_heads < 1):
        raise ValueError(f"kv_heads is a number of key/value heads (>= 1, dividing the "
                         f"heads; None: one per query head), got {kv_heads!r}")
    return kv_heads


def grouped_heads(heads, kv_heads):
    """Grouped-query attention (Ainslie et al. 2023; G = 1: multi-query, Shazeer 2019): the
    H query heads fall into G groups of H / G neighbours, and every head of group
    g = h // (H / G) uses the keys and values of the group's first head (its W_K and W_V,
    the same modules). Queries stay one per head; the key/value cache of decoding holds G
    heads instead of H, and the model H - G fewer W_K, W_V pairs. kv_heads = H changes
    nothing. Needs full-width heads: a sliced head's keys come from its own slice of each
    word, so a shared key head would have to read another head's slice, and the query of
    head h would be compared with keys of numbers it never sees.
    Args: heads (H modules with WK, WV), kv_heads (G, dividing H)."""
    H = len(heads)
    if kv_heads < 1 or H % kv_heads:
        raise ValueError(f"kv_heads must divide num_atten_heads ({H}), got {kv_heads}")
    group = H // kv_heads
    for h, head in enumerate(heads):
        first = heads[h - h % group]
        head.WK, head.WV = first.WK, first.WV
    return group


def repeat_kv(K, group):
    """The G key (or value) heads, each repeated for the H / G query heads of its group, in
    order: 0 0 1 1 ... Shape: (B, G, T, s_qkv) -> (B, H, T, s_qkv)"""
    return K if group == 1 else K.repeat_interleave(group, dim=1)
