"""Exercise `attention_head`: one attention head, with its own W_Q, W_K, W_V.

Write `MyHead.forward`. The constructor (given) builds self.WQ, self.WK, self.WV, each an
nn.Linear(s_qkv, s_qkv); self.qkv_size is s_qkv.
    x (B, T_q, s_qkv): the head's slice of each word, where the queries come from.
    memory (B, T_k, s_qkv) or None: where the keys and values come from (the encoder's
        output in cross-attention); None: from x itself (self-attention, T_k = T_q).
    mask: None, or bool, broadcastable to (B, T_q, T_k), True where a query may NOT look.
    Returns (B, T_q, s_qkv): softmax(Q K^T / sqrt(s_qkv)) V (Vaswani et al. 2017, eq. 1),
        with Q = W_Q x, K = W_K kv, V = W_V kv.
    Hand the weights (B, T_q, T_k) to self.keep_weights(weights) before returning, so that
        attention maps (show_attention.py) can show your head.
The model's own head and attention function, and F.scaled_dot_product_attention, are
switched off while the checks run. MyTransformer builds your head in every attention (the
encoder's, the decoder's self- and cross-attention).

    dlstudio check attention_head attention_head.py [--train]
    python3 seq2seq_with_transformerFG.py --model-class attention_head:MyTransformer
"""
import math

import torch

from DLStudio.Transformers import TransformerFG


class MyHead(TransformerFG.AttentionHead):
    def forward(self, x, mask=None, memory=None):
        raise NotImplementedError


class MyTransformer(TransformerFG):
    AttentionHead = MyHead
