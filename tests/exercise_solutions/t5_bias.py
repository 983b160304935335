import math

import torch

from DLStudio.model.relative_positions import T5Head
from DLStudio.Transformers import TransformerGPT


class MyT5Bias(TransformerGPT.T5Bias):
    def buckets(self, distance):
        n, bucket = self.num_buckets, torch.zeros_like(distance)
        if self.bidirectional:
            n //= 2
            bucket = bucket + (distance > 0).long() * n
            distance = distance.abs()
        else:
            distance = (-distance).clamp(min=0)
        e = n // 2
        far = e + (torch.log(distance.clamp(min=1).float() / e) / math.log(self.max_distance / e)
                   * (n - e)).long()
        return bucket + torch.where(distance < e, distance, far.clamp(max=n - 1))

    def forward(self, T_q, T_k, device=None):
        i = torch.arange(T_k - T_q, T_k, device=device)[:, None]
        j = torch.arange(T_k, device=device)[None, :]
        return self.table(self.buckets(j - i)).permute(2, 0, 1)[None]

    @classmethod
    def share(cls, stack, layers, bidirectional):
        heads = layers[0].self_attention.heads
        stack.position_bias = cls(len(heads), bidirectional)
        for layer in layers:
            for h, head in enumerate(layer.self_attention.heads):
                head.t5 = T5Head(stack.position_bias, h)


class MyTransformer(TransformerGPT):
    T5Bias = MyT5Bias
