"""Exercise `attention`: scaled dot-product attention with a mask.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(s_qkv)) V          (Vaswani et al. 2017, eq. 1)

Write `scaled_dot_product`.
    Q (..., T_q, s_qkv); K and V (..., T_k, s_qkv); the leading dimensions may be (B,) or
    (B, H). mask: None, or a bool tensor broadcastable to (..., T_q, T_k), True where a query
    may NOT look. Returns (output (..., T_q, s_qkv), weights (..., T_q, T_k)): each row of
    the weights sums to 1 and is exactly 0 where the mask is True.
You may assume every row has at least one position the mask allows. Write it with torch's
tensor operations (@, softmax, masked_fill, ...): F.scaled_dot_product_attention and the
model's own function are switched off while the checks run.

    dlstudio check attention attention.py              the checks
    dlstudio check attention attention.py --train      train it beside the reference
    python3 seq2seq_with_transformerFG.py --model-class attention:MyTransformer
"""
import math

import torch

from DLStudio.Transformers import TransformerFG


def scaled_dot_product(Q, K, V, mask=None):
    raise NotImplementedError


# Given: an attention head that uses your function, in every attention of a TransformerFG.
class MyHead(TransformerFG.AttentionHead):
    def forward(self, x, mask=None, memory=None):
        kv = x if memory is None else memory
        out, weights = scaled_dot_product(self.WQ(x), self.WK(kv), self.WV(kv), mask)
        self.keep_weights(weights)
        return out


class MyTransformer(TransformerFG):
    AttentionHead = MyHead
