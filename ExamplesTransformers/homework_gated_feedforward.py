#!/usr/bin/env python3
"""Homework 2: a gated feed-forward block (GEGLU) instead of ReLU.

Shazeer 2020 ("GLU Variants Improve Transformer") replaces W2 ReLU(W1 x) by
W2 (GELU(W1 x) * (V x)): one half of the hidden layer gates the other. The hidden width is
2/3 of the standard one, so both blocks have the same number of weights (3 M (4M/3) = 4 M^2).
Only FeedForward is overridden; every encoder and decoder layer builds it through the
container. Trains the unmodified TransformerFG beside it and compares.

    python3 homework_gated_feedforward.py [--epochs 3]
"""
import sys

import torch.nn as nn
import torch.nn.functional as F

from DLStudio import TransformerFG
from DLStudio.cli import homework_main


class TransformerFGWithGEGLU(TransformerFG):

    class FeedForward(nn.Module):
        """W2 (GELU(W1 x) * (V x)), position by position.

        Shape: (B, T, M) -> (B, T, M), hidden width 2/3 of the standard 2 M.
        """

        def __init__(self, dls, xformer):
            super().__init__()
            M = xformer.embedding_size
            hidden = round(2 * M * 2 / 3)
            self.W1 = nn.Linear(M, hidden, bias=False)
            self.V = nn.Linear(M, hidden, bias=False)
            self.W2 = nn.Linear(hidden, M, bias=False)

        def forward(self, x):
            return self.W2(F.gelu(self.W1(x)) * self.V(x))


def report(row):
    def count(block):
        return sum(p.numel() for p in block.parameters())
    gated = row["encoder"].basic_encoder_arr[0].feed_forward
    standard = TransformerFG.FeedForward(None, row["xformer"])
    print(f"\nWeights of one feed-forward block: GEGLU {count(gated):,}, standard "
          f"{count(standard):,} (with its biases)")


if __name__ == "__main__":
    sys.exit(homework_main(TransformerFGWithGEGLU, report=report))
