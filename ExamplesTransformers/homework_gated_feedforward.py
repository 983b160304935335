#!/usr/bin/env python3
"""Homework 2: a gated feed-forward block (GEGLU) instead of ReLU.

Shazeer 2020 ("GLU Variants Improve Transformer") replaces W2 ReLU(W1 x) by
W2 (GELU(W1 x) * (V x)): one half of the hidden layer gates the other. The hidden width is
2/3 of the standard one, so both blocks have the same number of weights (3 M (4M/3) = 4 M^2).
The package has the SiLU-gated one, SwiGLU (DLStudio/model/since_2017.py, switched on by
--feed-forward swiglu); GEGLU is that class with GELU for its gate. Only FeedForward is
overridden; every encoder and decoder layer builds it through the container. Trains the
unmodified TransformerFG beside it and compares.

    python3 homework_gated_feedforward.py [--epochs 3]
"""
import sys

import torch.nn.functional as F

from DLStudio import TransformerFG
from DLStudio.cli import homework_main


class TransformerFGWithGEGLU(TransformerFG):

    class FeedForward(TransformerFG.SwiGLU):
        """W2 (GELU(W1 x) * (V x)), position by position: SwiGLU's W1, V, W2 and forward,
        with GELU for SiLU. Shape: (B, T, M) -> (B, T, M), hidden width 2/3 of 2 M."""

        activation = staticmethod(F.gelu)


def report(row):
    def count(block):
        return sum(p.numel() for p in block.parameters())
    gated = row["encoder"].basic_encoder_arr[0].feed_forward
    standard = TransformerFG.FeedForward(None, row["xformer"])
    print(f"\nWeights of one feed-forward block: GEGLU {count(gated):,}, standard "
          f"{count(standard):,} (with its biases)")


if __name__ == "__main__":
    sys.exit(homework_main(TransformerFGWithGEGLU, report=report))
