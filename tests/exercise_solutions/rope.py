import torch

from DLStudio.model.architecture import scaled_dot_product
from DLStudio.Transformers import TransformerPreLN


class MyRotary(TransformerPreLN.RotaryEmbedding):
    def forward(self, x, offset=0):
        T, d = x.size(-2), x.size(-1)
        position = torch.arange(offset, offset + T, dtype=torch.float64)[:, None]
        angle = position * self.theta.double()[:d // 2]            # (T, d/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out


class MyHead(TransformerPreLN.AttentionHead):
    def forward(self, x, mask=None, memory=None):
        kv = x if memory is None else memory
        Q, K = self.WQ(x), self.WK(kv)
        if self.rotary is not None:
            Q, K = self.rotary(Q), self.rotary(K)
        out, weights = scaled_dot_product(Q, K, self.WV(kv), mask)
        self.keep_weights(weights)
        return out


class MyTransformer(TransformerPreLN):
    RotaryEmbedding = MyRotary
    AttentionHead = MyHead
