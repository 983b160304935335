"""Exercise `relative_positions`: relative positions in the attention score, derived as the
lecture derives them (Transformer-XL, Dai et al. 2019; clipped offsets, Shaw et al. 2018).

No position code is added to the words. Instead each head adds to the score of query i and
key j three terms of the offset i - j:

    a_ij = q_i . k_j  +  q_i . W_R R(i-j)  +  u . k_j  +  v . W_R R(i-j)

R(r) is the 2017 sinusoid of the number r; W_R is the head's own key matrix for offsets;
u and v are two vectors the head learns (each head its own). An offset further than
self.clip reads R(clip) (R(-clip) on the other side). Write MyRelativePosition:

__init__(self, input_size, qkv_size):  one head's parameters, with these names:
    self.WR  nn.Linear(input_size, qkv_size, bias=False)
    self.u, self.v  nn.Parameter of qkv_size numbers each, starting at zero
    self.R   the sinusoids of the offsets -clip .. clip, a buffer (2 clip + 1, input_size):
             sinusoid_of_offsets(self.clip, input_size), registered with
             self.register_buffer("R", ..., persistent=False)

forward(self, Q, K, scale):  Q (..., T_q, s), K (..., T_k, s) -> (..., T_q, T_k), the
    three terms beyond q_i . k_j, times scale (the scores' factor, 1 / sqrt(s)). The queries
    are the LAST T_q of the T_k positions: query row a sits at position T_k - T_q + a (while
    decoding with the key/value cache the keys include the words before), key column j at j.

The model's RelativePosition.forward and relative_scores are switched off while the checks
run. MyTransformer is a TransformerGPT that builds your class in every head of self-attention
(built with positions="relative").

    dlstudio check relative_positions relative_positions.py [--train]
    python3 train_gpt.py --model-class relative_positions:MyTransformer --positions relative
"""
import torch
import torch.nn as nn

from DLStudio.model.relative_positions import sinusoid_of_offsets
from DLStudio.Transformers import TransformerGPT


class MyRelativePosition(TransformerGPT.RelativePosition):
    def __init__(self, input_size, qkv_size):
        nn.Module.__init__(self)
        raise NotImplementedError

    def forward(self, Q, K, scale):
        raise NotImplementedError


class MyTransformer(TransformerGPT):
    RelativePosition = MyRelativePosition
