"""Exercise `grouped_query`: grouped-query attention (Ainslie et al. 2023), as in Llama 3.

H query heads share G key/value heads (G divides H): the key/value cache of decoding holds G
heads instead of H. The query heads fall into G groups of neighbours, H / G = self.group
each: query head h reads key/value head h // self.group (G = 1: multi-query attention).
Write MyGroupedAttention.weighted(Q, K, V, mask):
    Q (B, H, T_q, s), K and V (B, G, T_k, s), mask broadcastable to (B, H, T_q, T_k), True
    where a query may not look (or None)
    -> (output (B, H, T_q, s), weights (B, H, T_q, T_k)): softmax(Q K^T / sqrt(s)) V per head
(scaled_dot_product(Q, K, V, mask) does the last part for K and V of H heads; you may also
view Q as (B, G, H / G, T_q, s) and never copy K and V.)
The model's SelfAttention.weighted and repeat_kv are switched off for your class while the
checks run. MyTransformer is a TransformerPreLN whose self- and cross-attention use it.

    dlstudio check grouped_query grouped_query.py [--train]
    python3 seq2seq_with_transformerPreLN.py --model-class grouped_query:MyTransformer \
        --kv-heads 2 --full-width-heads
"""
import torch

from DLStudio.model.architecture import scaled_dot_product
from DLStudio.Transformers import TransformerPreLN


class MyGroupedAttention:
    def weighted(self, Q, K, V, mask):
        raise NotImplementedError


class MySelfAttention(MyGroupedAttention, TransformerPreLN.SelfAttention):
    pass


class MyCrossAttention(MyGroupedAttention, TransformerPreLN.CrossAttention):
    pass


class MyTransformer(TransformerPreLN):
    SelfAttention = MySelfAttention
    CrossAttention = MyCrossAttention
