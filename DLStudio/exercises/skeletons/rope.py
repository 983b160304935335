"""Exercise `rope`: rotary position embeddings (Su et al. 2021), the positions of Llama.

No position code is added to the words. Instead self-attention turns each query and key by
its position, so that a score q . k depends on the two words and on how far apart they are.
Write two methods:

MyRotary.forward(x, offset=0):  x (..., T, d) -> (..., T, d), d = a head's width (even)
    The row m of x is the word at position p = offset + m (offset: the words already in the
    key/value cache while decoding; 0 otherwise). Its pair i, the numbers 2i and 2i+1, is
    turned by the angle p * theta_i:
        x'_2i   = x_2i cos(p theta_i) - x_2i+1 sin(p theta_i)
        x'_2i+1 = x_2i sin(p theta_i) + x_2i+1 cos(p theta_i)
    theta_i is self.theta[i], the module's own frequencies (d/2 of them, float32): the
    paper's base^(-2i/d) for self.base, changed where the model reads a longer context than
    it was trained on (a Llama 3 folder's rope_scaling). (self.size is d; every leading
    axis, e.g. (B, H), alike.)

MyHead.forward(x, mask=None, memory=None):  the attention head, with its queries and keys
    turned by self.rotary (a RotaryEmbedding, set by self-attention) before the scores; the
    values are not turned. In cross-attention self.rotary is None: then turn nothing.
    (scaled_dot_product(Q, K, V, mask) returns (output, weights).)

The model's RotaryEmbedding.forward and AttentionHead.forward are switched off for your
classes while the checks run. MyTransformer is a TransformerPreLN that builds both.

    dlstudio check rope rope.py [--train]
    python3 seq2seq_with_transformerPreLN.py --model-class rope:MyTransformer --positions rope
"""
import torch

from DLStudio.model.architecture import scaled_dot_product
from DLStudio.Transformers import TransformerPreLN


class MyRotary(TransformerPreLN.RotaryEmbedding):
    def forward(self, x, offset=0):
        raise NotImplementedError


class MyHead(TransformerPreLN.AttentionHead):
    def forward(self, x, mask=None, memory=None):
        raise NotImplementedError


class MyTransformer(TransformerPreLN):
    RotaryEmbedding = MyRotary
    AttentionHead = MyHead
