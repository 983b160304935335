import math

import torch

from DLStudio.Transformers import TransformerFG


def scaled_dot_product(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights

class MyHead(TransformerFG.AttentionHead):
    def forward(self, x, mask=None, memory=None):
        kv = x if memory is None else memory
        out, weights = scaled_dot_product(self.WQ(x), self.WK(kv), self.WV(kv), mask)
        self.keep_weights(weights)
        return out

class MyTransformer(TransformerFG):
    AttentionHead = MyHead
