"""Positions inside the attention score: each head adds to q_i . k_j a term of the offset
i - j between query and key, so a word's place is never added to the word itself. Two
switches of the same attention classes (``positions="relative"`` and ``"alibi"``), for the
self-attention of the encoder, both decoders and the GPT; cross-attention keeps none (the
memory is another sentence) and the vision transformer keeps its own code.

    positions="relative"  RelativePosition  Dai et al. 2019 (Transformer-XL), sec. 3.3;
                                            clipped offsets as Shaw et al. 2018
    positions="alibi"     ALiBi             Press et al. 2022

Read after architecture.py and since_2017.py. Each head holds its own (``head.relative`` or
``head.alibi``), handed the attention's scores by AttentionHead.forward as a ``bias``
(architecture.scaled_dot_product); the batched path stacks the heads' (`stacked_bias`).

The derivation (the lecture's). With absolute positions the score of words i and j is
(x_i + p_i)^T W_Q^T W_K (x_j + p_j): four terms, two of them about where the words sit.
Transformer-XL keeps the words' term, replaces the key's position p_j by the sinusoid R of
the offset i - j with a key matrix of its own, W_R, and the query's position, which would
be the same for every key of a row, by two learned vectors per head:

    a_ij = q_i . k_j  +  q_i . W_R R_(i-j)  +  u . k_j  +  v . W_R R_(i-j)
         = (q_i + u) . k_j  +  (q_i + v) . W_R R_(i-j)

all of it scaled as the scores are. Offsets further than ``clip`` read the sinusoid of
``clip`` (Shaw et al.'s clipping): a model then meets no offset it has not seen, however
long the text.

ALiBi adds no parameter: head h's score is lowered in proportion to the distance,

    a_ij = q_i . k_j / sqrt(s_qkv)  -  m_h |i - j|

with fixed slopes m_h, a geometric sequence per head (`alibi_slopes`). In a causal decoder
j <= i, so |i - j| = i - j, the paper's form; the encoder sees both sides and each is
lowered by its distance.

Shapes: Q (..., T_q, s_qkv), K (..., T_k, s_qkv); the queries are the last T_q of the T_k
positions (while decoding with a cache the keys include the words before: offset T_k - T_q).
"""

import math

import torch
import torch.nn as nn

__all__ = ["RelativePosition", "ALiBi", "alibi_slopes", "offsets", "relative_scores",
           "score_positions", "score_bias", "stacked_bias"]


def offsets(T_q, T_k, device=None):
    """i - j for each query (the last T_q of T_k positions) and key. Shape: (T_q, T_k)"""
    i = torch.arange(T_k - T_q, T_k, device=device)[:, None]
    return i - torch.arange(T_k, device=device)[None, :]


def sinusoid_of_offsets(clip, size):
    """R_r for r = -clip .. clip: sin(r / 10000^(2k/size)), cos(...) interleaved, as the
    2017 position code of position r. Shape: (2 clip + 1, size)"""
    r = torch.arange(-clip, clip + 1, dtype=torch.float32)[:, None]
    two_k = torch.arange(0, size, 2, dtype=torch.float32)
    angle = r / 10000.0 ** (two_k / size)                              # (2 clip + 1, size/2)
    return torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(-2)


def relative_scores(Q, K, P, u, v):
    """The three terms Transformer-XL's score adds to q_i . k_j, unscaled (the module
    docstring derives them):

        u . k_j  +  (q_i + v) . P[clip(i - j)]

    P holds W_R R_r for r = -clip .. clip (row r + clip; an offset further than clip reads
    the row of clip); u and v broadcast like a query.
    Shape: Q (..., T_q, s), K (..., T_k, s), P (..., 2 clip + 1, s), u and v (..., 1, s)
        -> (..., T_q, T_k): what is added to q_i . k_j
    """
    T_q, T_k, clip = Q.size(-2), K.size(-2), (P.size(-2) - 1) // 2
    at = offsets(T_q, T_k, Q.device).clamp(-clip, clip) + clip            # (T_q, T_k)
    by_offset = (Q + v) @ P.transpose(-2, -1)                          # (..., T_q, 2 clip + 1)
    positional = by_offset.gather(-1, at.expand(*by_offset.shape[:-1], T_k))
    return positional + u @ K.transpose(-2, -1)                        # (..., T_q, T_k)


