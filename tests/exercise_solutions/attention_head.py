import math

import torch

from DLStudio.Transformers import TransformerFG


class MyHead(TransformerFG.AttentionHead):
    def forward(self, x, mask=None, memory=None):
        kv = x if memory is None else memory
        Q, K, V = self.WQ(x), self.WK(kv), self.WV(kv)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.qkv_size)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        self.keep_weights(weights)
        return weights @ V


class MyTransformer(TransformerFG):
    AttentionHead = MyHead
