"""Exercise `swiglu`: the gated feed-forward network of today's models (Shazeer 2020, eq. 6).

    FFN_SwiGLU(x) = W2 (SiLU(W1 x) * V x),        SiLU(z) = z sigmoid(z)

One half of the hidden layer (W1 x, through SiLU) gates the other (V x), element by
element; W2 brings the product back to M. Write MySwiGLU.forward(x):
    x (B, T, M) -> (B, T, M), each position on its own; self.W1, self.V, self.W2 are given
    (nn.Linear, with biases), the hidden width round(2 F / 3).
F.silu is switched off while the checks run: write SiLU with torch.sigmoid. The model's own
SwiGLU.forward is switched off for your class. MyTransformer is a TransformerPreLN that builds
your class in every layer, when it is built with feed_forward="swiglu".

    dlstudio check swiglu swiglu.py [--train]
    python3 seq2seq_with_transformerPreLN.py --model-class swiglu:MyTransformer \
        --feed-forward swiglu
"""
import torch

from DLStudio.Transformers import TransformerPreLN


class MySwiGLU(TransformerPreLN.SwiGLU):
    def forward(self, x):
        raise NotImplementedError


class MyTransformer(TransformerPreLN):
    SwiGLU = MySwiGLU
