import torch

from DLStudio.Transformers import TransformerPreLN


class MySwiGLU(TransformerPreLN.SwiGLU):
    def forward(self, x):
        gate = self.W1(x)
        return self.W2(gate * torch.sigmoid(gate) * self.V(x))


class MyTransformer(TransformerPreLN):
    SwiGLU = MySwiGLU
