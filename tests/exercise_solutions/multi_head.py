import torch

from DLStudio.Transformers import TransformerFG


class MyMultiHead(TransformerFG.SelfAttention):
    def forward(self, x, mask=None):
        s = self.qkv_size
        if mask is not None and mask.dim() == 4:
            mask = mask[:, 0]
        outs = []
        for i, head in enumerate(self.heads):
            part = x if self.full_width else x[..., i * s:(i + 1) * s]
            outs.append(head(part, mask=mask))
        return self.W_O(torch.cat(outs, dim=-1))


class MyTransformer(TransformerFG):
    SelfAttention = MyMultiHead
