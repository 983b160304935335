"""Exercise `multi_head`: multi-head self-attention: split, run the heads, concatenate, W^O.

Write `MyMultiHead.forward`. The constructor (given) builds:
    self.heads: H heads (an nn.ModuleList); head i is called as self.heads[i](x_i, mask=m)
        and returns (B, T, s_qkv).
    self.num_atten_heads (H), self.qkv_size (s_qkv = M // H), self.full_width (bool), and
    self.W_O: nn.Identity() for the lecture's sliced heads, nn.Linear(M, M) for full width.
forward(x, mask):
    x (B, T, M). Sliced heads (full_width False, the lecture's design): head i reads slice i
        of every word, x[..., i s_qkv:(i + 1) s_qkv]. Full width (Vaswani et al. 2017,
        sec. 3.2.2): every head reads all of x (its W_Q, W_K, W_V are M x s_qkv).
    mask: None, or bool broadcastable to (B, H, T, T), True where a query may NOT look; one
        of 4 dimensions is the same for every head: give each head mask[:, 0].
    Returns (B, T, M): the H outputs concatenated in head order (head 0 first), then W^O.
The standard SelfAttention's forward and its batched product are switched off for your class
while the checks run. MyTransformer uses your class in the encoder's and the decoder's
self-attention.

    dlstudio check multi_head multi_head.py [--train]
    python3 seq2seq_with_transformerFG.py --model-class multi_head:MyTransformer
"""
import torch

from DLStudio.Transformers import TransformerFG


class MyMultiHead(TransformerFG.SelfAttention):
    def forward(self, x, mask=None):
        raise NotImplementedError


class MyTransformer(TransformerFG):
    SelfAttention = MyMultiHead
