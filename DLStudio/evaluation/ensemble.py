"""Several translation models decoding as one (an ensemble).

Models trained apart (another seed) make different mistakes. At each step of greedy or beam
search the ensemble's next word is drawn from the *mean of their probabilities*:

    p(y_t | y_<t, x) = (1/n) sum_i p_i(y_t | y_<t, x)

It returns log p as its "logits" (log_softmax of it is itself), so `greedy_decode` and
`beam_search` run it as they run one model. Each member encodes the English once and keeps
its own key/value caches; an ensemble of n costs n times one model's decoding, and nothing
at training time (the members train separately, at the same time or one after the other).

    >>> ensemble = Ensemble([model_a, model_b])           # EncoderDecoder modules
    >>> evaluate_bleu(ensemble, xformer.vocab, xformer.held_out_corpus, beam_width=4)

The members must read and write the same vocabulary (`same_vocabulary`): the mean is taken
over the ids of one vocabulary.
"""

import math
from contextlib import ExitStack, contextmanager

import torch
from torch import nn

__all__ = ["Ensemble", "same_vocabulary"]


class Ensemble(nn.Module):
    """The mean of ``models``' next-word probabilities, with a translation model's decoding
    interface (encode, decode, decode_newest, decoding).

    The memory it hands back from `encode` is the members' memories side by side, so that
    beam search's repeat and a finished sentence's removal (both along the batch) move them
    together. Shape: memory (B, n, T_src, M); the cross mask is the English padding's,
    the same for every member.
    """

    def __init__(self, models):
        super().__init__()
        models = list(models)
        if len(models) < 2:
            raise ValueError(f"an ensemble needs two models or more, not {len(models)}")
        widths = {m.embeddings_generator_en.embedding.weight.shape[-1] for m in models}
        if len(widths) > 1:
            raise ValueError(f"the models' embedding sizes differ ({sorted(widths)}): an "
                             "ensemble here is of one design trained more than once")
        self.members = nn.ModuleList(models)

    def encode(self, src):
        encoded = [model.encode(src) for model in self.members]   # (B, T_src, M), mask each
        return torch.stack([memory for memory, _ in encoded], dim=1), encoded[0][1]

    def _mean_probabilities(self, logits):
        """log of the mean of softmax(logits_i). Shape: list of (..., V) -> (..., V)"""
        logp = torch.stack([torch.log_softmax(x.float(), dim=-1) for x in logits])
        return torch.logsumexp(logp, dim=0) - math.log(len(logits))

    def decode(self, tgt, memory, cross_mask, keep=None):
        return self._mean_probabilities(
            [model.decode(tgt, memory[:, i], cross_mask, keep)
             for i, model in enumerate(self.members)])

    def decode_newest(self, ys, memory, cross_mask):
        return self._mean_probabilities(
            [model.decode_newest(ys, memory[:, i], cross_mask)
             for i, model in enumerate(self.members)])

    @contextmanager
    def decoding(self):
        """Every member's caches at once (empty where a member would not read them: then
        the ensemble runs each step on the whole prefix, as `decode_and_score` does)."""
        with ExitStack() as stack:
            caches = [stack.enter_context(model.decoding()) for model in self.members]
            if any(caches) and not all(caches):
                raise ValueError("of these models some read key/value caches and some do "
                                 "not: an ensemble decodes them one way")
            yield [cache for member in caches for cache in member]


def same_vocabulary(vocabularies):
    """Raise ValueError unless every Vocabulary (one per member) is the same: the same
    pieces for both languages (their fingerprints) and the same sequence length."""
    first = vocabularies[0]
    for i, vocab in enumerate(vocabularies[1:], start=2):
        if vocab.fingerprint != first.fingerprint:
            raise ValueError(f"model {i} was trained with another vocabulary than model 1: an "
                             "ensemble averages probabilities of the same pieces, so its "
                             "models must come from one archive and one --tokenizer/"
                             "--vocab-size")
        if vocab.max_seq_length != first.max_seq_length:
            raise ValueError(f"model {i} translates up to {vocab.max_seq_length} pieces, "
                             f"model 1 up to {first.max_seq_length}: train them with one "
                             "--max-seq-length")
