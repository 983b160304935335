"""The Transformer's architecture, every part in the lecture's order: the file to read first.

Each part is a nested class of a *parts* class and builds the others through the object it is
given (``xformer.AttentionHead(...)``): a subclass that overrides one nested class changes it
everywhere. Here models are built from their sizes alone; DLStudio's containers
(DLStudio.Transformers) are these classes plus data, training and checkpoints.

    TransformerParts     the encoder side: embeddings, attention, feed-forward, encoder layers
    EncoderDecoderParts  + cross-attention, the decoder and the whole translation model
                         (Vaswani et al. 2017, Fig. 1)
    GPTParts             a decoder-only language model of the same classes (Radford et al. 2018)
The encoder-only families, beside this file: vision.py (VisionParts, Dosovitskiy et al. 2020)
and bert.py (BERTParts, Devlin et al. 2019); the classes a setting switches on: since_2017.py
(RMSNorm, RoPE, SwiGLU, grouped heads) and since_2023.py (QK-norm, sliding windows, NoPE);
every activation read or changed at the parts' hook points: hooks.py.

        token ids ──> EmbeddingsGenerator ──> MasterEncoder (N x BasicEncoder) ──┐
        (English)     word + position code     SelfAttention, FeedForward        │ memory
                                                                                  v
        token ids ──> EmbeddingsGenerator ──> MasterDecoderWithMasking (N x BasicDecoderWithMasking)
        (Spanish)                              masked SelfAttention, CrossAttention, FeedForward
                                               ──> output layer ──> logits over Spanish words

    >>> model = EncoderDecoderParts(vocab_en_size=100, vocab_es_size=120, max_seq_length=10,
    ...     embedding_size=64).encoder_decoder(num_basic_encoders=2, num_basic_decoders=2)

Post-LN (FG) and pre-LN differ only in ``norm_first`` (see `residual`). Each ``forward``'s
docstring is its contract (checked when a model is built: DLStudio.model.overrides).

Shapes (one alphabet for the whole package):
    B       batch size                  T_src, T_tgt  source / target sequence lengths
    M       embedding_size              H             num_atten_heads
    s_qkv   qkv_size = M // H           F             feed-forward hidden size (2 M)
    V_en    English vocabulary size     V_es          Spanish vocabulary size
Masks are boolean, True where attention is NOT allowed, broadcast to (B, H, T_q, T_k).

Deliberate departures from the paper (and from DLStudio 2.5.8):
    - Heads work on slices of the embedding (s_qkv = M // H each), concatenated with no
      output projection W^O (the lecture's design); W_Q, W_K, W_V act on each word
      separately (s_qkv x s_qkv), not on the flattened sentence as in DLStudio.
    - The feed-forward network has F = 2 M (DLStudio's factor; the paper's is 4 M).
    - Positional encoding uses the paper's base 10000 (the lecture's code uses 100).
    - Word embeddings are scaled by sqrt(M) (paper, 3.4) and initialised with standard
      deviation M^-0.5, so that words and positions start at the same scale.
    - No dropout by default (the lecture has none); ``dropout=`` turns it on.
"""

import math
import warnings

import torch
import torch.nn as nn

from . import left_padding, since_2017, since_2023, switches
from .batched_heads import BatchedHeads
from .hooks import Hooked, HookPoint, add_hook_points  # looking inside (hooks.py)
from .kv_cache import NO_CACHE, GPTDecoding, TranslationDecoding
from .lora import TranslationLoRA  # add_lora: low-rank adaptation (Hu et al. 2021)
from .overrides import check_forwards, runs_base
from .recorder import TranslationRecords
from .relative_positions import ALiBi, RelativePosition, T5Bias, score_bias, share_t5_bias
from .since_2017 import RMSNorm, RotaryEmbedding, SwiGLU, repeat_kv
from .summed_loss import summed_cross_entropy  # F.cross_entropy(..., reduction="sum")
from .switches import FEED_FORWARDS, IN_ATTENTION, POSITIONS, SINUSOIDS
from .tokens import EOS_INDEX, SOS_INDEX, causal_mask, padding_mask, trailing_padding

__all__ = ["TransformerParts", "EncoderDecoderParts", "GPTParts", "scaled_dot_product",
           "residual", "FEED_FORWARDS", "POSITIONS"]


