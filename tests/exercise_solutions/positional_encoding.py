import math

import torch

from DLStudio.Transformers import TransformerFG


class MyEmbeddings(TransformerFG.EmbeddingsGenerator):
    @staticmethod
    def sinusoids(num_positions, embedding_size, base):
        pe = torch.zeros(num_positions, embedding_size)
        for pos in range(num_positions):
            for i in range(embedding_size // 2):
                angle = pos / base ** (2 * i / embedding_size)
                pe[pos, 2 * i] = math.sin(angle)
                pe[pos, 2 * i + 1] = math.cos(angle)
        return pe


class MyTransformer(TransformerFG):
    EmbeddingsGenerator = MyEmbeddings
