"""Homework-style subclasses, one per overridable nested class, written as a student would:
DLStudio 2.5.8's constructor signature, ``super().__init__`` with it, a forward that counts
its calls and adds something of its own (a parameter or a changed computation), so that a
reload that silently used the standard class would both miss the count and change the
translations. Imported by the tests and, through ``--model-class tests.homework_classes:X``,
by the scripts' code path.
"""

from collections import Counter

import torch
import torch.nn as nn

from DLStudio import TransformerFG, TransformerPreLN

CALLS = Counter()          # class name -> calls of the override


class WithEmbeddingsGenerator(TransformerFG):
    class EmbeddingsGenerator(TransformerFG.EmbeddingsGenerator):
        def __init__(self, xformer, lang, embedding_size):
            super().__init__(xformer, lang, embedding_size)
            self.scale = nn.Parameter(torch.tensor(0.9))

        def forward(self, ids):
            CALLS["EmbeddingsGenerator"] += 1
            return super().forward(ids) * self.scale


class WithAttentionHead(TransformerFG):
    class AttentionHead(TransformerFG.AttentionHead):
        def __init__(self, dl_studio, max_seq_length, qkv_size, num_atten_heads):
            super().__init__(dl_studio, max_seq_length, qkv_size, num_atten_heads)
            self.gain = nn.Parameter(torch.tensor(1.1))

        def forward(self, x, mask=None, memory=None):
            CALLS["AttentionHead"] += 1
            return super().forward(x, mask, memory) * self.gain


class WithAttentionHeadPreLN(TransformerPreLN):
    AttentionHead = WithAttentionHead.AttentionHead


class WithCrossAttentionHead(TransformerFG):
    class CrossAttentionHead(TransformerFG.CrossAttentionHead):
        def __init__(self, dl_studio, max_seq_length, qkv_size, num_atten_heads):
            super().__init__(dl_studio, max_seq_length, qkv_size, num_atten_heads)
            self.gain = nn.Parameter(torch.tensor(1.1))

        def forward(self, x, mask=None, memory=None):
            CALLS["CrossAttentionHead"] += 1
            return super().forward(x, mask, memory) * self.gain


class WithSelfAttention(TransformerFG):
    class SelfAttention(TransformerFG.SelfAttention):
        def __init__(self, dls, xformer, num_atten_heads):
            super().__init__(dls, xformer, num_atten_heads)
            self.gain = nn.Parameter(torch.tensor(1.1))

        def forward(self, x, mask=None):
            CALLS["SelfAttention"] += 1
            return super().forward(x, mask) * self.gain


class WithCrossAttention(TransformerFG):
    class CrossAttention(TransformerFG.CrossAttention):
        def __init__(self, dls, xformer, num_atten_heads):
            super().__init__(dls, xformer, num_atten_heads)
            self.gain = nn.Parameter(torch.tensor(1.1))

        def forward(self, x, memory, mask=None):
            CALLS["CrossAttention"] += 1
            return super().forward(x, memory, mask) * self.gain


class WithFeedForward(TransformerFG):
    class FeedForward(TransformerFG.FeedForward):
        def forward(self, x):
            CALLS["FeedForward"] += 1
            return self.W2(nn.functional.gelu(self.W1(x)))


class WithBasicEncoder(TransformerFG):
    class BasicEncoder(TransformerFG.BasicEncoder):
        def __init__(self, dls, xformer, num_atten_heads):
            super().__init__(dls, xformer, num_atten_heads)
            self.gain = nn.Parameter(torch.tensor(1.1))

        def forward(self, x, mask=None):
            CALLS["BasicEncoder"] += 1
            return super().forward(x, mask) * self.gain


class WithMasterEncoder(TransformerFG):
    class MasterEncoder(TransformerFG.MasterEncoder):
        def __init__(self, dls, xformer, num_basic_encoders, num_atten_heads):
            super().__init__(dls, xformer, num_basic_encoders, num_atten_heads)
            self.gain = nn.Parameter(torch.tensor(1.1))

        def forward(self, x, mask=None):
            CALLS["MasterEncoder"] += 1
            return super().forward(x, mask) * self.gain


class WithBasicDecoderWithMasking(TransformerFG):
    class BasicDecoderWithMasking(TransformerFG.BasicDecoderWithMasking):
        def __init__(self, dls, xformer, num_atten_heads, masking=True):
            super().__init__(dls, xformer, num_atten_heads, masking)
            self.gain = nn.Parameter(torch.tensor(1.1))

        def forward(self, x, memory, self_mask=None, cross_mask=None):
            CALLS["BasicDecoderWithMasking"] += 1
            return super().forward(x, memory, self_mask, cross_mask) * self.gain


class WithMasterDecoderWithMasking(TransformerFG):
    class MasterDecoderWithMasking(TransformerFG.MasterDecoderWithMasking):
        def __init__(self, dls, xformer, num_basic_decoders, num_atten_heads, masking=True):
            super().__init__(dls, xformer, num_basic_decoders, num_atten_heads, masking)
            self.bias = nn.Parameter(torch.zeros(xformer.vocab_es_size))

        def forward(self, x, memory, cross_mask=None, keep=None):
            CALLS["MasterDecoderWithMasking"] += 1
            return super().forward(x, memory, cross_mask, keep) + self.bias


class WithScheduledOptim(TransformerFG):
    class ScheduledOptim(TransformerFG.ScheduledOptim):
        def __init__(self, optimizer, lr_mul, d_model, n_warmup_steps):
            super().__init__(optimizer, lr_mul, d_model, n_warmup_steps)

        def lr_at(self, step):          # half the standard schedule's rate, counted
            CALLS["ScheduledOptim"] += 1
            return super().lr_at(step) * 0.5


#: The container of each overridden class (and where the override applies).
CONTAINERS = {
    "EmbeddingsGenerator": WithEmbeddingsGenerator,
    "AttentionHead": WithAttentionHead,
    "AttentionHead (PreLN)": WithAttentionHeadPreLN,
    "CrossAttentionHead": WithCrossAttentionHead,
    "SelfAttention": WithSelfAttention,
    "CrossAttention": WithCrossAttention,
    "FeedForward": WithFeedForward,
    "BasicEncoder": WithBasicEncoder,
    "MasterEncoder": WithMasterEncoder,
    "BasicDecoderWithMasking": WithBasicDecoderWithMasking,
    "MasterDecoderWithMasking": WithMasterDecoderWithMasking,
    "ScheduledOptim": WithScheduledOptim,
}
