"""Exercise `loss`: label-smoothed cross-entropy over the real target positions.

Training feeds the decoder the target sentence without its last token, tgt[:, :-1], and
scores its prediction at position t against the word after the one it read, tgt[:, t + 1].
Write `sequence_loss(logits, tgt, label_smoothing)`:
    logits (B, T_tgt - 1, V): the decoder's scores for each next word (before softmax).
    tgt (B, T_tgt): the full targets: SOS (id 0), the words, EOS (id 1), then EOS padding.
    Returns (loss, N): the loss SUMMED over the N real positions (those whose target is a
        word or the sentence's first EOS; the positions after it are padding and count for
        nothing, smoothing included), and N as an int.
With smoothing eps (Szegedy et al. 2016; Vaswani et al. 2017, sec. 5.4) the target of a
position is (1 - eps) on the right word plus eps / V on every word of the vocabulary:
    loss at a position = -(1 - eps) log p(right word) - (eps / V) sum over all words w of log p(w)
Use log_softmax; F.cross_entropy and F.nll_loss are switched off while the checks run. The
loss must be differentiable (training calls backward on it). The model class below (given)
trains with your loss.

    dlstudio check loss loss.py [--train]
    python3 seq2seq_with_transformerFG.py --model-class loss:MyTransformer --label-smoothing 0.1
"""
import torch

from DLStudio.Transformers import TransformerFG

SOS_INDEX, EOS_INDEX = 0, 1


def sequence_loss(logits, tgt, label_smoothing=0.0):
    raise NotImplementedError


# Given: the translation model with your loss (teacher forcing: the decoder reads tgt[:, :-1]).
class MyModel(TransformerFG.EncoderDecoder):
    def loss(self, src, tgt, label_smoothing=0.0, run=None):
        logits = (self if run is None else run)(src, tgt[:, :-1])     # (B, T_tgt - 1, V_es)
        return sequence_loss(logits, tgt, label_smoothing)


class MyTransformer(TransformerFG):
    EncoderDecoder = MyModel
