"""Exercise `positional_encoding`: the sinusoidal position code (Vaswani et al. 2017, sec. 3.5).

    PE[pos, 2i]     = sin(pos / base^(2i / M))
    PE[pos, 2i + 1] = cos(pos / base^(2i / M))        for i = 0 .. M/2 - 1

Write `MyEmbeddings.sinusoids(num_positions, embedding_size, base)`: a float32 tensor of
shape (num_positions, embedding_size) = (T, M), M even; row pos is the code added to the
word at position pos. The paper's base is 10000 (the lecture's code uses 100): use the
argument, whatever it is. The embeddings generator (given) adds your code to every word.
The model's own sinusoids are switched off for your class while the checks run.

    dlstudio check positional_encoding positional_encoding.py [--train]
    python3 seq2seq_with_transformerFG.py --model-class positional_encoding:MyTransformer
"""
import math

import torch

from DLStudio.Transformers import TransformerFG


class MyEmbeddings(TransformerFG.EmbeddingsGenerator):
    @staticmethod
    def sinusoids(num_positions, embedding_size, base):
        raise NotImplementedError


class MyTransformer(TransformerFG):
    EmbeddingsGenerator = MyEmbeddings
