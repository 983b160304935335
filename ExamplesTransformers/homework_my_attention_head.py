#!/usr/bin/env python3
"""Homework pattern: change one class of the architecture by subclassing the container.

Here each attention head gets a learnable temperature: its scores are multiplied by
exp(log_temperature) before the softmax, so that training can make a head sharper or
flatter. Nothing else is edited: MasterEncoder, BasicEncoder, SelfAttention, the decoder,
the trainer and the checkpoints all pick up the new head because they build their parts
through the container (``xformer.AttentionHead(...)``).

    python3 homework_my_attention_head.py [--epochs 3]
"""
import argparse
import math
import sys

import torch
import torch.nn as nn

from DLStudio import DLStudio, TransformerFG
from DLStudio.datasets import BUNDLED_ARCHIVE


class TransformerFGWithTemperature(TransformerFG):

    class AttentionHead(TransformerFG.AttentionHead):
        """An attention head whose softmax temperature is learned."""

        def __init__(self, dl_studio, max_seq_length, qkv_size, num_atten_heads):
            super().__init__(dl_studio, max_seq_length, qkv_size, num_atten_heads)
            self.log_temperature = nn.Parameter(torch.zeros(()))

        def forward(self, x, mask=None):
            Q, K, V = self.WQ(x), self.WK(x), self.WV(x)                  # (B, T, s_qkv)
            scores = Q @ K.transpose(-2, -1) / math.sqrt(self.qkv_size)   # (B, T, T)
            scores = scores * self.log_temperature.exp()
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            return torch.softmax(scores, dim=-1) @ V                      # (B, T, s_qkv)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    dls = DLStudio(use_gpu=True, batch_size=64, epochs=args.epochs, seed=0,
                   path_saved_model="homework_run/saved_model.pt")
    xformer = TransformerFGWithTemperature(dl_studio=dls, data_archive=BUNDLED_ARCHIVE,
                                           embedding_size=128, num_warmup_steps=400)
    encoder = xformer.MasterEncoder(dls, xformer, num_basic_encoders=2, num_atten_heads=4)
    decoder = xformer.MasterDecoderWithMasking(dls, xformer, num_basic_decoders=2,
                                               num_atten_heads=4)
    xformer.run_code_for_training(dls, encoder, decoder, checkpoints_dir="homework_run",
                                  overwrite=True)
    xformer.run_code_for_evaluating(encoder, decoder, show=5)
    print("learned temperatures of the encoder's self-attention heads, layer by layer:")
    for i, layer in enumerate(encoder.basic_encoder_arr):
        temps = [f"{h.log_temperature.exp().item():.2f}" for h in layer.self_attention.heads]
        print(f"  layer {i}: {' '.join(temps)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
