"""Exercise `t5_bias`: T5's relative position bias (Raffel et al. 2020, sec. 2.1): one
learned number per head and bucket of offsets, added to the score of query i and key j,

    a_ij = q_i . k_j  +  b_h(bucket(j - i))

one table for all the layers of a stack. Write MyT5Bias (its __init__ is the model's:
self.table = nn.Embedding(self.num_buckets, num_heads), self.bidirectional):

buckets(self, distance):  distance (...) long, j - i (the key's position minus the query's)
    -> (...) long, its bucket, with n = self.num_buckets and m = self.max_distance:
    - bidirectional (an encoder: keys on both sides): n // 2 buckets a side; a key after
      the query (distance > 0) adds n // 2, and the distance becomes |distance|;
    - not (a causal decoder): every bucket for keys before; the distance becomes -distance,
      0 for a key after;
    then, with n the buckets of the side and e = n // 2: a distance d < e is its own bucket;
    a larger one is e + floor(log(d / e) / log(m / e) * (n - e)), at most n - 1.
forward(self, T_q, T_k, device=None) -> (1, H, T_q, T_k): self.table's numbers of each
    query's and key's bucket, heads in dimension 1. The queries are the LAST T_q of the T_k
    positions: query row a sits at position T_k - T_q + a (the key/value cache's words come
    first), key column j at j.
share(cls, stack, layers, bidirectional)  (a classmethod): ONE MyT5Bias for the whole
    stack, as stack.position_bias (a module of the stack: its one table is trained and
    saved once), and each head h of each layer's self-attention reading its column:
    head.t5 = T5Head(stack.position_bias, h).

The model's T5Bias.buckets, forward and share and t5_buckets are switched off while the
checks run. MyTransformer is a TransformerGPT built with positions="t5" of your class.

    dlstudio check t5_bias t5_bias.py [--train]
    python3 train_gpt.py --model-class t5_bias:MyTransformer --positions t5
"""
import math

import torch

from DLStudio.model.relative_positions import T5Head
from DLStudio.Transformers import TransformerGPT


class MyT5Bias(TransformerGPT.T5Bias):
    def buckets(self, distance):
        raise NotImplementedError

    def forward(self, T_q, T_k, device=None):
        raise NotImplementedError

    @classmethod
    def share(cls, stack, layers, bidirectional):
        raise NotImplementedError


class MyTransformer(TransformerGPT):
    T5Bias = MyT5Bias
