"""Exercise `qk_norm`: QK-norm, the attention of Qwen3 and Gemma 3 (since 2023).

A score is q . k / sqrt(d); nothing bounds the sizes of q and k, and in large models some
heads' scores grow until their softmax is one-hot. QK-norm RMS-normalises each head's
queries and keys, each with a learned gain of its own. Write MyHead.forward:

MyHead.forward(x, mask=None, memory=None):  the attention head, with
    Q = self.q_norm(WQ(x)) and K = self.k_norm(WK(kv)) (kv: memory in cross-attention, else
    x), normalised BEFORE the rotary turn (self.rotary, None in cross-attention); the
    values are not normalised. self.q_norm and self.k_norm are the attention's RMSNorms over
    a head's d numbers (one of each per layer, shared by its heads); in a model built
    without qk_norm they are None: then normalise nothing.
    (scaled_dot_product(Q, K, V, mask) returns (output, weights); hand the weights to
    self.keep_weights.)

The model's AttentionHead.forward is switched off for your class while the checks run.
MyTransformer is a TransformerGPT that builds your head; built with qk_norm=True (or read
from a Qwen3 folder) its heads get the norms.

    dlstudio check qk_norm qk_norm.py [--inside QWEN3_FOLDER]
    python3 train_gpt.py --model-class qk_norm:MyTransformer --qk-norm --positions rope \
        --full-width-heads
"""
import torch

from DLStudio.model.architecture import scaled_dot_product
from DLStudio.Transformers import TransformerGPT


class MyHead(TransformerGPT.AttentionHead):
    def forward(self, x, mask=None, memory=None):
        raise NotImplementedError


class MyTransformer(TransformerGPT):
    AttentionHead = MyHead
