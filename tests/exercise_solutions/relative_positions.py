import torch
import torch.nn as nn

from DLStudio.model.relative_positions import sinusoid_of_offsets
from DLStudio.Transformers import TransformerGPT


class MyRelativePosition(TransformerGPT.RelativePosition):
    def __init__(self, input_size, qkv_size):
        nn.Module.__init__(self)
        self.WR = nn.Linear(input_size, qkv_size, bias=False)
        self.u, self.v = nn.Parameter(torch.zeros(qkv_size)), nn.Parameter(torch.zeros(qkv_size))
        self.register_buffer("R", sinusoid_of_offsets(self.clip, input_size), persistent=False)

    def forward(self, Q, K, scale):
        T_q, T_k = Q.size(-2), K.size(-2)
        i = torch.arange(T_k - T_q, T_k)[:, None]
        j = torch.arange(T_k)[None, :]
        offset = (i - j).clamp(-self.clip, self.clip)
        P = self.WR(self.R.to(Q.dtype))                       # (2 clip + 1, s)
        by_offset = (Q + self.v) @ P.T                        # (..., T_q, 2 clip + 1)
        positional = by_offset[..., torch.arange(T_q)[:, None], offset + self.clip]
        return (positional + (self.u @ K.transpose(-2, -1))[..., None, :]) * scale


class MyTransformer(TransformerGPT):
    RelativePosition = MyRelativePosition
