import torch

from DLStudio.Transformers import TransformerGPT


class MyAttention(TransformerGPT.SelfAttention):
    @staticmethod
    def windowed(mask, x, offset, window):
        T_q = x.size(1)
        q = torch.arange(offset, offset + T_q, device=x.device)[:, None]
        k = torch.arange(offset + T_q, device=x.device)[None, :]
        far = (k <= q - window)[None, None]
        return far if mask is None else mask | far


class MyTransformer(TransformerGPT):
    SelfAttention = MyAttention