def scaled_dot_product(Q, K, V, mask=None, scale=None, bias=None, hooks=None):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(s_qkv)) V   (Vaswani et al. 2017, eq. 1).

    Shape: Q (..., T_q, s_qkv), K and V (..., T_k, s_qkv), mask broadcastable to
        (..., T_q, T_k), True where a query may not look; scale: another factor for the
        scores than 1 / sqrt(s_qkv) (since_2023.score_scale), or None; bias: positions'
        terms added to the scaled scores (relative_positions.py), or None; hooks: the
        attention whose hook_attn_scores and hook_pattern see them (hooks.py), or None
        -> output (..., T_q, s_qkv), weights (..., T_q, T_k) (each row sums to 1)
    """
    scores = Q @ K.transpose(-2, -1)                                   # (..., T_q, T_k)
    scores = scores / math.sqrt(Q.size(-1)) if scale is None else scores * scale
    scores = scores if bias is None else scores + bias                 # relative, ALiBi
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    scores = scores if hooks is None else hooks.hook_attn_scores(scores)
    weights = torch.softmax(scores, dim=-1)                            # (..., T_q, T_k)
    weights = weights if hooks is None else hooks.hook_pattern(weights)
    return weights @ V, weights                                        # (..., T_q, s_qkv)


def residual(x, norm, sublayer, norm_first):
    """One sublayer with its residual connection and LayerNorm: the only place where FG and
    PreLN differ.

        post-LN (FG):   LayerNorm(x + Sublayer(x))       Vaswani et al. 2017, sec. 3.1
        pre-LN (PreLN): x + Sublayer(LayerNorm(x))       Xiong et al. 2020, Fig. 1(b)
    """
    if norm_first:
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))


class TransformerParts:
    """A model's sizes and the encoder side's classes, which every model shares. Each part
    reads its sizes from the object it is given (``xformer``: this one, or a container).
    Args (keyword-only): embedding_size (M, even), max_seq_length (tokens per sentence,
        SOS and EOS included), vocab_sizes ({"en": V_en, "es": V_es}), norm_first (False:
        post-LN, True: pre-LN; None keeps the class's); every other keyword is a switch to
        another design than the lecture's (dropout, positions, feed_forward, norm, ...):
        model/switches.py lists them, with what each changes and the part it is built in.
    """

    norm_first = False    # where LayerNorm sits: see `residual`

    def __init__(self, *, embedding_size, max_seq_length, vocab_sizes=None, norm_first=None,
                 dropout=0.0, full_width_heads=False, learned_positions=False,
                 tie_embeddings=False, shared_vocab=False, feed_forward="relu",
                 feed_forward_size=None, norm_eps=1e-5, scale_embeddings=True,
                 norm="layernorm", positions="sinusoidal", kv_heads=None, head_size=None,
                 output_bias=True, rope_base=10000.0, rope_scaling=None, gated_size=None,
                 output_scale=None, own_output=False, norm_embeddings=False, qk_norm=False,
                 window=None, nope_layers=(), norm_placement=None, score_scale=None,
                 window_layers=None, window_rope_base=None):
        if embedding_size % 2:
            raise ValueError(f"embedding_size must be even (sin/cos pairs), got {embedding_size}")
        self.embedding_size, self.max_seq_length = embedding_size, max_seq_length
        self.vocab_sizes = dict(vocab_sizes or {})
        if norm_first is not None:
            self.norm_first = norm_first
        self.dropout, self.full_width_heads = dropout, full_width_heads
        positions, self.kv_heads = switches.check(
            self, positions=positions, learned_positions=learned_positions,
            shared_vocab=shared_vocab, feed_forward=feed_forward, norm=norm,
            head_size=head_size, full_width_heads=full_width_heads, kv_heads=kv_heads)
        self.positions, self.learned_positions = positions, positions == "learned"
        self.tie_embeddings, self.shared_vocab = tie_embeddings, shared_vocab
        since_2023.set_switches(self, qk_norm=qk_norm, window=window, nope_layers=nope_layers,
                                norm_placement=norm_placement, score_scale=score_scale,
                                window_layers=window_layers, window_rope_base=window_rope_base)
        self.feed_forward, self.feed_forward_size = feed_forward, feed_forward_size
        self.norm_eps, self.scale_embeddings, self.norm = norm_eps, scale_embeddings, norm
        self.head_size, self.output_bias, self.gated_size = head_size, output_bias, gated_size
        self.output_scale, self.own_output = output_scale, own_output     # T5's (switches.py)
        self.norm_embeddings = norm_embeddings                              # BART's
        self.rope_base, self.rope_scaling = rope_base, rope_scaling

    ACTIVATIONS = switches.ACTIVATIONS       # of the feed-forward network, by its name
    # today's (since_2017.py), switched on by a setting
    RMSNorm, SwiGLU, RotaryEmbedding = RMSNorm, SwiGLU, RotaryEmbedding
    RelativePosition, ALiBi, T5Bias = RelativePosition, ALiBi, T5Bias   # relative_positions
    HookPoint = HookPoint      # where an activation can be read or changed (hooks.py)

    def norm_layer(self, size):
        """Every normalisation of the model: LayerNorm (Ba et al. 2016) with the model's
        epsilon, or its RMSNorm with ``norm="rmsnorm"`` (Gemma's: "rmsnorm_plus_one")."""
        if self.norm != "layernorm":
            return self.RMSNorm(size, eps=self.norm_eps, **(
                {"plus_one": True} if self.norm == "rmsnorm_plus_one" else {}))
        return nn.LayerNorm(size, eps=self.norm_eps)

    def feed_forward_block(self, dls):
        """A layer's feed-forward network: FeedForward, SwiGLU (GEGLU) or None (attention only)."""
        if self.feed_forward == "none":
            return None
        block = self.SwiGLU if self.feed_forward in ("swiglu", "geglu") else self.FeedForward
        return block(dls, self)

    def num_tokens(self, lang):           # of a vocabulary: its embeddings and output layer
        if lang not in self.vocab_sizes:
            raise ValueError(f"lang must be one of {sorted(self.vocab_sizes)}, got {lang!r}")
        return self.vocab_sizes[lang]

    class EmbeddingsGenerator(nn.Module):
        """Word embeddings plus the sinusoidal position code (Vaswani et al. 2017, sec. 3.5);
        with ``positions="rope"`` the words alone (positions enter in self-attention).

        Args: xformer (vocabulary sizes, max_seq_length), lang ("en" | "es"), embedding_size.
        Shape: ids (B, T) -> (B, T, M); position t may depend on ids[:, :t + 1] only."""

        positional_base = 10000.0
        left_pads = None       # (B,) pad tokens before each row's first (left_padding.py)

        def __init__(self, xformer, lang, embedding_size):
            super().__init__()
            vocab_size = xformer.num_tokens(lang)
            self.lang, self.embedding_size = lang, embedding_size
            self.rotary = getattr(xformer, "positions", None) in IN_ATTENTION
            self.scale = math.sqrt(embedding_size) if xformer.scale_embeddings else 1.0
            self.embedding = nn.Embedding(vocab_size, embedding_size)
            # std M^-0.5: after the sqrt(M) scaling, words are of the position code's size.
            nn.init.normal_(self.embedding.weight, std=embedding_size ** -0.5)
            code = getattr(xformer, "positions", "sinusoidal")
            halves = {"halves": True} if code == "sinusoidal_halves" else {}   # Marian's
            self.register_buffer("positional_encoding", self.sinusoids(       # (no 1 GB table
                xformer.max_seq_length, embedding_size, self.positional_base,    # for nothing)
                **halves) if code in SINUSOIDS else None, persistent=False)
            self.learned_positions = None     # or a trained vector per position (BERT, GPT)
            if xformer.learned_positions:
                self.learned_positions = nn.Parameter(
                    torch.randn(xformer.max_seq_length, embedding_size) * 0.02)
            self.norm = xformer.norm_layer(embedding_size) if getattr(   # BART's, after
                xformer, "norm_embeddings", False) else nn.Identity()      # the sum
            self.dropout = nn.Dropout(xformer.dropout)
            add_hook_points(self, xformer, "embed")         # its output (hooks.py)

        @staticmethod
        def sinusoids(num_positions, embedding_size, base, halves=False):
            """PE[pos, 2i] = sin(pos / base^(2i/M)), PE[pos, 2i+1] = cos(...); ``halves``
            (positions="sinusoidal_halves", Marian's): the sines in columns 0..M/2 - 1, the
            cosines after them. Shape: (T, M)"""
            pos = torch.arange(num_positions, dtype=torch.float32).unsqueeze(1)   # (T, 1)
            two_i = torch.arange(0, embedding_size, 2, dtype=torch.float32)       # (M/2,)
            angle = pos / base ** (two_i / embedding_size)                        # (T, M/2)
            pe, half = torch.zeros(num_positions, embedding_size), embedding_size // 2
            if halves:
                pe[:, :half], pe[:, half:] = torch.sin(angle), torch.cos(angle)
            else:
                pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
            return pe                                                             # (T, M)

        def forward(self, ids):
            T = ids.size(1)
            x = self.embedding(ids) * self.scale                                  # (B, T, M)
            if not self.rotary:     # (RoPE, relative, ALiBi: positions enter the attention)
                positions = (self.positional_encoding if self.learned_positions is None
                             else self.learned_positions)
                at = slice(T) if self.left_pads is None else left_padding.positions(
                    T, 0, self.left_pads, len(positions) - 1)   # prompts of other lengths
                x = x + positions[at]                                             # (B, T, M)
            return self.hook_embed(self.dropout(self.norm(x)))                    # (B, T, M)

    class AttentionHead(nn.Module):
        """One attention head with its own W_Q, W_K, W_V, applied to each word of its slice.

        Args:
            dl_studio, max_seq_length, num_atten_heads: accepted as in DLStudio.
            qkv_size: s_qkv.  input_size (ours, optional): M with ``full_width_heads``.
        Shape (the contract of ``forward``, for a student's head too):
            x (B, T_q, s_qkv), mask broadcastable to (B, T_q, T_k), memory (B, T_k, s_qkv) or
            None -> (B, T_q, s_qkv): queries from x, keys and values from memory
            (cross-attention) or x. A head's own forward shows its attention maps by
            handing its weights (B, T_q, T_k) to ``self.keep_weights``.
        ``rotary``: with ``positions="rope"``, self-attention's RotaryEmbedding, which turns
        the queries and keys by position (since_2017.py); None otherwise. ``q_norm``,
        ``k_norm``: with ``qk_norm``, the attention's norms of queries and keys;
        ``score_scale``: the scores' factor, None for 1 / sqrt(s_qkv) (since_2023.py).
        """

        record_attention = False

        def __init__(self, dl_studio, max_seq_length, qkv_size, num_atten_heads,
                     input_size=None):
            super().__init__()
            self.qkv_size = qkv_size
            input_size = input_size or qkv_size
            self.WQ = nn.Linear(input_size, qkv_size)
            self.WK = nn.Linear(input_size, qkv_size)
            self.WV = nn.Linear(input_size, qkv_size)
            self.rotary = None               # self-attention's RotaryEmbedding, with RoPE
            self.q_norm = self.k_norm = self.score_scale = None    # since 2023's switches

        def forward(self, x, mask=None, memory=None):
            kv = x if memory is None else memory
            Q, K = self.WQ(x), self.WK(kv)                                 # (B, T, s_qkv)
            if self.q_norm is not None:          # QK-norm: each query and key normalised
                Q, K = self.q_norm(Q), self.k_norm(K)
            if self.rotary is not None:          # RoPE: position m turns by m theta
                Q, K = self.rotary(Q), self.rotary(K)
            out, weights = scaled_dot_product(Q, K, self.WV(kv), mask, self.score_scale,
                                              score_bias(self, Q, K))  # relative, ALiBi
            self.keep_weights(weights)
            return out                                                     # (B, T_q, s_qkv)

        def keep_weights(self, weights):
            """Keep (B, T_q, T_k) weights for attention maps, only while they are recorded."""
            self.attention_weights = weights.detach() if self.record_attention else None

    class SelfAttention(BatchedHeads, nn.Module):
        """H heads, each on its own slice of the embedding; outputs concatenated. With
        ``full_width_heads`` each head reads all of M and W^O (M x M) projects the
        concatenation: multi-head attention as in Vaswani et al. 2017, sec. 3.2.2.

        Args: dls, xformer, num_atten_heads (H).
        Shape: x (B, T, M), mask broadcastable to (B, H, T, T) -> (B, T, M)
        Attributes:
            batched: one batched product for the standard head (model/batched_heads.py: the
                same arithmetic as `per_head`), or head by head (a student's).
            record_attention: keep ``attention_weights`` (B, H, T_q, T_k) of the last pass.
            kv_cache: `NO_CACHE`, or a KeyValueCache while decoding word by word.
            group: query heads per key/value head (``kv_heads``: since_2017.grouped_heads).
            rotary: the heads' RotaryEmbedding (``positions="rope"``; never cross-attention).
            q_norm, k_norm, window, score_scale: since 2023's switches (since_2023.py).
        """

        kv_cache = NO_CACHE
        windowed = staticmethod(since_2023.windowed)    # a sliding window's mask (window)
        left_pads = None       # (B,) pad tokens before each row's first (left_padding.py)

        def __init__(self, dls, xformer, num_atten_heads):
            super().__init__()
            M, self.full_width = xformer.embedding_size, xformer.full_width_heads
            own_size = self.full_width and getattr(xformer, "head_size", None)  # (T5's d_kv)
            if M % num_atten_heads and not own_size:
                raise ValueError(f"embedding_size {M} is not divisible by "
                                 f"num_atten_heads {num_atten_heads}")
            self.num_atten_heads = num_atten_heads
            self.qkv_size = own_size or M // num_atten_heads
            head_class = self.head_class(xformer)
            size = {"input_size": M} if self.full_width else {}   # DLStudio's heads take none
            self.heads = nn.ModuleList([
                head_class(dls, xformer.max_seq_length, self.qkv_size, num_atten_heads, **size)
                for _ in range(num_atten_heads)])
            self.W_O = (nn.Linear(num_atten_heads * self.qkv_size, M) if self.full_width
                        else nn.Identity())
            # today's switches: kv_heads (group), RoPE (rotary), relative positions, ALiBi
            self.group, self.rotary = since_2017.attention_switches(self, xformer)
            self.q_norm, self.k_norm = since_2023.qk_norms(self, xformer)
            self.score_scale = since_2023.score_scale(self, xformer)
            self.window = None if self.reads_memory else getattr(xformer, "window", None)
            self.batched = self.can_batch(TransformerParts.AttentionHead)
            if not runs_base(self, TransformerParts.SelfAttention, "weighted"):
                self.fused = False              # a student's attention runs as written
            self.record_attention, self.attention_weights = False, None
            add_hook_points(self, xformer, "q", "k", "v", "attn_scores", "pattern", "z", "out")

        @staticmethod
        def head_class(xformer):
            return xformer.AttentionHead

        def forward(self, x, mask=None):
            mask = self.kv_cache.widened(mask)     # new words after cached ones see those
            if self.window:              # a sliding window: the last `window` tokens only
                mask = self.windowed(mask, x, self.kv_cache.length, self.window)
            if self.left_pads is not None:                  # no row sees another's padding
                mask = left_padding.pad_mask(mask, x, self.kv_cache.length, self.left_pads)
            return self.attend(x, x, mask)                                 # (B, T, M)

        def attend(self, x_q, x_kv, mask):
            out = self.all_heads(x_q, x_kv, mask) if self.batched else \
                self.per_head(x_q, x_kv, mask)                             # (B, T_q, M)
            return self.hook_out(self.W_O(out))

        def per_head(self, x_q, x_kv, mask):
            """The definition: head i reads slice i of every word (all of it with
            ``full_width``); the heads' outputs are concatenated (before W^O)."""
            s = self.qkv_size
            if mask is not None and mask.dim() == 4:
                mask = mask[:, 0]                                          # (B, T_q | 1, T_k)

            def part(x, i):
                return x if self.full_width else x[..., i * s:(i + 1) * s]  # (B, T, s_qkv)

            outs = [self.call_head(h, part(x_q, i), part(x_kv, i), mask)
                    for i, h in enumerate(self.heads)]
            if self.record_attention:
                kept = [getattr(h, "attention_weights", None) for h in self.heads]
                self.attention_weights = None if None in kept else torch.stack(kept, dim=1)
            z = self.hook_z(torch.stack(outs, dim=1))                      # (B, H, T_q, s)
            return z.transpose(1, 2).flatten(2)                            # (B, T_q, M)

        def call_head(self, head, x_q, x_kv, mask):
            return head(x_q, mask=mask)

        def weighted(self, Q, K, V, mask, bias=None):
            """The batched path's readable attention. Q (B, H, T_q, s_qkv), K and V
            (B, G, T_k, s_qkv): query head h reads key/value head h // (H / G); bias: the
            heads' positions terms (B | 1, H, T_q, T_k), with relative or ALiBi positions."""
            return scaled_dot_product(Q, repeat_kv(K, self.group), repeat_kv(V, self.group),
                                      mask, self.score_scale, bias, hooks=self)

    class FeedForward(nn.Module):
        """Position-wise feed-forward network: W2 ReLU(W1 x)  (Vaswani et al. 2017, eq. 2);
        BERT's takes GELU for ReLU (``feed_forward="gelu"``, Hendrycks and Gimpel 2016).

        Args: dls, xformer (for M, the activation and F).
        Shape: (B, T, M) -> (B, T, M), each position on its own (decoding one word at a time
            relies on that), with a hidden width F = 2 M (``feed_forward_size``: another).
        """

        expansion = 2

        def __init__(self, dls, xformer):
            super().__init__()
            M = xformer.embedding_size
            hidden = xformer.feed_forward_size or self.expansion * M
            self.activation = TransformerParts.ACTIVATIONS.get(xformer.feed_forward, torch.relu)
            self.W1 = nn.Linear(M, hidden)
            self.W2 = nn.Linear(hidden, M)
            add_hook_points(self, xformer, "hidden", "out")

        def forward(self, x):
            return self.hook_out(self.W2(self.hook_hidden(self.activation(self.W1(x)))))

    class BasicEncoder(nn.Module):
        """One encoder layer: self-attention, then the feed-forward network, each inside
        `residual` (post-LN for FG, pre-LN for PreLN).

        Args: dls, xformer, num_atten_heads (H).
        Shape: x (B, T_src, M), mask (B, 1, 1, T_src) -> (B, T_src, M)
        """

        def __init__(self, dls, xformer, num_atten_heads):
            super().__init__()
            M = xformer.embedding_size
            self.norm_first = xformer.norm_first
            self.self_attention = xformer.SelfAttention(dls, xformer, num_atten_heads)
            self.feed_forward = xformer.feed_forward_block(dls)
            self.norm1, self.norm2 = xformer.norm_layer(M), xformer.norm_layer(M)
            self.post_norm1, self.post_norm2 = since_2023.sublayer_norms(
                self, xformer, 2)                  # nn.Identity, or norm_placement's norms
            self.dropout = nn.Dropout(xformer.dropout)
            add_hook_points(self, xformer, "resid_pre", "resid_mid", "resid_post")

        def forward(self, x, mask=None):
            x = self.hook_resid_mid(residual(self.hook_resid_pre(x), self.norm1, lambda y: (
                self.dropout(self.post_norm1(self.self_attention(y, mask)))), self.norm_first))
            if self.feed_forward is None:            # feed_forward="none": attention only
                return self.hook_resid_post(x)                             # (B, T_src, M)
            return self.hook_resid_post(residual(x, self.norm2, lambda y: self.dropout(
                self.post_norm2(self.feed_forward(y))), self.norm_first))  # (B, T_src, M)

    class MasterEncoder(nn.Module):
        """A stack of ``num_basic_encoders`` BasicEncoders (with a final LayerNorm for PreLN,
        Xiong et al. 2020).

        Args: dls, xformer, num_basic_encoders (N), num_atten_heads (H).
        Shape: x (B, T_src, M) embedded English, mask (B, 1, 1, T_src) -> (B, T_src, M)
        """

        def __init__(self, dls, xformer, num_basic_encoders=4, num_atten_heads=4):
            super().__init__()
            self.num_basic_encoders, self.num_atten_heads = num_basic_encoders, num_atten_heads
            self.basic_encoder_arr = nn.ModuleList([
                xformer.BasicEncoder(dls, xformer, num_atten_heads)
                for _ in range(num_basic_encoders)])
            share_t5_bias(self, self.basic_encoder_arr, xformer, bidirectional=True)  # T5's
            M = xformer.embedding_size
            self.final_norm = xformer.norm_layer(M) if xformer.norm_first else nn.Identity()
            add_hook_points(self, xformer, "final")

        def forward(self, x, mask=None):
            for encoder in self.basic_encoder_arr:
                x = encoder(x, mask)                                       # (B, T_src, M)
            return self.hook_final(self.final_norm(x))


class EncoderDecoderParts(TransformerParts):
    """The translation model's classes, the encoder side's and the decoder's, built from sizes
    (vocab_en_size, vocab_es_size, those of `TransformerParts`) with both embedding generators;
    `encoder_decoder` builds the whole model. start_id, end_id: the ids the decoder starts
    from and a sentence ends with (DLStudio's SOS and EOS; a real model's folder says its own,
    and its pad_id: None where sentences are EOS-padded).
    """

    def __init__(self, *, vocab_en_size, vocab_es_size, start_id=SOS_INDEX, end_id=EOS_INDEX,
                 pad_id=None, **sizes):
        super().__init__(vocab_sizes={"en": vocab_en_size, "es": vocab_es_size}, **sizes)
        self.start_id, self.end_id, self.pad_id = start_id, end_id, pad_id
        check_forwards(self, ["EmbeddingsGenerator", "AttentionHead", "SelfAttention",
                              "CrossAttention", "FeedForward", "BasicEncoder", "MasterEncoder",
                              "BasicDecoderWithMasking", "MasterDecoderWithMasking"],
                       {"CrossAttentionHead": self.CrossAttention.head_class(self)})
        self.embeddings_generator_en = self.EmbeddingsGenerator(self, "en", self.embedding_size)
        self.embeddings_generator_es = self.EmbeddingsGenerator(self, "es", self.embedding_size)

    def encoder_decoder(self, num_basic_encoders=4, num_basic_decoders=4, num_atten_heads=4,
                        masking=True):
        """The whole model (an `EncoderDecoder`) of N-layer stacks with H heads."""
        encoder = self.MasterEncoder(None, self, num_basic_encoders, num_atten_heads)
        decoder = self.MasterDecoderWithMasking(None, self, num_basic_decoders,
                                                num_atten_heads, masking)
        return self.EncoderDecoder(self, encoder, decoder)

    class CrossAttentionHead(TransformerParts.AttentionHead):
        """One head of cross-attention: the AttentionHead, keys and values from the encoder's
        output (``memory``). When a subclass overrides AttentionHead alone, cross-attention
        builds that head (one override changes every attention); override this class to
        change cross-attention only. Shape: as AttentionHead, with T_q = T_tgt, T_k = T_src.
        """

    class CrossAttention(TransformerParts.SelfAttention):
        """Cross-attention: queries from the decoder, keys and values from the memory.

        Args: dls, xformer, num_atten_heads (H).
        Shape: x (B, T_tgt, M), memory (B, T_src, M), mask broadcastable to
            (B, H, T_tgt, T_src) -> (B, T_tgt, M)
        """

        @staticmethod
        def head_class(xformer):
            """An override of CrossAttentionHead wins; else an override of AttentionHead."""
            cls = type(xformer)
            if cls.CrossAttentionHead is EncoderDecoderParts.CrossAttentionHead and \
                    cls.AttentionHead is not TransformerParts.AttentionHead:
                return cls.AttentionHead
            return cls.CrossAttentionHead

        def forward(self, x, memory, mask=None):
            return self.attend(x, memory, mask)                            # (B, T_tgt, M)

        def call_head(self, head, x_q, x_kv, mask):
            return head(x_q, mask=mask, memory=x_kv)

        reads_memory = True     # the batched path: the memory's keys and values, once

    class BasicDecoderWithMasking(nn.Module):
        """One decoder layer: masked self-attention, cross-attention to the memory, then the
        feed-forward network, each inside `residual`.

        Args: dls, xformer, num_atten_heads (H); masking: accepted as in DLStudio (the mask
            is built once per batch by MasterDecoderWithMasking and passed in).
        Shape: x (B, T_tgt, M), memory (B, T_src, M), self_mask (T_tgt, T_tgt),
            cross_mask (B, 1, 1, T_src) -> (B, T_tgt, M)
        """

        def __init__(self, dls, xformer, num_atten_heads, masking=True):
            super().__init__()
            M = xformer.embedding_size
            self.norm_first, self.masking = xformer.norm_first, masking
            self.self_attention = xformer.SelfAttention(dls, xformer, num_atten_heads)
            self.cross_attention = xformer.CrossAttention(dls, xformer, num_atten_heads)
            self.feed_forward = xformer.feed_forward_block(dls)
            self.norm1, self.norm2, self.norm3 = (xformer.norm_layer(M) for _ in range(3))
            self.post_norm1, self.post_norm2, self.post_norm3 = since_2023.sublayer_norms(
                self, xformer, 3)                  # nn.Identity, or norm_placement's norms
            self.dropout = nn.Dropout(xformer.dropout)
            add_hook_points(self, xformer, "resid_pre", "resid_mid", "resid_mid2", "resid_post")

        def forward(self, x, memory, self_mask=None, cross_mask=None):
            x = self.hook_resid_mid(residual(self.hook_resid_pre(x), self.norm1, lambda y: (
                self.dropout(self.post_norm1(self.self_attention(y, self_mask)))),
                self.norm_first))                                          # (B, T_tgt, M)
            x = self.hook_resid_mid2(residual(x, self.norm2, lambda y: self.dropout(
                self.post_norm2(self.cross_attention(y, memory, cross_mask))), self.norm_first))
            if self.feed_forward is None:            # feed_forward="none": attention only
                return self.hook_resid_post(x)                             # (B, T_tgt, M)
            return self.hook_resid_post(residual(x, self.norm3, lambda y: self.dropout(
                self.post_norm3(self.feed_forward(y))), self.norm_first))  # (B, T_tgt, M)

    class MasterDecoderWithMasking(nn.Module):
        """A stack of BasicDecoderWithMasking layers and the output layer over Spanish words.

        Args: dls, xformer, num_basic_decoders (N), num_atten_heads (H), masking: True gives
            the causal mask (position t sees target words 0..t only); False lets it see the
            word it must predict: useful only to watch that go wrong.
        Shape: x (B, T_tgt, M) embedded Spanish, memory (B, T_src, M), cross_mask
            (B, 1, 1, T_src) -> logits (B, T_tgt, V_es), or (N, V_es) for the N positions
            where ``keep`` (B, T_tgt) is True (training computes no logits for padding).
        """

        def __init__(self, dls, xformer, num_basic_decoders=4, num_atten_heads=4,
                     masking=True):
            super().__init__()
            if not masking:     # a lesson only: training looks perfect, translation fails
                warnings.warn("masking=False: the decoder can now see the word it must predict;"
                              " use masking=True for a model that translates", stacklevel=2)
            self.num_basic_decoders, self.num_atten_heads = num_basic_decoders, num_atten_heads
            self.masking = masking
            self.basic_decoder_arr = nn.ModuleList([
                xformer.BasicDecoderWithMasking(dls, xformer, num_atten_heads, masking)
                for _ in range(num_basic_decoders)])
            share_t5_bias(self, self.basic_decoder_arr, xformer, bidirectional=False)
            M = xformer.embedding_size
            self.final_norm = xformer.norm_layer(M) if xformer.norm_first else nn.Identity()
            self.out = nn.Linear(M, xformer.num_tokens("es"),
                                 bias=getattr(xformer, "output_bias", True))
            self.output_scale = getattr(xformer, "output_scale", None)   # T5 v1.0's M^-1/2
            add_hook_points(self, xformer, "final", "logits")

        def forward(self, x, memory, cross_mask=None, keep=None):
            # Decoding one word with a KeyValueCache: T = 1, and that word may see all.
            self_mask = causal_mask(x.size(1), x.device) if self.masking and x.size(1) > 1 \
                else None
            for decoder in self.basic_decoder_arr:
                x = decoder(x, memory, self_mask, cross_mask)              # (B, T_tgt, M)
            x = self.hook_final(self.final_norm(x))
            x = x if self.output_scale is None else x * self.output_scale
            if keep is not None:
                x = x[keep]                                                # (N, M)
            return self.hook_logits(self.out(x))                 # (B, T_tgt, V_es) | (N, V_es)

    class EncoderDecoder(Hooked, TranslationRecords, TranslationLoRA, TranslationDecoding,
                         nn.Module):
        """The whole model as one module: both embedding generators, the MasterEncoder and
        the MasterDecoderWithMasking (so one optimiser sees every parameter).

        Shape: src (B, T_src) English ids, tgt (B, T_tgt) Spanish ids (starting with SOS)
            -> logits (B, T_tgt, V_es), or (N, V_es) with ``keep``
        """

        def __init__(self, xformer, master_encoder, master_decoder):
            super().__init__()
            self.embeddings_generator_en = xformer.embeddings_generator_en
            self.embeddings_generator_es = xformer.embeddings_generator_es
            self.encoder, self.decoder = master_encoder, master_decoder
            self.start_id = getattr(xformer, "start_id", SOS_INDEX)         # a real model's
            self.end_id = getattr(xformer, "end_id", EOS_INDEX)             # own, or DLStudio's
            self.pad_id = getattr(xformer, "pad_id", None)                  # (None: EOS pads)
            es = self.embeddings_generator_es.embedding
            if xformer.shared_vocab:     # one vocabulary: one matrix for both languages
                es.weight = self.embeddings_generator_en.embedding.weight
            if (xformer.tie_embeddings or xformer.shared_vocab) and not \
                    getattr(xformer, "own_output", False):     # Press and Wolf 2017: the
                master_decoder.out.weight = es.weight      # output layer reads it too

        def forward(self, src, tgt, keep=None):
            memory, cross_mask = self.encode(src)
            return self.decode(tgt, memory, cross_mask, keep)

        def encode(self, src):
            cross_mask = self.padding(src)[:, None, None, :]                  # (B, 1, 1, T_src)
            memory = self.encoder(self.embeddings_generator_en(src), cross_mask)  # (B, T_src, M)
            return memory, cross_mask

        def padding(self, ids):
            """Each sentence's padding: after its EOS, or a real model's trailing pad ids."""
            return padding_mask(ids) if self.pad_id is None else \
                trailing_padding(ids, self.pad_id)                         # (B, T)

        def decode(self, tgt, memory, cross_mask, keep=None):
            return self.decoder(self.embeddings_generator_es(tgt), memory, cross_mask, keep)

        def loss(self, src, tgt, label_smoothing=0.0, run=None):
            """Teacher forcing: the decoder reads tgt[:, :-1] and is scored on tgt[:, 1:] up
            to each first EOS, with ``label_smoothing`` (Vaswani 5.4); ``run``: this model or
            the trainer's wrapper of it. Shape: src, tgt -> the sum over those N words, N"""
            tgt_in, labels = tgt[:, :-1], tgt[:, 1:]                      # (B, T_tgt - 1)
            keep = ~self.padding(labels)                                  # (B, T_tgt - 1)
            run = self if run is None else run     # (a compiled model has no truth value)
            logits = run(src, tgt_in, keep)                               # (N, V_es)
            return summed_cross_entropy(logits, labels[keep], label_smoothing), len(logits)


class GPTParts(Hooked, GPTDecoding, TransformerParts, nn.Module):
    """A decoder-only language model (GPT: Radford et al. 2018): it predicts each next token
    of a sentence from the tokens before it, and so can continue a prompt. It is built from
    the translation model's own classes; there is no attention code of its own:

        token ids ──> EmbeddingsGenerator ──> MasterDecoderWithMasking ──────────> logits
        (B, T)        token + position code    N x BasicDecoderWithMasking:          (B, T, V)
                                               causal SelfAttention, FeedForward     next token

    No encoder: no memory and no cross-attention. A GPT layer is the encoder layer given the
    causal mask; its stack is the translation decoder's, called without memory.
    Args (keyword-only): vocab_size (V), lang (the language's label, "es" ...),
        num_basic_decoders (N), num_atten_heads (H), norm_first (pre-LN, GPT-2's, by
        default), and the sizes of `TransformerParts`.
    Shape: ids (B, T) -> logits (B, T, V), or (N, V) where ``keep`` (B, T) is True
    """

    norm_first = True

    class BasicDecoderWithMasking(TransformerParts.BasicEncoder):
        """One GPT layer: the encoder layer, given the causal mask, with the translation
        decoder layer's arguments (memory, cross_mask: None). Shape: x (B, T, M) -> (B, T, M)
        """

        def __init__(self, dls, xformer, num_atten_heads, masking=True):
            super().__init__(dls, xformer, num_atten_heads)

        def forward(self, x, memory=None, self_mask=None, cross_mask=None):
            return super().forward(x, self_mask)                           # (B, T, M)

    MasterDecoderWithMasking = EncoderDecoderParts.MasterDecoderWithMasking   # over GPT layers

    def __init__(self, *, vocab_size, lang="es", num_basic_decoders=4, num_atten_heads=4,
                 **sizes):
        nn.Module.__init__(self)
        self.lang = lang
        TransformerParts.__init__(self, vocab_sizes={lang: vocab_size}, **sizes)
        self.num_basic_decoders, self.num_atten_heads = num_basic_decoders, num_atten_heads
        check_forwards(self, ["EmbeddingsGenerator", "AttentionHead", "SelfAttention",
                              "FeedForward", "BasicDecoderWithMasking",
                              "MasterDecoderWithMasking"])
        self.embeddings_generator = self.EmbeddingsGenerator(self, lang, self.embedding_size)
        self.master_decoder = self.MasterDecoderWithMasking(
            None, self, num_basic_decoders, num_atten_heads)
        if self.tie_embeddings:
            self.master_decoder.out.weight = self.embeddings_generator.embedding.weight
        since_2023.per_layer(self, self.master_decoder.basic_decoder_arr)   # NoPE, windows

    def num_tokens(self, lang=None):
        return self.vocab_sizes[self.lang]       # one language, whatever a part asks for

    def forward(self, ids, keep=None):
        return self.master_decoder(self.embeddings_generator(ids), None, None, keep)

    def loss(self, ids, label_smoothing=0.0, run=None, keep=None):
        """Each next token up to EOS, as EncoderDecoder.loss; or where ``keep`` (B, T - 1) is
        True (a real model's text has no EOS padding). Shape: (B, T) -> sum, N"""
        inputs, labels = ids[:, :-1], ids[:, 1:]                          # (B, T - 1)
        keep = ~padding_mask(labels) if keep is None else keep
        logits = (self if run is None else run)(inputs, keep)             # (N, V)
        return summed_cross_entropy(logits, labels[keep], label_smoothing), len(logits)


# word by word through the caches (kv_cache.py): decode_newest, decoding
EncoderDecoderParts.EncoderDecoder.reference_parts = EncoderDecoderParts
GPTParts.reference_parts = GPTParts
