"""Transformers for English-to-Spanish translation, written to be read beside the lecture.

Two containers hold the whole architecture as nested classes, so that the class names read
like the diagram of Vaswani et al. 2017, Fig. 1:

    TransformerFG      post-LayerNorm, as in Vaswani et al. 2017, trained with warm-up
    TransformerPreLN   pre-LayerNorm, as in Xiong et al. 2020, no warm-up needed

        token ids ──> EmbeddingsGenerator ──> MasterEncoder (N x BasicEncoder) ──┐
        (English)     word + position code     SelfAttention, FeedForward        │ memory
                                                                                  v
        token ids ──> EmbeddingsGenerator ──> MasterDecoderWithMasking (N x BasicDecoderWithMasking)
        (Spanish)                              masked SelfAttention, CrossAttention, FeedForward
                                               ──> output layer ──> logits over Spanish words

Both containers share every class; they differ only in `norm_first` (where LayerNorm sits,
see `residual`) and in `make_optimizer` (FG's warm-up). A student's subclass that overrides
one nested class (say `AttentionHead`) gets it used everywhere, because every class builds
its parts through the container: ``xformer.AttentionHead(...)``.

Shapes (one alphabet for the whole module):
    B       batch size                  T_src, T_tgt  source / target sequence lengths
    M       embedding_size              H             num_atten_heads
    s_qkv   qkv_size = M // H           F             feed-forward hidden size (2 M)
    V_en    English vocabulary size     V_es          Spanish vocabulary size
Masks are boolean and True where attention is NOT allowed; they broadcast to
(B, H, T_query, T_key).

Deliberate departures from the paper (and from DLStudio 2.5.8):
    - Heads work on slices of the embedding axis (s_qkv = M // H each) and their outputs are
      concatenated with no output projection W^O: the lecture's design. W_Q, W_K, W_V act on
      each word separately (s_qkv x s_qkv), not on the whole flattened sentence as in DLStudio.
    - The feed-forward network is position-wise with F = 2 M (DLStudio's expansion factor;
      the paper uses 4 M) and is applied to each word separately, as in the paper.
    - Positional encoding uses the paper's base 10000 (the lecture's code uses 100; both give
      distinct codes for 10 positions, and 10000 matches the paper and PyTorch tutorials).
    - Word embeddings are scaled by sqrt(M) before the position code is added (paper, 3.4),
      and initialised with standard deviation M^-0.5 so that words and positions start at
      the same scale (PyTorch's default N(0, 1) would make words 16 times larger at M = 256).
    - No dropout by default (the lecture has none); ``dropout=`` turns it on.
"""

import logging
import math
import os
import warnings

import torch
import torch.nn as nn

from .checkpoints import CheckpointError, checkpoint_path, load_checkpoint, save_checkpoint
from .datasets import ArchiveError, Corpus, load_archive, normalize, split_pairs, vocab_fingerprint
from .evaluation import evaluate_bleu, translate_ids
from .tokens import EOS_INDEX, SOS_INDEX, causal_mask, padding_mask
from .training import TranslationTrainer

__all__ = ["TransformerFG", "TransformerPreLN", "visTransformer", "TransformerBase",
           "scaled_dot_product", "residual", "padding_mask", "causal_mask"]

log = logging.getLogger(__name__)

_masking_warned = False


