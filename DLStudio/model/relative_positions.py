"""Positions inside the attention score: each head adds to q_i . k_j a term of the offset
i - j between query and key, so a word's place is never added to the word itself. Two
switches of the same attention classes (``positions="relative"`` and ``"alibi"``), for the
self-attention of the encoder, both decoders and the GPT; cross-attention keeps none (the
memory is another sentence) and the vision transformer keeps its own code.

    positions="relative"  RelativePosition  Dai et al. 2019 (Transformer-XL), sec. 3.3;
                                            clipped offsets as Shaw et al. 2018
    positions="alibi"     ALiBi             Press et al. 2022
    positions="t5"        T5Bias            Raffel et al. 2020 (T5), sec. 2.1: a learned
                                            number per head and bucket of offsets, one
                                            table a stack

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

T5 learns the term instead, one number b_h(bucket(j - i)) per head and bucket, added to the
unscaled score q_i . k_j (T5 scales no score). Offsets are put in ``num_buckets`` buckets
(32): in the encoder, half for keys before the query and half for keys after it; in the
decoder, whose keys are never after, all of them for keys before. Of a side's n buckets the
first n/2 hold the distances 0 .. n/2 - 1 one each; the others are spaced logarithmically
up to ``max_distance`` (128), and every further distance falls in the last:

    bucket(d) = d                                                   d < n/2
              = min(n - 1, n/2 + floor(log(d / (n/2)) / log(max_distance / (n/2)) (n - n/2)))

so near words are told apart exactly and far ones by their order of magnitude. One table
serves every layer of a stack (`share_t5_bias`); cross-attention has none.

Shapes: Q (..., T_q, s_qkv), K (..., T_k, s_qkv); the queries are the last T_q of the T_k
positions (while decoding with a cache the keys include the words before: offset T_k - T_q).
"""

import math

import torch
import torch.nn as nn

__all__ = ["RelativePosition", "ALiBi", "T5Bias", "T5Head", "alibi_slopes", "offsets",
           "t5_buckets", "relative_scores", "score_positions", "score_bias", "stacked_bias",
           "share_t5_bias"]


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


def t5_buckets(distance, bidirectional=True, num_buckets=32, max_distance=128):
    """T5's bucket of each offset ``distance`` = j - i (key minus query position), as the
    module docstring gives it. Shape: (...) long -> (...) long, in 0 .. num_buckets - 1"""
    bucket = torch.zeros_like(distance)
    if bidirectional:                     # keys after the query get the upper half
        num_buckets //= 2
        bucket = bucket + (distance > 0).long() * num_buckets
        distance = distance.abs()
    else:                                 # a causal stack: keys before only
        distance = (-distance).clamp(min=0)
    exact = num_buckets // 2
    far = exact + (torch.log(distance.float().clamp(min=1) / exact)
                   / math.log(max_distance / exact) * (num_buckets - exact)).long()
    far = far.clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)


class T5Bias(nn.Module):
    """A stack's T5 position bias: a learned number for each head and bucket of offsets
    (`buckets`), one table shared by the stack's layers (`share`). ``bidirectional``: an
    encoder's (keys on both sides), else a causal decoder's.

    Args: num_heads (H), bidirectional; the class's num_buckets, max_distance.
    Shape: T_q, T_k (the queries the last T_q of the T_k positions) -> (1, H, T_q, T_k)
    """

    num_buckets, max_distance = 32, 128

    def __init__(self, num_heads, bidirectional=True):
        super().__init__()
        self.bidirectional = bidirectional
        self.table = nn.Embedding(self.num_buckets, num_heads)          # b_h(bucket)

    def buckets(self, distance):
        """Each offset's bucket (`t5_buckets`). Shape: distance (...) = j - i -> (...)"""
        return t5_buckets(distance, self.bidirectional, self.num_buckets, self.max_distance)

    def forward(self, T_q, T_k, device=None):
        buckets = self.buckets(-offsets(T_q, T_k, device))              # (T_q, T_k)
        return self.table(buckets).permute(2, 0, 1)[None]               # (1, H, T_q, T_k)

    @classmethod
    def share(cls, stack, layers, bidirectional):
        """One table for the stack (``stack.position_bias``), each of its layers'
        self-attention heads reading its column (``head.t5``)."""
        heads = layers[0].self_attention.heads
        stack.position_bias = cls(len(heads), bidirectional)
        for layer in layers:
            for h, head in enumerate(layer.self_attention.heads):
                head.t5 = T5Head(stack.position_bias, h)