class RelativePosition(nn.Module):
    """One head's relative positions (Transformer-XL): its key matrix for offsets W_R and
    its two vectors u and v. ``clip``: offsets further than this read the sinusoid of clip.

    Args: input_size (the width W_R reads: the head's input, M or s_qkv), qkv_size (s).
    Shape: Q (..., T_q, s), K (..., T_k, s), scale -> (..., T_q, T_k), added to the scaled
        scores
    """

    clip = 32

    def __init__(self, input_size, qkv_size):
        super().__init__()
        self.WR = nn.Linear(input_size, qkv_size, bias=False)
        self.u = nn.Parameter(torch.zeros(qkv_size))
        self.v = nn.Parameter(torch.zeros(qkv_size))
        self.register_buffer("R", sinusoid_of_offsets(self.clip, input_size),
                             persistent=False)                         # (2 clip + 1, input)

    def forward(self, Q, K, scale):
        P = self.WR(self.R.to(Q.dtype))                                # (2 clip + 1, s)
        return relative_scores(Q, K, P, self.u[None], self.v[None]) * scale


def alibi_slopes(H):
    """ALiBi's slope of each head (Press et al. 2022, sec. 3): for H a power of two,
    2^(-8/H), 2^(-16/H), ..., 2^(-8); otherwise those of the power of two below H, then
    every other slope of twice that many."""
    def geometric(n):
        return [2 ** (-8 * (h + 1) / n) for h in range(n)]
    below = 2 ** int(math.floor(math.log2(H)))
    return (geometric(below) + geometric(2 * below)[0::2])[:H]


class ALiBi(nn.Module):
    """One head's linear bias by distance: -slope |i - j| (no parameter to learn).
    Shape: Q (..., T_q, s), K (..., T_k, s), scale -> (T_q, T_k)"""

    def __init__(self, slope):
        super().__init__()
        self.register_buffer("slope", torch.tensor(float(slope)), persistent=False)

    def forward(self, Q, K, scale):
        distance = offsets(Q.size(-2), K.size(-2), Q.device).abs()
        return -self.slope.to(Q.dtype) * distance


def score_positions(attention, xformer):
    """Give each head of self-attention its `RelativePosition` or `ALiBi` (``head.relative``
    or ``head.alibi``) with ``positions="relative"`` or ``"alibi"``; None elsewhere (and in
    cross-attention). A student's head reads them through its ``score_bias``."""
    kind = getattr(xformer, "positions", None)
    H = len(attention.heads)
    for i, head in enumerate(attention.heads):
        head.relative = head.alibi = None
        if attention.reads_memory or kind not in ("relative", "alibi"):
            continue
        if kind == "relative":
            size = head.WQ.in_features
            head.relative = xformer.RelativePosition(size, attention.qkv_size)
        else:
            head.alibi = xformer.ALiBi(alibi_slopes(H)[i])
    return kind if kind in ("relative", "alibi") and not attention.reads_memory else None


def score_bias(head, Q, K):
    """What ``head``'s positions add to its scaled scores: its RelativePosition's or
    ALiBi's terms, or None (other positions, cross-attention, a head built alone).
    Shape: Q (B, T_q, s), K (B, T_k, s) -> (B | 1, T_q, T_k) or None"""
    scale = head.score_scale if getattr(head, "score_scale", None) else Q.size(-1) ** -0.5
    for kind in (getattr(head, "relative", None), getattr(head, "alibi", None)):
        if kind is not None:
            return kind(Q, K, scale)
    return None


def stacked_bias(heads, Q, K, scale):
    """What each head's `score_bias` gives, for all heads at once (the batched path); a
    student's class with a forward of its own is asked head by head (its code runs).
    Shape: Q (B, H, T_q, s), K (B, H, T_k, s) -> (B | 1, H, T_q, T_k)"""
    first = heads[0]
    own = first.relative or first.alibi
    if type(own).forward not in (RelativePosition.forward, ALiBi.forward):
        per_head = [score_bias(h, Q[:, i], K[:, i]) for i, h in enumerate(heads)]
        return torch.stack([b.expand(Q.size(0), Q.size(-2), K.size(-2)) for b in per_head], 1)
    if first.relative is not None:
        R = first.relative.R.to(Q.dtype)
        P = torch.stack([h.relative.WR(R) for h in heads])             # (H, 2 clip + 1, s)
        u = torch.stack([h.relative.u for h in heads])[:, None]        # (H, 1, s)
        v = torch.stack([h.relative.v for h in heads])[:, None]
        return relative_scores(Q, K, P, u, v) * scale
    slopes = torch.stack([h.alibi.slope for h in heads]).to(Q.dtype)   # (H,)
    distance = offsets(Q.size(-2), K.size(-2), Q.device).abs()
    return (-slopes[:, None, None] * distance)[None]                   # (1, H, T_q, T_k)
