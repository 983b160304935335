import torch

from DLStudio.Transformers import TransformerFG

SOS_INDEX, EOS_INDEX = 0, 1


def sequence_loss(logits, tgt, label_smoothing=0.0):
    labels = tgt[:, 1:]
    is_eos = (labels == EOS_INDEX).long()
    real = (is_eos.cumsum(dim=1) - is_eos) == 0
    logp = torch.log_softmax(logits, dim=-1)
    right = logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    uniform = logp.mean(dim=-1)
    per_position = -(1 - label_smoothing) * right - label_smoothing * uniform
    return per_position[real].sum(), int(real.sum())


class MyModel(TransformerFG.EncoderDecoder):
    def loss(self, src, tgt, label_smoothing=0.0, run=None):
        logits = (self if run is None else run)(src, tgt[:, :-1])
        return sequence_loss(logits, tgt, label_smoothing)


class MyTransformer(TransformerFG):
    EncoderDecoder = MyModel
