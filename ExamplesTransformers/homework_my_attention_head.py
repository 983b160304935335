#!/usr/bin/env python3
"""Homework 1: an attention head with a learned temperature, in every attention of the model.

Each head multiplies its scores by exp(log_temperature) before the softmax, so that training
can make a head sharper or flatter. Only AttentionHead is overridden, with DLStudio's
constructor signature: the encoder, the decoder's self-attention and its cross-attention all
build it through the container, the trainer trains it, checkpoints keep it, and the scripts
rebuild it with --model-class. Trains the unmodified TransformerFG beside it and compares.

    python3 homework_my_attention_head.py [--epochs 3]
"""
import math
import sys

import torch
import torch.nn as nn

from DLStudio import TransformerFG
from DLStudio.cli import homework_main


class TransformerFGWithTemperature(TransformerFG):

    class AttentionHead(TransformerFG.AttentionHead):
        """An attention head whose softmax temperature is learned.

        Shape: x (B, T_q, s_qkv), mask broadcastable to (B, T_q, T_k), memory (B, T_k, s_qkv)
            or None (cross-attention gives the encoder's output) -> (B, T_q, s_qkv)
        """

        def __init__(self, dl_studio, max_seq_length, qkv_size, num_atten_heads):
            super().__init__(dl_studio, max_seq_length, qkv_size, num_atten_heads)
            self.log_temperature = nn.Parameter(torch.zeros(()))

        def forward(self, x, mask=None, memory=None):
            kv = x if memory is None else memory
            Q, K, V = self.WQ(x), self.WK(kv), self.WV(kv)                # (B, T, s_qkv)
            scores = Q @ K.transpose(-2, -1) / math.sqrt(self.qkv_size)   # (B, T_q, T_k)
            scores = scores * self.log_temperature.exp()
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)                       # (B, T_q, T_k)
            self.keep_weights(weights)               # so that attention maps show this head
            return weights @ V                                            # (B, T_q, s_qkv)


def report(row):
    """The temperatures training chose, layer by layer (1.00: the standard head)."""
    def temperatures(attention):
        return " ".join(f"{h.log_temperature.exp().item():.2f}" for h in attention.heads)
    print("\nLearned temperatures (one per head; > 1 sharper, < 1 flatter than standard):")
    for i, layer in enumerate(row["encoder"].basic_encoder_arr):
        print(f"  encoder layer {i} self-attention:   {temperatures(layer.self_attention)}")
    for i, layer in enumerate(row["decoder"].basic_decoder_arr):
        print(f"  decoder layer {i} self-attention:   {temperatures(layer.self_attention)}")
        print(f"  decoder layer {i} cross-attention:  {temperatures(layer.cross_attention)}")


if __name__ == "__main__":
    sys.exit(homework_main(TransformerFGWithTemperature, report=report))
