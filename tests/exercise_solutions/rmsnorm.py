import torch

from DLStudio.Transformers import TransformerPreLN


class MyRMSNorm(TransformerPreLN.RMSNorm):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MyTransformer(TransformerPreLN):
    RMSNorm = MyRMSNorm
