"""What changed since 2017, as classes the architecture's containers nest and a setting
switches on (architecture.py is the 2017 model; this file is read after it). Each class
stands beside its paper's equation; torch only, built from sizes.

    norm="rmsnorm"          RMSNorm    Zhang and Sennrich 2019       (Llama, Qwen, Gemma)
    feed_forward="swiglu"   SwiGLU     Shazeer 2020                  (Llama, Qwen, Gemma)

A subclass overrides them as it overrides AttentionHead: ``class MyFG(TransformerFG):
class RMSNorm(TransformerFG.RMSNorm): ...`` is used wherever the model normalises.

Shapes: M embedding_size, F the ReLU block's hidden width (2 M, or feed_forward_size).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["RMSNorm", "SwiGLU"]


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang and Sennrich 2019, eq. 4):

        RMSNorm(x) = x / sqrt(mean_i(x_i^2) + eps) * g

    LayerNorm without its centring and its bias: the vector is scaled to a root mean square
    of 1, never shifted. Cheaper, and as good in today's models.
    Args: size (M), eps (inside the root). Shape: (..., M) -> (..., M)
    """

    def __init__(self, size, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))                     # g

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    """A gated feed-forward network (Shazeer 2020, eq. 6):

        FFN_SwiGLU(x) = W2 (SiLU(W1 x) * V x),       SiLU(z) = z sigmoid(z)

    One half of the hidden layer gates the other. Its hidden width is round(2 F / 3), so
    that with three matrices it has the ReLU block's number of weights (biases as in the
    ReLU block; within 1% of its parameters).
    ``activation``: the gate's nonlinearity (GEGLU takes GELU: homework 2).
    Args: dls, xformer (for M and F). Shape: (B, T, M) -> (B, T, M), position by position.
    """

    activation = staticmethod(F.silu)

    def __init__(self, dls, xformer):
        super().__init__()
        M = xformer.embedding_size
        hidden = round(2 * (xformer.feed_forward_size or 2 * M) / 3)
        self.W1 = nn.Linear(M, hidden)
        self.V = nn.Linear(M, hidden)
        self.W2 = nn.Linear(hidden, M)

    def forward(self, x):
        return self.W2(self.activation(self.W1(x)) * self.V(x))