# ---------------------------------------------------------------------------------------
# The three pieces of arithmetic every class below uses.
def scaled_dot_product(Q, K, V, mask=None):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(s_qkv)) V   (Vaswani et al. 2017, eq. 1).

    Shape:
        Q: (..., T_q, s_qkv), K and V: (..., T_k, s_qkv), mask: broadcastable to
        (..., T_q, T_k), True where a query may not look.
    Returns:
        (output (..., T_q, s_qkv), weights (..., T_q, T_k)); each row of weights sums to 1.
    """
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))          # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                            # (..., T_q, T_k)
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


def _run_heads(heads, x_q, x_kv, mask, keep_weights, cache=None, full_width=False):
    """Run every head of a (Self|Cross)Attention at once, each on its own slice.

    Each head's own W_Q, W_K, W_V are stacked into one (H, s_qkv, 3 s_qkv) tensor, and one
    batched matrix product (a batch of H) applies every head to its slice of every word:
    exactly what calling each head on its slice and concatenating gives (a test checks
    this), without a Python loop over heads.

    ``cache`` (a dict, for decoding one word at a time) keeps the keys and values already
    computed: self-attention appends the new word's K and V to them, cross-attention
    computes the memory's K and V once; the stacked weights are kept there too. With
    ``full_width`` every head reads the whole embedding (W_Q: M -> s_qkv) instead of its
    slice.
    """
    B, T_q, M = x_q.shape
    T_k, H = x_kv.size(1), len(heads)
    s = M // H

    def stacked(names):                 # the heads' weights side by side, transposed
        W = torch.stack([torch.cat([getattr(h, n).weight for n in names]) for h in heads])
        b = torch.stack([torch.cat([getattr(h, n).bias for n in names]) for h in heads])
        return b.unsqueeze(1), W.transpose(1, 2)          # (H, 1, k s), (H, s, k s)

    def slices(x):                      # (B, T, M) -> (H, B T, s): head h gets slice h
        if full_width:                  # (B, T, M) -> (H, B T, M): every head sees all
            return x.reshape(1, -1, M).expand(H, -1, -1)
        return x.reshape(-1, H, s).transpose(0, 1)

    def by_batch(t, T):                 # (H, B T, s) -> (B, H, T, s)
        return t.view(H, B, T, s).transpose(0, 1)

    def weights(names):                 # while decoding, stacked once and kept in the cache
        if cache is None:
            return stacked(names)
        if names not in cache:
            cache[names] = stacked(names)
        return cache[names]

    if x_kv is x_q:                     # self-attention: Q, K, V in one product
        b, W = weights(("WQ", "WK", "WV"))
        Q, K, V = torch.baddbmm(b, slices(x_q), W).chunk(3, dim=-1)     # (H, B T_q, s) each
        Q, K, V = by_batch(Q, T_q), by_batch(K, T_q), by_batch(V, T_q)  # (B, H, T_q, s)
        if cache is not None:           # earlier words' keys and values, then this one's
            if "K" in cache:
                K = torch.cat([cache["K"], K], dim=2)                   # (B, H, T_k, s)
                V = torch.cat([cache["V"], V], dim=2)
            cache["K"], cache["V"] = K, V
    else:                               # cross-attention: Q from x_q, K and V from x_kv
        bq, Wq = weights(("WQ",))
        Q = by_batch(torch.baddbmm(bq, slices(x_q), Wq), T_q)            # (B, H, T_q, s)
        if cache is not None and "K" in cache:
            K, V = cache["K"], cache["V"]
        else:
            bkv, Wkv = stacked(("WK", "WV"))
            K, V = torch.baddbmm(bkv, slices(x_kv), Wkv).chunk(2, dim=-1)  # (H, B T_k, s)
            K, V = by_batch(K, T_k), by_batch(V, T_k)                       # (B, H, T_k, s)
            if cache is not None:
                cache["K"], cache["V"] = K, V
    out, weights = scaled_dot_product(Q, K, V, mask)                  # (B, H, T_q, s)
    out = out.transpose(1, 2).reshape(B, T_q, M)                      # (B, T_q, M)
    return out, (weights.detach() if keep_weights else None)


class TransformerBase:
    """What TransformerFG and TransformerPreLN share: data, vocabularies and the classes.

    Args (keyword-only):
        dl_studio:        a ``DLStudio`` (batch size, epochs, learning rate, device, paths).
        dataroot:         folder of ``data_archive`` (default: ``dl_studio.dataroot``).
        data_archive:     a DLStudio archive file name (or path).
        max_seq_length:   tokens per sentence, SOS and EOS included (10 for the 8-word data).
        embedding_size:   M, the width of every word vector.
        save_checkpoints: write a checkpoint every ``checkpoint_freq`` epochs.
        num_warmup_steps, optimizer_params, lr_mul: FG's warm-up schedule (see
                          ``ScheduledOptim``); ``optimizer_params`` = {"beta1", "beta2",
                          "epsilon"} for Adam.
        masking:          accepted for DLStudio scripts; the decoder's own ``masking`` rules.
        checkpoint_freq:  epochs between checkpoints (5 in the lecture).
        held_out_fraction, split_seed: the held-out split, grouped by English sentence.
        The lecture's design is the default; these switches turn on other designs:
        dropout:          dropout after each sublayer and on the embeddings (Vaswani 5.4).
        label_smoothing:  of the training loss (Vaswani et al. 2017, sec. 5.4).
        full_width_heads: heads read the whole embedding, and W^O projects their
                          concatenation (Vaswani et al. 2017, sec. 3.2.2).
        tie_embeddings:   the decoder's output layer shares the Spanish embedding matrix
                          (Press and Wolf 2017; Vaswani et al. 2017, sec. 3.4).
        learned_positions: trained position vectors instead of the sinusoids.
        corpus:           a ``Corpus`` to use instead of reading ``data_archive``.

    Attributes read by DLStudio scripts: ``vocab_en_size``, ``vocab_es_size``,
    ``en_vocab_dict``, ``es_vocab_dict``, ``es_index_2_word``, ``training_corpus``.
    """

    variant = None        # "FG" or "PreLN"
    norm_first = None     # where LayerNorm sits: see `residual`

    def __init__(self, *, dl_studio, dataroot=None, data_archive=None, max_seq_length=10,
                 embedding_size=256, save_checkpoints=True, num_warmup_steps=4000,
                 optimizer_params=None, lr_mul=1.0, masking=True, checkpoint_freq=5,
                 held_out_fraction=0.05, split_seed=0, dropout=0.0, label_smoothing=0.0,
                 full_width_heads=False, tie_embeddings=False, learned_positions=False,
                 corpus=None):
        if embedding_size % 2:
            raise ValueError(f"embedding_size must be even (sin/cos pairs), got {embedding_size}")
        self.dl_studio = dl_studio
        self.dataroot = dataroot if dataroot is not None else dl_studio.dataroot
        self.data_archive = data_archive
        self.max_seq_length = max_seq_length
        self.embedding_size = embedding_size
        self.save_checkpoints = save_checkpoints
        self.num_warmup_steps = num_warmup_steps
        self.optimizer_params = dict(optimizer_params or
                                     {"beta1": 0.9, "beta2": 0.98, "epsilon": 1e-9})
        self.lr_mul = lr_mul
        self.masking = masking
        self.checkpoint_freq = checkpoint_freq
        self.held_out_fraction = held_out_fraction
        self.split_seed = split_seed
        self.dropout = dropout
        self.label_smoothing = label_smoothing
        self.full_width_heads = full_width_heads
        self.tie_embeddings = tie_embeddings
        self.learned_positions = learned_positions
        if corpus is None:
            if data_archive is None:
                raise ValueError("give data_archive= (a DLStudio archive) or corpus=")
            corpus = load_archive(self.archive_path(), max_seq_length=max_seq_length)
        self.corpus = corpus
        self.vocab_en, self.vocab_es = corpus.vocab_en, corpus.vocab_es
        self.en_vocab_dict = {w: i for i, w in enumerate(self.vocab_en)}
        self.es_vocab_dict = {w: i for i, w in enumerate(self.vocab_es)}
        self.en_index_2_word = dict(enumerate(self.vocab_en))
        self.es_index_2_word = dict(enumerate(self.vocab_es))
        self.vocab_en_size, self.vocab_es_size = len(self.vocab_en), len(self.vocab_es)
        self.vocab_fingerprint = vocab_fingerprint(self.vocab_en, self.vocab_es)
        if corpus.pairs:
            self.training_corpus, self.held_out_corpus = split_pairs(
                corpus.pairs, held_out_fraction, split_seed)
        else:
            self.training_corpus, self.held_out_corpus = [], []
        # The two embedding generators belong to the experiment, not to one stack: the
        # encoder reads English, the decoder reads (and predicts) Spanish.
        self.embeddings_generator_en = self.EmbeddingsGenerator(self, "en", embedding_size)
        self.embeddings_generator_es = self.EmbeddingsGenerator(self, "es", embedding_size)

    def archive_path(self):
        """Where ``data_archive`` is: as given if that file exists, else under dataroot."""
        if os.path.isfile(self.data_archive):
            return self.data_archive
        return os.path.join(self.dataroot, self.data_archive)

    def constructor_args(self):
        """The keyword arguments that rebuild this container (stored in checkpoints)."""
        names = ("data_archive", "max_seq_length", "embedding_size", "num_warmup_steps",
                 "optimizer_params", "lr_mul", "checkpoint_freq", "held_out_fraction",
                 "split_seed", "dropout", "label_smoothing", "full_width_heads",
                 "tie_embeddings", "learned_positions")
        args = {name: getattr(self, name) for name in names}
        args["dataroot"] = os.path.abspath(self.dataroot)
        if self.data_archive:
            archive = os.path.abspath(self.archive_path())
            args["dataroot"], args["data_archive"] = os.path.split(archive)
        return args

    # -----------------------------------------------------------------------------------
    # Words <-> token ids.
    def sentence_with_words_to_ints(self, sentences, lang):
        """Token ids of sentences (strings or word lists, SOS/EOS optional), EOS-padded.

        Shape: list of B sentences -> LongTensor (B, max_seq_length)
        Raises ValueError naming unknown words or a sentence that is too long.
        """
        vocab = self.en_vocab_dict if lang == "en" else self.es_vocab_dict
        out = torch.full((len(sentences), self.max_seq_length), EOS_INDEX, dtype=torch.long)
        for row, sentence in enumerate(sentences):
            words = sentence.split() if isinstance(sentence, str) else list(sentence)
            words = [w for w in words if w not in ("SOS", "EOS")]
            unknown = [w for w in words if w not in vocab]
            if unknown:
                raise ValueError(f"unknown {'English' if lang == 'en' else 'Spanish'} "
                                 f"word(s) {', '.join(map(repr, unknown))}: the model only "
                                 "knows the words of its training vocabulary")
            if len(words) + 2 > self.max_seq_length:
                raise ValueError(f"{' '.join(words)!r} has {len(words)} words; this model "
                                 f"takes at most {self.max_seq_length - 2}")
            ids = [SOS_INDEX] + [vocab[w] for w in words] + [EOS_INDEX]
            out[row, :len(ids)] = torch.tensor(ids)
        return out

    def ints_to_words(self, ids):
        """Spanish words of one id sequence, stopping at EOS, without SOS/EOS."""
        words = []
        for i in ids:
            i = int(i)
            if i == EOS_INDEX:
                break
            if i != SOS_INDEX:
                words.append(self.es_index_2_word[i])
        return words

    # -----------------------------------------------------------------------------------
    # The architecture.
    class EmbeddingsGenerator(nn.Module):
        """Word embeddings plus the sinusoidal position code (Vaswani et al. 2017, sec. 3.5).

        Args:
            xformer: the container (for the vocabulary size and max_seq_length).
            lang: "en" or "es".  embedding_size: M.
        Shape:
            ids (B, T) -> (B, T, M);  ``start`` offsets the positions (incremental decoding).
        """

        positional_base = 10000.0

        def __init__(self, xformer, lang, embedding_size):
            super().__init__()
            if lang not in ("en", "es"):
                raise ValueError(f"lang must be 'en' or 'es', got {lang!r}")
            vocab_size = xformer.vocab_en_size if lang == "en" else xformer.vocab_es_size
            self.lang, self.embedding_size = lang, embedding_size
            self.embedding = nn.Embedding(vocab_size, embedding_size)
            # std M^-0.5, so that after the sqrt(M) scaling a word vector has entries of
            # about the size of the position code's (+-1) and does not drown it.
            nn.init.normal_(self.embedding.weight, std=embedding_size ** -0.5)
            self.register_buffer("positional_encoding", self.sinusoids(
                xformer.max_seq_length, embedding_size, self.positional_base), persistent=False)
            # learned_positions=True: a trained vector per position instead of the sinusoid
            # (as in BERT and GPT); initialised small, like the word vectors.
            self.learned_positions = None
            if xformer.learned_positions:
                self.learned_positions = nn.Parameter(
                    torch.randn(xformer.max_seq_length, embedding_size) * 0.02)
            self.dropout = nn.Dropout(xformer.dropout)

        @staticmethod
        def sinusoids(num_positions, embedding_size, base):
            """PE[pos, 2i] = sin(pos / base^(2i/M)),  PE[pos, 2i+1] = cos(pos / base^(2i/M)).

            Shape: (num_positions, M)
            """
            pos = torch.arange(num_positions, dtype=torch.float32).unsqueeze(1)   # (T, 1)
            two_i = torch.arange(0, embedding_size, 2, dtype=torch.float32)       # (M/2,)
            angle = pos / base ** (two_i / embedding_size)                        # (T, M/2)
            pe = torch.zeros(num_positions, embedding_size)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
            return pe                                                             # (T, M)

        def forward(self, ids, start=0):
            T = ids.size(1)
            x = self.embedding(ids) * math.sqrt(self.embedding_size)             # (B, T, M)
            positions = (self.positional_encoding if self.learned_positions is None
                         else self.learned_positions)
            x = x + positions[start:start + T]                                    # (B, T, M)
            return self.dropout(x)

    class AttentionHead(nn.Module):
        """One attention head with its own W_Q, W_K, W_V, applied to each word of its slice.

        Args:
            dl_studio, max_seq_length, num_atten_heads: accepted as in DLStudio.
            qkv_size: s_qkv, the width of this head's slice of the embedding.
            input_size: what the head reads: its slice (s_qkv, the lecture's design) or,
                with ``full_width_heads``, the whole embedding (M).
        Shape:
            x (B, T, input_size), mask broadcastable to (B, T, T) -> (B, T, s_qkv)
        """

        def __init__(self, dl_studio, max_seq_length, qkv_size, num_atten_heads,
                     input_size=None):
            super().__init__()
            self.qkv_size = qkv_size
            input_size = input_size or qkv_size
            self.WQ = nn.Linear(input_size, qkv_size)
            self.WK = nn.Linear(input_size, qkv_size)
            self.WV = nn.Linear(input_size, qkv_size)

        def forward(self, x, mask=None):
            out, _ = scaled_dot_product(self.WQ(x), self.WK(x), self.WV(x), mask)
            return out

    class CrossAttentionHead(AttentionHead):
        """One head of cross-attention: queries from the decoder, keys and values from the
        encoder's output (the memory).

        Shape:
            x (B, T_tgt, s_qkv), memory (B, T_src, s_qkv), mask broadcastable to
            (B, T_tgt, T_src) -> (B, T_tgt, s_qkv)
        """

        def forward(self, x, memory, mask=None):
            out, _ = scaled_dot_product(self.WQ(x), self.WK(memory), self.WV(memory), mask)
            return out

    class SelfAttention(nn.Module):
        """H heads, each on its own slice of the embedding; outputs concatenated.

        With the container's ``full_width_heads=True`` each head reads the whole embedding
        and the concatenation goes through an output projection W^O (M x M): multi-head
        attention as in Vaswani et al. 2017, sec. 3.2.2.

        Args:
            dls, xformer: the configuration and the container; num_atten_heads: H.
        Shape:
            x (B, T, M), mask broadcastable to (B, H, T, T) -> (B, T, M)
        Attributes:
            record_attention: set True to keep ``attention_weights`` (B, H, T, T) of the
            last forward pass (for plots); off by default, so training pays nothing.
        """

        head_class_name = "AttentionHead"

        def __init__(self, dls, xformer, num_atten_heads):
            super().__init__()
            M = xformer.embedding_size
            if M % num_atten_heads:
                raise ValueError(f"embedding_size {M} is not divisible by "
                                 f"num_atten_heads {num_atten_heads}")
            self.num_atten_heads, self.qkv_size = num_atten_heads, M // num_atten_heads
            self.full_width = xformer.full_width_heads
            head_class = getattr(xformer, self.head_class_name)
            self.heads = nn.ModuleList([
                head_class(dls, xformer.max_seq_length, self.qkv_size, num_atten_heads,
                           input_size=M if self.full_width else None)
                for _ in range(num_atten_heads)])
            self.W_O = nn.Linear(M, M) if self.full_width else nn.Identity()
            # The batched path reproduces the standard head; a student's head with its own
            # forward is run head by head instead, so that it is the code that runs.
            base = getattr(TransformerBase, self.head_class_name)
            self.batched = all(type(h).forward is base.forward for h in self.heads)
            self.record_attention = False
            self.attention_weights = None

        def forward(self, x, mask=None, cache=None):
            return self.attend(x, x, mask, cache)

        def attend(self, x_q, x_kv, mask, cache=None):
            if self.batched:
                out, weights = _run_heads(self.heads, x_q, x_kv, mask, self.record_attention,
                                          cache, self.full_width)
                self.attention_weights = weights
            else:
                out = self.per_head(x_q, x_kv, mask)
            return self.W_O(out)

        def per_head(self, x_q, x_kv, mask):
            """Reference path: each head on its own slice, outputs concatenated (before W^O)."""
            s = self.qkv_size
            if mask is not None and mask.dim() == 4:
                mask = mask[:, 0]                                         # (B, T_q, T_k)

            def part(x, i):
                return x if self.full_width else x[..., i * s:(i + 1) * s]

            outs = [self.call_head(h, part(x_q, i), part(x_kv, i), mask)
                    for i, h in enumerate(self.heads)]
            return torch.cat(outs, dim=-1)                                # (B, T_q, M)

        def call_head(self, head, x_q, x_kv, mask):
            return head(x_q, mask)

    class CrossAttention(SelfAttention):
        """Cross-attention: queries from the decoder, keys and values from the memory.

        Shape:
            x (B, T_tgt, M), memory (B, T_src, M), mask broadcastable to (B, H, T_tgt, T_src)
            -> (B, T_tgt, M)
        """

        head_class_name = "CrossAttentionHead"

        def forward(self, x, memory, mask=None, cache=None):
            return self.attend(x, memory, mask, cache)

        def call_head(self, head, x_q, x_kv, mask):
            return head(x_q, x_kv, mask)

    class FeedForward(nn.Module):
        """Position-wise feed-forward network: W2 ReLU(W1 x)  (Vaswani et al. 2017, eq. 2).

        Shape: (B, T, M) -> (B, T, M), with a hidden width F = 2 M.
        """

        expansion = 2

        def __init__(self, dls, xformer):
            super().__init__()
            M = xformer.embedding_size
            self.W1 = nn.Linear(M, self.expansion * M)
            self.W2 = nn.Linear(self.expansion * M, M)

        def forward(self, x):
            return self.W2(torch.relu(self.W1(x)))

    class BasicEncoder(nn.Module):
        """One encoder layer: self-attention, then the feed-forward network, each inside
        `residual` (post-LN for FG, pre-LN for PreLN).

        Shape: x (B, T_src, M), mask (B, 1, 1, T_src) -> (B, T_src, M)
        """

        def __init__(self, dls, xformer, num_atten_heads):
            super().__init__()
            M = xformer.embedding_size
            self.norm_first = xformer.norm_first
            self.self_attention = xformer.SelfAttention(dls, xformer, num_atten_heads)
            self.feed_forward = xformer.FeedForward(dls, xformer)
            self.norm1, self.norm2 = nn.LayerNorm(M), nn.LayerNorm(M)
            self.dropout = nn.Dropout(xformer.dropout)

        def forward(self, x, mask=None):
            x = residual(x, self.norm1, lambda y: self.dropout(self.self_attention(y, mask)),
                         self.norm_first)                                  # (B, T_src, M)
            return residual(x, self.norm2, lambda y: self.dropout(self.feed_forward(y)),
                            self.norm_first)                               # (B, T_src, M)

    class MasterEncoder(nn.Module):
        """A stack of ``num_basic_encoders`` BasicEncoders (with a final LayerNorm for PreLN,
        Xiong et al. 2020).

        Shape: x (B, T_src, M) embedded English, mask (B, 1, 1, T_src) -> (B, T_src, M)
        """

        def __init__(self, dls, xformer, num_basic_encoders=4, num_atten_heads=4):
            super().__init__()
            self.num_basic_encoders, self.num_atten_heads = num_basic_encoders, num_atten_heads
            self.basic_encoder_arr = nn.ModuleList([
                xformer.BasicEncoder(dls, xformer, num_atten_heads)
                for _ in range(num_basic_encoders)])
            M = xformer.embedding_size
            self.final_norm = nn.LayerNorm(M) if xformer.norm_first else nn.Identity()

        def config(self):
            return {"num_basic_encoders": self.num_basic_encoders,
                    "num_atten_heads": self.num_atten_heads}

        def forward(self, x, mask=None):
            for encoder in self.basic_encoder_arr:
                x = encoder(x, mask)                                       # (B, T_src, M)
            return self.final_norm(x)

    class BasicDecoderWithMasking(nn.Module):
        """One decoder layer: masked self-attention, cross-attention to the memory, then the
        feed-forward network, each inside `residual`.

        Args:
            masking: accepted as in DLStudio; the mask itself is built once per batch by
                     MasterDecoderWithMasking and passed in.
        Shape:
            x (B, T_tgt, M), memory (B, T_src, M), self_mask (T_tgt, T_tgt),
            cross_mask (B, 1, 1, T_src) -> (B, T_tgt, M)
            With ``cache`` (decoding), x is the newest word only: (B, 1, M).
        """

        def __init__(self, dls, xformer, num_atten_heads, masking=True):
            super().__init__()
            M = xformer.embedding_size
            self.norm_first, self.masking = xformer.norm_first, masking
            self.self_attention = xformer.SelfAttention(dls, xformer, num_atten_heads)
            self.cross_attention = xformer.CrossAttention(dls, xformer, num_atten_heads)
            self.feed_forward = xformer.FeedForward(dls, xformer)
            self.norm1, self.norm2, self.norm3 = nn.LayerNorm(M), nn.LayerNorm(M), nn.LayerNorm(M)
            self.dropout = nn.Dropout(xformer.dropout)

        def forward(self, x, memory, self_mask=None, cross_mask=None, cache=None):
            self_cache, cross_cache = (cache["self"], cache["cross"]) if cache else (None, None)
            x = residual(x, self.norm1,
                         lambda y: self.dropout(self.self_attention(y, self_mask, self_cache)),
                         self.norm_first)                                  # (B, T_tgt, M)
            x = residual(x, self.norm2,
                         lambda y: self.dropout(self.cross_attention(y, memory, cross_mask,
                                                                     cross_cache)),
                         self.norm_first)                                  # (B, T_tgt, M)
            return residual(x, self.norm3, lambda y: self.dropout(self.feed_forward(y)),
                            self.norm_first)                               # (B, T_tgt, M)

    class MasterDecoderWithMasking(nn.Module):
        """A stack of BasicDecoderWithMasking layers and the output layer over Spanish words.

        Args:
            masking: True (the default) gives the causal mask, so that position t sees only
                     target words 0..t. False lets every position see the whole target,
                     including the word it must predict: useful only to watch that go wrong.
        Shape:
            x (B, T_tgt, M) embedded Spanish, memory (B, T_src, M), cross_mask
            (B, 1, 1, T_src) -> logits (B, T_tgt, V_es), or (N, V_es) for the N positions
            where ``keep`` (B, T_tgt) is True (training computes no logits for padding).
            With ``cache`` (from ``new_cache``), x is only the newest word (B, 1, M): the
            earlier words' keys and values are in the cache (incremental decoding).
        """

        def __init__(self, dls, xformer, num_basic_decoders=4, num_atten_heads=4,
                     masking=True):
            super().__init__()
            global _masking_warned
            if not masking and not _masking_warned:
                _masking_warned = True
                warnings.warn("masking=False: the decoder can now see the word it must "
                              "predict, so training will look perfect and translation will "
                              "fail. Use masking=True for a model that translates.",
                              stacklevel=2)
            self.num_basic_decoders, self.num_atten_heads = num_basic_decoders, num_atten_heads
            self.masking = masking
            self.basic_decoder_arr = nn.ModuleList([
                xformer.BasicDecoderWithMasking(dls, xformer, num_atten_heads, masking)
                for _ in range(num_basic_decoders)])
            M = xformer.embedding_size
            self.final_norm = nn.LayerNorm(M) if xformer.norm_first else nn.Identity()
            self.out = nn.Linear(M, xformer.vocab_es_size)

        def config(self):
            return {"num_basic_decoders": self.num_basic_decoders,
                    "num_atten_heads": self.num_atten_heads, "masking": self.masking}

        def new_cache(self):
            """Empty key/value caches, one per layer, for decoding one word at a time."""
            return [{"self": {}, "cross": {}} for _ in self.basic_decoder_arr]

        def forward(self, x, memory, cross_mask=None, keep=None, cache=None):
            T = x.size(1)
            # The newest word may look at every cached word: no causal mask is needed then.
            causal = self.masking and cache is None
            self_mask = causal_mask(T, x.device) if causal else None          # (T_tgt, T_tgt)
            for i, decoder in enumerate(self.basic_decoder_arr):
                x = decoder(x, memory, self_mask, cross_mask,
                            cache[i] if cache else None)                       # (B, T_tgt, M)
            x = self.final_norm(x)
            if keep is not None:
                x = x[keep]                                                   # (N, M)
            return self.out(x)                                   # (B, T_tgt, V_es) | (N, V_es)

    class EncoderDecoder(nn.Module):
        """The whole model as one module: both embedding generators, the MasterEncoder and
        the MasterDecoderWithMasking (so one optimiser sees every parameter).

        Shape:
            src (B, T_src) English ids, tgt (B, T_tgt) Spanish ids (starting with SOS)
            -> logits (B, T_tgt, V_es), or (N, V_es) with ``keep``
        """

        def __init__(self, xformer, master_encoder, master_decoder):
            super().__init__()
            self.embeddings_generator_en = xformer.embeddings_generator_en
            self.embeddings_generator_es = xformer.embeddings_generator_es
            self.encoder, self.decoder = master_encoder, master_decoder
            if xformer.tie_embeddings:   # the output layer reuses the Spanish word vectors
                master_decoder.out.weight = self.embeddings_generator_es.embedding.weight

        def encode(self, src):
            cross_mask = padding_mask(src)[:, None, None, :]                  # (B, 1, 1, T_src)
            memory = self.encoder(self.embeddings_generator_en(src), cross_mask)  # (B, T_src, M)
            return memory, cross_mask

        def decode(self, tgt, memory, cross_mask, keep=None):
            return self.decoder(self.embeddings_generator_es(tgt), memory, cross_mask, keep)

        def decode_next(self, word, position, memory, cross_mask, cache):
            """Logits for the word after ``word`` (at ``position``), reusing ``cache``.

            Shape: word (B, 1) -> (B, V_es)
            """
            x = self.embeddings_generator_es(word, start=position)            # (B, 1, M)
            return self.decoder(x, memory, cross_mask, cache=cache)[:, -1]     # (B, V_es)

        @torch.no_grad()
        def attention_maps(self, src, tgt):
            """The attention weights of one teacher-forced pass (for plots).

            Shape: src (B, T_src), tgt (B, T_tgt) -> dict with "encoder", "decoder_self"
            and "cross": lists (one per layer) of (B, H, T_q, T_k) weights; each row sums
            to 1 and masked positions are exactly 0.
            """
            encoders = [e.self_attention for e in self.encoder.basic_encoder_arr]
            selfs = [d.self_attention for d in self.decoder.basic_decoder_arr]
            crosses = [d.cross_attention for d in self.decoder.basic_decoder_arr]
            everything = encoders + selfs + crosses
            if not all(a.batched for a in everything):
                raise ValueError("attention maps are recorded on the batched path only; a "
                                 "custom head's forward must keep its own weights")
            for a in everything:
                a.record_attention = True
            try:
                self(src, tgt)
                return {"encoder": [a.attention_weights for a in encoders],
                        "decoder_self": [a.attention_weights for a in selfs],
                        "cross": [a.attention_weights for a in crosses]}
            finally:
                for a in everything:
                    a.record_attention, a.attention_weights = False, None

        def can_cache(self):
            """Incremental decoding needs every attention on the batched path."""
            return all(m.batched for m in self.decoder.modules()
                       if isinstance(m, TransformerBase.SelfAttention))

        def forward(self, src, tgt, keep=None):
            memory, cross_mask = self.encode(src)
            return self.decode(tgt, memory, cross_mask, keep)

    class ScheduledOptim:
        """Adam with the warm-up schedule of Vaswani et al. 2017, eq. 3:

            lr(step) = lr_mul * d_model^-0.5 * min(step^-0.5, step * n_warmup_steps^-1.5)

        The rate rises linearly for ``n_warmup_steps`` steps, then decays as 1/sqrt(step).

        Args:
            optimizer: a torch optimiser (Adam).  lr_mul, d_model, n_warmup_steps: as above.
        """

        def __init__(self, optimizer, lr_mul, d_model, n_warmup_steps):
            self.optimizer, self.lr_mul = optimizer, lr_mul
            self.d_model, self.n_warmup_steps = d_model, n_warmup_steps
            self.n_steps = 0

        def lr_at(self, step):
            """The learning rate at optimiser step ``step`` (1-based): a pure function."""
            step = max(step, 1)
            return self.lr_mul * self.d_model ** -0.5 * min(step ** -0.5,
                                                            step * self.n_warmup_steps ** -1.5)

        def step(self):
            """Set the rate for the next step, then take it."""
            self.n_steps += 1
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_at(self.n_steps)
            self.optimizer.step()

        step_and_update_lr = step   # DLStudio's name

        def zero_grad(self, set_to_none=True):
            self.optimizer.zero_grad(set_to_none=set_to_none)

        @property
        def param_groups(self):
            return self.optimizer.param_groups

        def state_dict(self):
            return {"optimizer": self.optimizer.state_dict(), "n_steps": self.n_steps}

        def load_state_dict(self, state):
            self.optimizer.load_state_dict(state["optimizer"])
            self.n_steps = state["n_steps"]

    # -----------------------------------------------------------------------------------
    # Building the optimiser: the other place where FG and PreLN differ.
    def _adam(self, params, lr):
        p = self.optimizer_params
        kwargs = {"lr": lr, "betas": (p.get("beta1", 0.9), p.get("beta2", 0.98)),
                  "eps": p.get("epsilon", 1e-9)}
        params = list(params)
        try:     # one fused kernel for all parameters (PyTorch >= 2.4): same maths, faster
            return torch.optim.Adam(params, fused=True, **kwargs)
        except (RuntimeError, TypeError):
            return torch.optim.Adam(params, **kwargs)

    def make_optimizer(self, params):
        raise NotImplementedError

    # -----------------------------------------------------------------------------------
    # Training, checkpoints and evaluation, with DLStudio's method names. The work is done
    # in DLStudio.training and DLStudio.evaluation; these methods only connect the parts.
    def run_code_for_training(self, dls, master_encoder, master_decoder,
                              display_train_loss=False, checkpoints_dir=None,
                              max_minutes=None, overwrite=False, resume=False,
                              clip_grad_norm=1.0, track_bleu=False):
        """Train every parameter (both embedding generators included) on the training
        split, write a checkpoint every ``checkpoint_freq`` epochs to ``checkpoints_dir``
        and the final model to ``dls.path_saved_model``. ``resume=True`` continues from the
        newest readable checkpoint in ``checkpoints_dir``; ``overwrite=True`` allows a
        directory that already holds checkpoints; ``track_bleu=True`` scores the held-out
        split at every checkpoint.

        Returns:
            the ``TranslationTrainer`` (its ``model``, ``train_losses``, ``optimizer``).
        """
        checkpoints_dir = checkpoints_dir or f"checkpoints_{self.variant}"
        trainer = TranslationTrainer(self, master_encoder, master_decoder, checkpoints_dir,
                          display_train_loss=display_train_loss, max_minutes=max_minutes,
                          overwrite=overwrite, resume=resume,
                          clip_grad_norm=clip_grad_norm, track_bleu=track_bleu)
        trainer.run()
        self.save_model(trainer.payload(trainer.last_epoch, trainer.batches_done == 0),
                        dls.path_saved_model)
        self.trained_model = trainer.model
        return trainer

    run_code_for_training_TransformerFG = run_code_for_training
    run_code_for_training_TransformerPreLN = run_code_for_training

    def save_model(self, payload, path_saved_model):
        """Write the final model. One path: one checkpoint file. A dict of paths (DLStudio's
        ``encoder_FG``, ``decoder_FG``, ``embeddings_generator_en_FG``, ...): the complete
        checkpoint under the encoder's path, and each component's weights under its own."""
        if isinstance(path_saved_model, str):
            save_checkpoint(payload, path_saved_model)
            return
        for key, path in path_saved_model.items():
            part = key.rsplit("_", 1)[0]          # "encoder_FG" -> "encoder"
            if part == "encoder":
                save_checkpoint(payload, path)
            elif part in payload["model"]:
                save_checkpoint(payload["model"][part], path)

    def saved_model_path(self):
        saved = self.dl_studio.path_saved_model
        if isinstance(saved, str):
            return saved
        return next((p for k, p in saved.items() if k.startswith("encoder")), None)

    def model_from(self, master_encoder, master_decoder, checkpoint=None):
        """An EncoderDecoder of these stacks (on the device), with a checkpoint's weights."""
        model = self.EncoderDecoder(self, master_encoder, master_decoder)
        if checkpoint is not None:
            self.load_weights(checkpoint, master_encoder, master_decoder)
        return model.to(self.dl_studio.device).eval()

    def load_weights(self, payload, master_encoder, master_decoder):
        """Copy a checkpoint's weights into the embedding generators and the given stacks,
        after checking that they were built alike. Raises CheckpointError on a mismatch."""
        if isinstance(payload, str):
            path, payload = payload, load_checkpoint(payload)
        else:
            path = "the checkpoint"
        expected = {"variant": self.variant, "vocab_fingerprint": self.vocab_fingerprint,
                    "encoder_config": master_encoder.config(),
                    "decoder_config": master_decoder.config()}
        args = payload["container_args"]
        for name in ("embedding_size", "max_seq_length"):
            if args.get(name) != getattr(self, name):
                raise CheckpointError(f"{path} was trained with {name}={args.get(name)}, this "
                                      f"model has {name}={getattr(self, name)}")
        for name, value in expected.items():
            if payload.get(name) != value:
                what = ("vocabularies (another archive)" if name == "vocab_fingerprint"
                        else name)
                raise CheckpointError(f"{path} does not fit this model: its {what} is "
                                      f"{payload.get(name)}, this model's is {value}")
        parts = payload["model"]
        self.embeddings_generator_en.load_state_dict(parts["embeddings_generator_en"])
        self.embeddings_generator_es.load_state_dict(parts["embeddings_generator_es"])
        master_encoder.load_state_dict(parts["encoder"])
        master_decoder.load_state_dict(parts["decoder"])
        return payload

    def run_code_for_evaluating(self, master_encoder, master_decoder, result_file=None,
                                checkpoint=None, beam_width=1, show=20, print_fn=print,
                                model=None):
        """Translate the held-out split, print ``show`` random translations beside their
        references, and return the BLEU scores (NLTK and sacreBLEU).

        The weights are those of ``checkpoint`` when given; else those of the model just
        trained in this process; else those saved at ``dl_studio.path_saved_model``
        (or, given ``model``, that EncoderDecoder as it is).
        """
        if model is None:
            if checkpoint is None and getattr(self, "trained_model", None) is None:
                checkpoint = self.saved_model_path()
            model = self.model_from(master_encoder, master_decoder, checkpoint)
        if not self.held_out_corpus:
            raise ValueError("no held-out pairs: the container was built without an archive")
        result = evaluate_bleu(self, model, self.held_out_corpus, beam_width=beam_width,
                               show=show, result_file=result_file, print_fn=print_fn)
        line = (f"held-out BLEU (NLTK corpus_bleu, 4-gram, smoothing method1): "
                f"{result['bleu']:.2f} on {result['sentences']} English sentences")
        if "sacrebleu" in result:
            line += f"\nsacreBLEU: {result['sacrebleu']:.2f}  ({result['signature']})"
        print_fn(line)
        return result

    run_code_for_evaluating_TransformerFG = run_code_for_evaluating
    run_code_for_evaluating_TransformerPreLN = run_code_for_evaluating

    def run_code_for_evaluating_checkpoint(self, master_encoder, master_decoder,
                                           checkpoints_dir, checkpoint_index, result_file=None,
                                           beam_width=1, show=20, print_fn=print):
        """Evaluate ``checkpoints_dir/checkpoint_<checkpoint_index>.pt`` on the held-out split."""
        return self.run_code_for_evaluating(
            master_encoder, master_decoder, result_file=result_file, beam_width=beam_width,
            checkpoint=checkpoint_path(checkpoints_dir, checkpoint_index), show=show,
            print_fn=print_fn)

    def prepare_sentence(self, sentence):
        """Normalise raw English like the corpus (lower case, contractions expanded,
        punctuation removed) and check it; return its words.

        Raises ValueError naming unknown words, or saying what is wrong with an empty or
        over-long sentence.
        """
        if not isinstance(sentence, str):
            return list(sentence)
        words = [w for w in normalize(sentence, expand=True).split() if w not in ("sos", "eos")]
        if not words:
            raise ValueError(f"nothing to translate in {sentence!r}: give an English "
                             f"sentence of 1 to {self.max_seq_length - 2} words")
        unknown = [w for w in words if w not in self.en_vocab_dict]
        if unknown:
            raise ValueError(f"{sentence!r}: the model has never seen the word(s) "
                             f"{', '.join(map(repr, unknown))}; rephrase with words of its "
                             "training vocabulary")
        if len(words) > self.max_seq_length - 2:
            raise ValueError(f"{sentence!r} has {len(words)} words; this model translates "
                             f"at most {self.max_seq_length - 2}")
        return words

    def translate(self, model, sentences, beam_width=1):
        """Translate English sentences (raw strings or word lists) in one batch; return
        the Spanish strings."""
        words = [self.prepare_sentence(s) for s in sentences]
        device = next(model.parameters()).device
        src = self.sentence_with_words_to_ints(words, "en").to(device)
        ids = translate_ids(model, src, self.max_seq_length, beam_width)
        return [" ".join(self.ints_to_words(seq)) for seq in ids]

    def run_code_for_translating_user_input(self, master_encoder, master_decoder,
                                            checkpoints_dir, checkpoint_index, sentence,
                                            beam_width=1):
        """Translate one sentence (or a list) with a checkpoint; return the Spanish."""
        model = self.model_from(master_encoder, master_decoder,
                                checkpoint_path(checkpoints_dir, checkpoint_index))
        many = not isinstance(sentence, str)
        out = self.translate(model, sentence if many else [sentence], beam_width)
        return out if many else out[0]

    @staticmethod
    def from_checkpoint(path, dl_studio=None, corpus=None):
        """Rebuild container, stacks and weights from a checkpoint file alone.

        Args:
            dl_studio: a DLStudio (default: CPU, or the GPU when present).
            corpus: the archive's Corpus, to get the held-out split back (default: read the
                    archive named in the checkpoint when it is there; else no pairs).
        Returns:
            ``(xformer, model)``, the model an EncoderDecoder in eval mode.
        """
        from .DLStudio import DLStudio
        payload = load_checkpoint(path)
        cls = {"FG": TransformerFG, "PreLN": TransformerPreLN}.get(payload["variant"])
        if cls is None:
            raise CheckpointError(f"{path}: unknown variant {payload['variant']!r}")
        dls = dl_studio or DLStudio(seed=None)
        args = dict(payload["container_args"])
        if corpus is None:
            corpus = _archive_or_vocab_only(args, payload)
        xformer = cls(dl_studio=dls, corpus=corpus, **args)
        encoder = cls.MasterEncoder(dls, xformer, **payload["encoder_config"])
        decoder = cls.MasterDecoderWithMasking(dls, xformer, **payload["decoder_config"])
        return xformer, xformer.model_from(encoder, decoder, payload)


def _archive_or_vocab_only(args, payload):
    """The archive a checkpoint was trained on, if it is still where it was and still has
    the checkpoint's vocabularies; else a corpus with the vocabularies and no pairs."""
    path = os.path.join(args.get("dataroot") or ".", args.get("data_archive") or "")
    if args.get("data_archive") and os.path.isfile(path):
        try:
            corpus = load_archive(path, max_seq_length=args["max_seq_length"])
        except ArchiveError:
            corpus = None
        if corpus and vocab_fingerprint(corpus.vocab_en, corpus.vocab_es) == \
                payload["vocab_fingerprint"]:
            return corpus
    return Corpus([], payload["vocab_en"], payload["vocab_es"], name="checkpoint")


class TransformerFG(TransformerBase):
    """The Transformer of Vaswani et al. 2017: LayerNorm after each residual sum (post-LN),
    trained with Adam and the learning-rate warm-up of `ScheduledOptim`.

    Example:
        >>> xformer = TransformerFG(dl_studio=dls, dataroot="./data/",
        ...     data_archive="en_es_xformer_8_90000.tar.gz", max_seq_length=10,
        ...     embedding_size=256, num_warmup_steps=4000)
        >>> encoder = TransformerFG.MasterEncoder(dls, xformer, num_basic_encoders=4,
        ...                                       num_atten_heads=4)

    ClassPath: DLStudio.Transformers.TransformerFG
    """

    variant = "FG"
    norm_first = False

    def make_optimizer(self, params):
        """Adam (optimizer_params) driven by the warm-up schedule; with
        ``num_warmup_steps=0``, plain Adam at ``dl_studio.learning_rate`` (to see what the
        warm-up is for)."""
        if not self.num_warmup_steps:
            return self._adam(params, lr=self.dl_studio.learning_rate)
        return self.ScheduledOptim(self._adam(params, lr=0.0), self.lr_mul,
                                   self.embedding_size, self.num_warmup_steps)


class TransformerPreLN(TransformerBase):
    """The pre-LN Transformer of Xiong et al. 2020: LayerNorm before each sublayer, inside
    the residual branch, and a final LayerNorm after each stack. Stable without warm-up:
    Adam at ``dl_studio.learning_rate``.

    ClassPath: DLStudio.Transformers.TransformerPreLN
    """

    variant = "PreLN"
    norm_first = True

    def make_optimizer(self, params):
        """Plain Adam at the DLStudio learning rate (no warm-up)."""
        return self._adam(params, lr=self.dl_studio.learning_rate)


# ---------------------------------------------------------------------------------------
class visTransformer(nn.Module):
    """A vision transformer (Dosovitskiy et al. 2020): an image is read as a sentence of
    patches by the translation models' own MasterEncoder, and classified from a class token.

        image ──> PatchEmbeddingGenerator ──────────────> MasterEncoder ──> class token ──> Linear
        (B, C, H, W)  patches (all C channels of a patch    (N x BasicEncoder, its output  (B, K)
                      together), W_E, class token,           FG or PreLN      (B, M)
                      position embeddings: (B, 1 + N_p, M)   layout)

    Shapes add to the module's alphabet: C channels, H x W image, P_h x P_w patch,
    N_p = (H / P_h)(W / P_w) patches, K classes. The encoder classes below are the very
    classes of TransformerFG / TransformerPreLN (no copies); ``layout`` picks where
    LayerNorm sits and how the optimiser is built, exactly as for translation.

    Args (keyword-only; DLStudio's names):
        dl_studio:          a DLStudio (batch size, epochs, learning rate, device, and
                            ``image_size``, ``classes`` when not given here).
        patch_size:         (P_h, P_w), dividing the image size.
        embedding_size:     M.   num_basic_encoders, num_atten_heads: the encoder's depth, H.
        image_size:         (H, W) (default: dl_studio.image_size, else (32, 32)).
        classes:            the class names (default: dl_studio.classes).
        in_channels:        C (3).
        layout:             "PreLN" (default, as in Dosovitskiy et al.) or "FG" (post-LN,
                            trained with the warm-up of ScheduledOptim).
        num_warmup_steps, lr_mul, optimizer_params: FG's warm-up, as in TransformerFG.
        dropout, label_smoothing, full_width_heads: the translation models' switches.
        augment:            random shifts (4 pixels) and left-right flips of training images.
        save_checkpoints, checkpoint_freq: a checkpoint every ``checkpoint_freq`` epochs.
        max_seq_length:     accepted for DLStudio scripts; must be N_p + 1 when given.
    Shape:
        images (B, C, H, W), floats in [0, 1] -> logits (B, K)
    Example:
        >>> vit = visTransformer(dl_studio=dls, patch_size=(8, 8), embedding_size=128,
        ...                      num_basic_encoders=4, num_atten_heads=4, classes=SHAPE_CLASSES)
        >>> vit.load_shapes_dataset()
        >>> vit.run_code_for_training_visTransformer(dls, vit, checkpoint_dir="ck_vit")

    ClassPath: DLStudio.Transformers.visTransformer
    """

    variant = "visTransformer"

    # The translation models' encoder classes, shared rather than copied.
    AttentionHead = TransformerBase.AttentionHead
    SelfAttention = TransformerBase.SelfAttention
    FeedForward = TransformerBase.FeedForward
    BasicEncoder = TransformerBase.BasicEncoder
    MasterEncoder = TransformerBase.MasterEncoder
    ScheduledOptim = TransformerBase.ScheduledOptim
    _adam = TransformerBase._adam

    class PatchEmbeddingGenerator(nn.Module):
        """Patches -> vectors: cut every image into P_h x P_w patches, flatten each with its
        C channels together (C P_h P_w numbers, channel by channel), project to M with W_E,
        put the learnable class token in front and add the learnable position embeddings
        (Dosovitskiy et al. 2020, eq. 1).

        Shape: images (B, C, H, W) -> (B, 1 + N_p, M)
        """

        def __init__(self, vit, in_channels, patch_size, image_size, embedding_size):
            super().__init__()
            (P_h, P_w), (H, W) = patch_size, image_size
            if H % P_h or W % P_w:
                raise ValueError(f"patch_size {tuple(patch_size)} does not divide image_size "
                                 f"{tuple(image_size)}: choose a patch size that does")
            self.patch_size = (P_h, P_w)
            self.num_patches = (H // P_h) * (W // P_w)
            self.W_E = nn.Linear(in_channels * P_h * P_w, embedding_size)
            self.class_token = nn.Parameter(torch.randn(1, 1, embedding_size) * 0.02)
            self.position_embeddings = nn.Parameter(
                torch.randn(1, 1 + self.num_patches, embedding_size) * 0.02)
            self.dropout = nn.Dropout(vit.dropout)

        @staticmethod
        def patches(images, patch_size):
            """Shape: (B, C, H, W) -> (B, N_p, C P_h P_w), patches row by row."""
            B, C, H, W = images.shape
            P_h, P_w = patch_size
            x = images.unfold(2, P_h, P_h).unfold(3, P_w, P_w)   # (B, C, H/P_h, W/P_w, P_h, P_w)
            x = x.permute(0, 2, 3, 1, 4, 5)                       # (B, H/P_h, W/P_w, C, P_h, P_w)
            return x.reshape(B, -1, C * P_h * P_w)                # (B, N_p, C P_h P_w)

        def forward(self, images):
            x = self.W_E(self.patches(images, self.patch_size))              # (B, N_p, M)
            cls = self.class_token.expand(x.size(0), -1, -1)                 # (B, 1, M)
            x = torch.cat([cls, x], dim=1) + self.position_embeddings         # (B, 1 + N_p, M)
            return self.dropout(x)

    def __init__(self, *, dl_studio, patch_size=(8, 8), embedding_size=128,
                 num_basic_encoders=4, num_atten_heads=4, image_size=None, classes=None,
                 in_channels=3, layout="PreLN", num_warmup_steps=0, lr_mul=1.0,
                 optimizer_params=None, dropout=0.0, label_smoothing=0.0,
                 full_width_heads=False, augment=False, save_checkpoints=True,
                 checkpoint_freq=5, max_seq_length=None):
        super().__init__()
        if layout not in ("FG", "PreLN"):
            raise ValueError(f"layout must be 'FG' or 'PreLN', got {layout!r}")
        classes = classes if classes is not None else dl_studio.classes
        if not classes:
            raise ValueError("visTransformer needs the class names: classes=(...) here or in "
                             "DLStudio(classes=...), e.g. SHAPE_CLASSES or CIFAR10_CLASSES")
        self.dl_studio = dl_studio
        self.classes = tuple(classes)
        self.image_size = tuple(image_size or dl_studio.image_size or (32, 32))
        self.patch_size = tuple(patch_size)
        self.in_channels, self.layout = in_channels, layout
        self.norm_first = layout == "PreLN"
        self.embedding_size = embedding_size
        self.num_basic_encoders, self.num_atten_heads = num_basic_encoders, num_atten_heads
        self.num_warmup_steps, self.lr_mul = num_warmup_steps, lr_mul
        self.optimizer_params = dict(optimizer_params or
                                     {"beta1": 0.9, "beta2": 0.98, "epsilon": 1e-9})
        self.dropout, self.label_smoothing = dropout, label_smoothing
        self.full_width_heads, self.augment = full_width_heads, augment
        self.save_checkpoints, self.checkpoint_freq = save_checkpoints, checkpoint_freq
        self.patch_embedding_generator = self.PatchEmbeddingGenerator(
            self, in_channels, self.patch_size, self.image_size, embedding_size)
        self.max_seq_length = 1 + self.patch_embedding_generator.num_patches
        if max_seq_length is not None and max_seq_length != self.max_seq_length:
            raise ValueError(f"max_seq_length {max_seq_length} does not fit: a "
                             f"{self.image_size} image in {self.patch_size} patches is "
                             f"{self.max_seq_length - 1} patches + the class token = "
                             f"{self.max_seq_length}; leave max_seq_length out")
        self.master_encoder = self.MasterEncoder(dl_studio, self, num_basic_encoders,
                                                 num_atten_heads)
        self.classifier = nn.Linear(embedding_size, len(self.classes))       # (B, M) -> (B, K)
        # Pixel statistics of the training images (set by use_datasets), kept with the
        # weights so that a checkpoint normalises new images as in training.
        self.register_buffer("pixel_mean", torch.full((in_channels,), 0.5))
        self.register_buffer("pixel_std", torch.full((in_channels,), 0.25))
        self.training_set = self.test_set = None
        self.dataset_spec = None

    def forward(self, images):
        x = (images - self.pixel_mean[:, None, None]) / self.pixel_std[:, None, None]
        x = self.patch_embedding_generator(x)                               # (B, 1 + N_p, M)
        x = self.master_encoder(x)                                          # (B, 1 + N_p, M)
        return self.classifier(x[:, 0])                                     # (B, K)

    def constructor_args(self):
        """The keyword arguments that rebuild this model (stored in checkpoints)."""
        names = ("patch_size", "embedding_size", "num_basic_encoders", "num_atten_heads",
                 "image_size", "classes", "in_channels", "layout", "num_warmup_steps",
                 "lr_mul", "optimizer_params", "dropout", "label_smoothing",
                 "full_width_heads", "augment", "checkpoint_freq")
        return {name: getattr(self, name) for name in names}

    def make_optimizer(self, params):
        """As the translation model of the same layout: FG's warm-up schedule (plain Adam
        at dl_studio.learning_rate when num_warmup_steps=0), PreLN's plain Adam."""
        variant = TransformerFG if self.layout == "FG" else TransformerPreLN
        return variant.make_optimizer(self, params)

    # -----------------------------------------------------------------------------------
    # Data.
    def use_datasets(self, training_set, test_set, spec=None):
        """Train on ``training_set``, evaluate on ``test_set`` (ImageSets with this model's
        classes, channels and image size); the pixel statistics come from training_set."""
        for part in (training_set, test_set):
            if tuple(part.classes) != self.classes:
                raise ValueError(f"{part.name} has classes {part.classes}, this model "
                                 f"{self.classes}: build the model with classes={part.classes}")
            C, H, W = part.images.shape[1:]
            if (C, H, W) != (self.in_channels, *self.image_size):
                raise ValueError(f"{part.name} has images of {C} x {H} x {W}, this model "
                                 f"expects {self.in_channels} x {self.image_size[0]} x "
                                 f"{self.image_size[1]}: set image_size / in_channels")
        self.training_set, self.test_set, self.dataset_spec = training_set, test_set, spec
        mean, std = training_set.mean_std()
        self.pixel_mean.copy_(mean)
        self.pixel_std.copy_(std.clamp_min(1e-3))

    def load_shapes_dataset(self, num_train=10_000, num_test=2_000, seed=0):
        """Our own shapes (see DLStudio.datasets.images): training and test images drawn
        with different seeds, so the test images are new."""
        from .datasets.images import generate_shapes
        size = self.image_size[0]
        if self.image_size != (size, size):
            raise ValueError(f"the shapes are square; image_size is {self.image_size}")
        spec = {"name": "shapes", "num_train": num_train, "num_test": num_test, "seed": seed}
        self.use_datasets(generate_shapes(num_train, size, seed=2 * seed),
                          generate_shapes(num_test, size, seed=2 * seed + 1), spec)

    def load_cifar_10_dataset(self, download=False):
        """CIFAR-10 from ``dl_studio.dataroot`` (torchvision's layout; downloaded when
        ``download=True``). Raises ImageDataError saying where to put it when missing."""
        from .datasets.images import load_cifar10
        root = self.dl_studio.dataroot
        self.use_datasets(load_cifar10(root, True, download), load_cifar10(root, False, False),
                          {"name": "cifar10", "dataroot": os.path.abspath(root)})

    def load_dataset_of(self, payload_or_spec, download=False):
        """Load the data set a checkpoint was trained on (its ``dataset`` entry)."""
        spec = payload_or_spec.get("dataset", payload_or_spec) or {}
        if spec.get("name") == "shapes":
            self.load_shapes_dataset(spec["num_train"], spec["num_test"], spec["seed"])
        elif spec.get("name") == "cifar10":
            self.dl_studio.dataroot = spec["dataroot"]
            self.load_cifar_10_dataset(download)
        else:
            raise ValueError(f"unknown data set {spec!r}: load one with load_shapes_dataset() "
                             "or load_cifar_10_dataset()")

    # -----------------------------------------------------------------------------------
    # Training, checkpoints, evaluation (the work is done in DLStudio.training/evaluation).
    def run_code_for_training_visTransformer(self, dls=None, model=None,
                                             display_train_loss=False, checkpoint_dir=None,
                                             checkpoints_dir=None, max_minutes=None,
                                             overwrite=False, resume=False,
                                             track_accuracy=False, callback=None):
        """Train on the training images with the trainer of the translation models; write a
        checkpoint every ``checkpoint_freq`` epochs and the final model to
        ``dl_studio.path_saved_model``. (``dls`` and ``model`` are accepted for DLStudio
        scripts, which pass the configuration and the model itself.)

        Returns:
            the ``ImageTrainer`` (its ``train_losses``, ``score_history``).
        """
        from .training import ImageTrainer
        if model is not None and model is not self:
            raise ValueError("visTransformer trains itself: pass the same model, or none")
        folder = checkpoints_dir or checkpoint_dir or "checkpoints_visTrans"
        if self.training_set is None and getattr(self.dl_studio, "image_datasets", None):
            self.use_datasets(*self.dl_studio.image_datasets,       # dls.load_cifar_10_dataset()
                              spec={"name": "cifar10",
                                    "dataroot": os.path.abspath(self.dl_studio.dataroot)})
        trainer = ImageTrainer(self, folder, display_train_loss=display_train_loss,
                               max_minutes=max_minutes, overwrite=overwrite, resume=resume,
                               track_accuracy=track_accuracy)
        trainer.run(callback=callback)
        path = self.dl_studio.path_saved_model
        if isinstance(path, str):
            save_checkpoint(trainer.payload(trainer.last_epoch, trainer.batches_done == 0), path)
        return trainer

    def load_weights(self, payload):
        """Copy a checkpoint's weights in, after checking it was built like this model.
        Raises CheckpointError on a mismatch."""
        if isinstance(payload, str):
            path, payload = payload, load_checkpoint(payload)
        else:
            path = "the checkpoint"
        if payload.get("variant") != self.variant:
            raise CheckpointError(f"{path} holds a {payload.get('variant')} model, not a "
                                  "visTransformer")
        theirs, ours = payload["container_args"], self.constructor_args()
        for name in ("patch_size", "embedding_size", "num_basic_encoders", "num_atten_heads",
                     "image_size", "classes", "in_channels", "layout", "full_width_heads"):
            if _plain(theirs.get(name)) != _plain(ours[name]):
                raise CheckpointError(f"{path} was trained with {name}={theirs.get(name)}, "
                                      f"this model has {name}={ours[name]}")
        self.load_state_dict(payload["model"])
        return payload

    @staticmethod
    def from_checkpoint(path, dl_studio=None):
        """Rebuild a visTransformer with its weights from a checkpoint file alone.
        Returns ``(vit, payload)``; the model is in eval mode on the device."""
        from .DLStudio import DLStudio
        payload = load_checkpoint(path)
        if payload.get("variant") != visTransformer.variant:
            raise CheckpointError(f"{path} holds a {payload.get('variant')} model, not a "
                                  "visTransformer")
        dls = dl_studio or DLStudio(seed=None)
        vit = visTransformer(dl_studio=dls, **payload["container_args"])
        vit.load_weights(payload)
        return vit.to(dls.device).eval(), payload

    def predict(self, images, batch_size=500):
        """Class indices of uint8 (N, C, H, W) images (or floats in [0, 1])."""
        from .evaluation import classify
        return classify(self, images, batch_size)

    def run_code_for_evaluating_visTransformer(self, checkpoint=None, print_fn=print,
                                               confusion_png=None):
        """Accuracy and confusion matrix on the test images (printed; plotted to
        ``confusion_png`` when given), with this model's weights or a checkpoint's.

        Returns:
            {"accuracy": percent, "confusion": (K, K) tensor, rows true, columns predicted}
        """
        from .evaluation import confusion_matrix, format_confusion
        if checkpoint is not None:
            self.load_weights(checkpoint)
        if self.test_set is None:
            raise ValueError("no test images: call load_shapes_dataset() or "
                             "load_cifar_10_dataset() first")
        self.to(self.dl_studio.device)
        predicted = self.predict(self.test_set.images)
        matrix = confusion_matrix(predicted, self.test_set.labels, len(self.classes))
        accuracy = 100.0 * matrix.diag().sum().item() / max(1, len(predicted))
        print_fn(f"held-out accuracy: {accuracy:.2f}% on {len(predicted)} test images "
                 f"({self.test_set.name}; chance {100 / len(self.classes):.1f}%)")
        print_fn(format_confusion(matrix, self.classes))
        if confusion_png:
            from .visualize import plot_confusion_matrix
            plot_confusion_matrix(matrix, self.classes, confusion_png,
                                  f"visTransformer: {accuracy:.1f}% on {self.test_set.name}")
        return {"accuracy": accuracy, "confusion": matrix}

    def attention_maps(self, images):
        """The self-attention weights of every encoder layer for these images.

        Returns: a list (one per layer) of (B, H, 1 + N_p, 1 + N_p) tensors; row 0 is where
        the class token looks.
        """
        layers = [enc.self_attention for enc in self.master_encoder.basic_encoder_arr]
        for layer in layers:
            layer.record_attention = True
        try:
            with torch.no_grad():
                self(images)
            return [layer.attention_weights for layer in layers]
        finally:
            for layer in layers:
                layer.record_attention = False


def _plain(value):
    """Tuples and lists compare alike (a checkpoint keeps lists)."""
    return list(value) if isinstance(value, (tuple, list)) else value
