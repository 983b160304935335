"""BERT (Devlin et al. 2019): an encoder-only model, the translation model's encoder read in
both directions (no causal mask), pre-trained by filling in masked tokens and fine-tuned to
classify a sentence, or a pair, from the vector of its first token, [CLS]. Torch only, built
from sizes; the classes are those of architecture.py (the file to read first), so a
student's ``AttentionHead`` or ``SelfAttention`` reaches this model as it reaches the others.

    [CLS] the dog [MASK] the ball [SEP] [PAD]            token ids (B, T), segment ids (B, T)
      │
      ├─> EmbeddingsGenerator(ids) + segment embedding ─> LayerNorm              (B, T, M)
      ├─> MasterEncoder: N x BasicEncoder (post-LN, GELU feed-forward, F = 4 M)  (B, T, M)
      ├─> MaskedLanguageHead at the masked positions: dense, GELU, LayerNorm, then
      │   the word embeddings' own matrix (tied) ─> logits over the vocabulary    (N, V)
      └─> Pooler at [CLS]: tanh(W h_0) ─> classifier                              (B, K)

BERT's differences from the 2017 encoder are settings of the same classes (TransformerParts):
``feed_forward="gelu"``, ``feed_forward_size`` (4 M), ``positions="learned"``,
``scale_embeddings=False`` (word vectors not scaled by sqrt(M)), ``norm_eps`` (1e-12), and
these of BERTParts: ``embedding_norm`` (LayerNorm after the embeddings), ``mlm_transform``
(the head's dense + GELU + LayerNorm), ``pooler``, ``next_sentence`` (the pair task's head).
The segment embedding is added after ``EmbeddingsGenerator.forward(ids)``, whose contract
(ids in, vectors out) a student's override keeps. Special tokens are ids the tokenizer
gives (``pad_id``); nothing here assumes SOS = 0, EOS = 1.

Shapes: B batch, T tokens ([CLS] and [SEP] included), M embedding_size, V vocabulary, K
classes, N masked positions of the batch.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .architecture import TransformerParts
from .hooks import Hooked
from .overrides import check_forwards
from .recorder import record_attention

__all__ = ["BERTParts", "HEADS"]

#: What ``forward`` computes: the masked tokens' logits, the classifier's, the pair task's
#: (and "mlm+next": the first and the last of one pass).
HEADS = ("mlm", "classifier", "next")


class BERTParts(Hooked, TransformerParts, nn.Module):
    """An encoder-only model with a masked-language head and a classifier on [CLS].

    Args (keyword-only): vocab_size (V), pad_id (the tokenizer's [PAD]), num_basic_encoders
        (N), num_atten_heads (H), num_classes (K; 0: no classifier), num_segments (2: a
        sentence, or a pair), embedding_norm, mlm_transform, pooler, next_sentence (see the
        module docstring), and the sizes and switches of `TransformerParts`.
    Shape: ids (B, T), segments (B, T) or None (all 0) -> see ``forward``
    """

    norm_first = False     # BERT's layers are post-LN, as the 2017 encoder's

    class MaskedLanguageHead(nn.Module):
        """Logits over the vocabulary at the masked positions: a dense layer, GELU and
        LayerNorm (``mlm_transform``), then the word embeddings' matrix (tied, Press and
        Wolf 2017) with a bias of its own. Shape: (N, M) -> (N, V)"""

        def __init__(self, bert, embedding):
            super().__init__()
            M = bert.embedding_size
            self.transform = (nn.Sequential(nn.Linear(M, M), nn.GELU(), bert.norm_layer(M))
                              if bert.mlm_transform else nn.Identity())
            self.decoder = nn.Linear(M, embedding.num_embeddings, bias=False)
            self.decoder.weight = embedding.weight            # one matrix: words in and out
            self.bias = nn.Parameter(torch.zeros(embedding.num_embeddings))

        def forward(self, h):
            return self.decoder(self.transform(h)) + self.bias              # (N, V)

    class Pooler(nn.Module):
        """The sentence's vector: tanh(W h_[CLS] + b), or h_[CLS] itself without ``pooler``.
        Shape: (B, M) -> (B, M)"""

        def __init__(self, bert):
            super().__init__()
            M = bert.embedding_size
            self.dense = nn.Sequential(nn.Linear(M, M), nn.Tanh()) if bert.pooler else \
                nn.Identity()

        def forward(self, h_cls):
            return self.dense(h_cls)

    def __init__(self, *, vocab_size, pad_id, num_basic_encoders=4, num_atten_heads=4,
                 num_classes=0, num_segments=2, embedding_norm=True, mlm_transform=True,
                 pooler=True, next_sentence=False, lang="text", **sizes):
        nn.Module.__init__(self)
        self.lang, self.pad_id = lang, pad_id
        TransformerParts.__init__(self, vocab_sizes={lang: vocab_size}, **sizes)
        self.num_basic_encoders, self.num_atten_heads = num_basic_encoders, num_atten_heads
        self.embedding_norm, self.mlm_transform, self.pooler = embedding_norm, mlm_transform, pooler
        check_forwards(self, ["EmbeddingsGenerator", "AttentionHead", "SelfAttention",
                              "FeedForward", "BasicEncoder", "MasterEncoder"])
        M = self.embedding_size
        self.embeddings_generator = self.EmbeddingsGenerator(self, lang, M)
        self.segment_embeddings = nn.Embedding(num_segments, M)
        nn.init.normal_(self.segment_embeddings.weight, std=0.02)
        self.embedding_layer_norm = self.norm_layer(M) if embedding_norm else nn.Identity()
        self.master_encoder = self.MasterEncoder(None, self, num_basic_encoders,
                                                 num_atten_heads)
        self.mlm_head = self.MaskedLanguageHead(self, self.embeddings_generator.embedding)
        self.pooler_layer = self.Pooler(self)
        self.classifier = nn.Linear(M, num_classes) if num_classes else None     # (B, K)
        self.next_sentence = nn.Linear(M, 2) if next_sentence else None          # (B, 2)

    def num_tokens(self, lang=None):
        return self.vocab_sizes[self.lang]         # one vocabulary, whatever a part asks for

    def encode(self, ids, segments=None, pad=None):
        """Every token's vector, each reading the whole sentence (padding aside). ``pad``:
        where the padding is (default: where ``ids`` is [PAD]; pre-training gives the
        uncorrupted row's, so that no corruption hides a real position).
        Shape: ids (B, T), segments (B, T) or None, pad (B, T) bool or None -> (B, T, M)"""
        if segments is None:
            segments = torch.zeros_like(ids)
        x = self.embeddings_generator(ids) + self.segment_embeddings(segments)  # (B, T, M)
        x = self.embedding_layer_norm(x)
        pad = (ids == self.pad_id) if pad is None else pad
        return self.master_encoder(x, pad[:, None, None, :])   # keys only: (B, T, M)

    def forward(self, ids, segments=None, keep=None, head="mlm", pad=None):
        """``head`` "mlm": logits over the vocabulary (B, T, V), or (N, V) at the positions
        where ``keep`` (B, T) is True; "classifier": (B, K); "next": (B, 2), whether the
        second sentence of a pair followed the first; "mlm+next": both of one pass.
        ``pad``: see `encode`."""
        if any(h not in self.heads() for h in head.split("+")):
            raise ValueError(f"this model has no {head!r} head (it has "
                             f"{', '.join(self.heads())})")
        h = self.encode(ids, segments, pad)                                  # (B, T, M)
        mlm = self.mlm_head(h if keep is None else h[keep]) if "mlm" in head else None
        if head == "mlm":
            return mlm                                                      # (N, V)
        layer = self.classifier if head == "classifier" else self.next_sentence
        pooled = layer(self.pooler_layer(h[:, 0]))                          # (B, K)
        return pooled if mlm is None else (mlm, pooled)

    def heads(self):
        """The names of the heads this model has (of HEADS)."""
        return [name for name, layer in zip(HEADS, (self.mlm_head, self.classifier,
                                                    self.next_sentence)) if layer is not None]

    def mlm_loss(self, ids, segments, selected, targets, label_smoothing=0.0, run=None):
        """Cross-entropy at the selected positions only (Devlin et al. 2019, 3.1): the sum
        and their number; the padding is the uncorrupted row's (``targets``).
        Shape: ids, segments, selected (bool), targets: (B, T)"""
        logits = (self if run is None else run)(ids, segments, selected,
                                                pad=targets == self.pad_id)  # (N, V)
        return F.cross_entropy(logits, targets[selected], reduction="sum",
                               label_smoothing=label_smoothing), len(logits)

    def classifier_loss(self, ids, segments, labels, label_smoothing=0.0, run=None):
        """Cross-entropy of the classifier on [CLS]: sum, B."""
        logits = (self if run is None else run)(ids, segments, None, "classifier")  # (B, K)
        return F.cross_entropy(logits, labels, reduction="sum",
                               label_smoothing=label_smoothing), len(labels)

    def pair_task_loss(self, ids, segments, selected, targets, is_next, label_smoothing=0.0,
                       run=None):
        """With the next-sentence task: the masked tokens' loss and the pair head's, from one
        pass; the pair loss of a row weighs as much as a masked token's on average. Returns
        the sum and the number of masked tokens."""
        mlm, pair = (self if run is None else run)(ids, segments, selected, "mlm+next",
                                                   pad=targets == self.pad_id)
        n = len(mlm)
        total = F.cross_entropy(mlm, targets[selected], reduction="sum",
                                label_smoothing=label_smoothing)
        return total + F.cross_entropy(pair, is_next, reduction="sum") * n / len(is_next), n

    def unused_parameters(self, task):
        """The parameters a task never reads ("mlm", "classifier"): frozen while it trains
        (DistributedDataParallel waits for a gradient of every trained one)."""
        used = {"mlm": [self.mlm_head], "classifier": [self.pooler_layer, self.classifier]}[task]
        if task == "mlm" and self.next_sentence is not None:
            used += [self.pooler_layer, self.next_sentence]
        heads = [self.mlm_head, self.pooler_layer, self.classifier, self.next_sentence]
        keep = {id(p) for m in [self.embeddings_generator, self.master_encoder, *used]
                if m is not None for p in m.parameters()}
        return [p for m in heads if m is not None for p in m.parameters() if id(p) not in keep]

    def attention_maps(self, ids, segments=None):
        """Every layer's self-attention weights: a list of (B, H, T, T), rows summing to 1,
        each token looking both ways (padding gets 0)."""
        layers = [enc.self_attention for enc in self.master_encoder.basic_encoder_arr]
        with torch.no_grad():
            return record_attention(layers, lambda: self.encode(ids, segments))