class T5Head(nn.Module):
    """One head's view of its stack's `T5Bias` (its column; the table registered once, in
    the stack). Shape: Q (..., T_q, s), K (..., T_k, s), scale -> (1, T_q, T_k)"""

    def __init__(self, bias, h):
        super().__init__()
        self.__dict__["bias"], self.h = bias, h

    def forward(self, Q, K, scale):
        return self.bias(Q.size(-2), K.size(-2), Q.device)[:, self.h]   # T5 scales none


def share_t5_bias(stack, layers, xformer, bidirectional):
    """With ``positions="t5"``: the model's `T5Bias` shared by the stack's layers
    (`T5Bias.share`)."""
    if getattr(xformer, "positions", None) == "t5":
        xformer.T5Bias.share(stack, layers, bidirectional)


def score_positions(attention, xformer):
    """Give each head of self-attention its `RelativePosition` or `ALiBi` (``head.relative``
    or ``head.alibi``) with ``positions="relative"`` or ``"alibi"``; None elsewhere (and in
    cross-attention). A student's head reads them through its ``score_bias``."""
    kind = getattr(xformer, "positions", None)
    H = len(attention.heads)
    for i, head in enumerate(attention.heads):
        head.relative = head.alibi = head.t5 = None     # (t5: the stack's, share_t5_bias)
        if attention.reads_memory or kind not in ("relative", "alibi"):
            continue
        if kind == "relative":
            size = head.WQ.in_features
            head.relative = xformer.RelativePosition(size, attention.qkv_size)
        else:
            head.alibi = xformer.ALiBi(alibi_slopes(H)[i])
    return kind if kind in ("relative", "alibi", "t5") and not attention.reads_memory else None


def score_bias(head, Q, K):
    """What ``head``'s positions add to its scaled scores: its RelativePosition's or
    ALiBi's terms, or None (other positions, cross-attention, a head built alone).
    Shape: Q (B, T_q, s), K (B, T_k, s) -> (B | 1, T_q, T_k) or None"""
    scale = head.score_scale if getattr(head, "score_scale", None) else Q.size(-1) ** -0.5
    for kind in (getattr(head, "relative", None), getattr(head, "alibi", None),
                 getattr(head, "t5", None)):
        if kind is not None:
            return kind(Q, K, scale)
    return None


def stacked_bias(heads, Q, K, scale):
    """What each head's `score_bias` gives, for all heads at once (the batched path); a
    student's class with a forward of its own is asked head by head (its code runs).
    Shape: Q (B, H, T_q, s), K (B, H, T_k, s) -> (B | 1, H, T_q, T_k)"""
    first = heads[0]
    own = first.relative or first.alibi or first.t5
    if type(own).forward not in (RelativePosition.forward, ALiBi.forward, T5Head.forward):
        per_head = [score_bias(h, Q[:, i], K[:, i]) for i, h in enumerate(heads)]
        return torch.stack([b.expand(Q.size(0), Q.size(-2), K.size(-2)) for b in per_head], 1)
    if first.t5 is not None:                          # the stack's table, all heads
        return first.t5.bias(Q.size(-2), K.size(-2), Q.device).to(Q.dtype)
    if first.relative is not None:
        R = first.relative.R.to(Q.dtype)
        P = torch.stack([h.relative.WR(R) for h in heads])             # (H, 2 clip + 1, s)
        u = torch.stack([h.relative.u for h in heads])[:, None]        # (H, 1, s)
        v = torch.stack([h.relative.v for h in heads])[:, None]
        return relative_scores(Q, K, P, u, v) * scale
    slopes = torch.stack([h.alibi.slope for h in heads]).to(Q.dtype)   # (H,)
    distance = offsets(Q.size(-2), K.size(-2), Q.device).abs()
    return (-slopes[:, None, None] * distance)[None]                   # (1, H, T_q, T_k)
