#!/usr/bin/env python3
"""Homework 3: concatenate the position code to the word vector instead of adding it.

Why does the Transformer add its position code to the word embedding (Vaswani et al. 2017,
sec. 3.5) rather than give it dimensions of its own? Here each word gets M - P numbers and
its position the other P (a sinusoidal code of width P = M/4), side by side: words and
positions can no longer interfere, but words have fewer dimensions. Only
EmbeddingsGenerator is overridden (both languages build it through the container); position
t still depends on words 0..t only, so decoding with the key/value cache works unchanged.

    python3 homework_concat_positions.py [--epochs 3]
"""
import math
import sys

import torch
import torch.nn as nn

from DLStudio import TransformerFG
from DLStudio.cli import homework_main


class TransformerFGConcatPositions(TransformerFG):

    class EmbeddingsGenerator(TransformerFG.EmbeddingsGenerator):
        """[word vector (M - P) | sinusoidal position code (P)], P = M / 4.

        Shape: ids (B, T) -> (B, T, M)
        """

        def __init__(self, xformer, lang, embedding_size):
            super().__init__(xformer, lang, embedding_size)
            P = embedding_size // 4
            vocab_size = self.embedding.num_embeddings
            self.embedding = nn.Embedding(vocab_size, embedding_size - P)
            nn.init.normal_(self.embedding.weight, std=embedding_size ** -0.5)
            self.register_buffer("position_code", self.sinusoids(
                xformer.max_seq_length, P, self.positional_base), persistent=False)

        def forward(self, ids):
            B, T = ids.shape
            words = self.embedding(ids) * math.sqrt(self.embedding_size)   # (B, T, M - P)
            positions = self.position_code[:T].expand(B, T, -1)             # (B, T, P)
            return self.dropout(torch.cat([words, positions], dim=-1))      # (B, T, M)


def report(row):
    emb = row["xformer"].embeddings_generator_en
    print(f"\nEach English word has {emb.embedding.embedding_dim} numbers of its own and "
          f"{emb.position_code.size(1)} of position (standard: all {emb.embedding_size}, "
          "shared by word and position).")


if __name__ == "__main__":
    sys.exit(homework_main(TransformerFGConcatPositions, report=report))
