"""What a real translation model's folder says about generating: its generation_config.json
(and config.json) read into `GenerationRules`, which greedy decoding and beam search
(decode_and_score.py) apply to each step's scores, as transformers' ``generate`` applies its
logits processors, in its order:

    no_repeat_ngram_size   a token that would repeat an n-gram of the hypothesis: -inf
    bad_words_ids          a token that would complete one of these sequences: -inf
                           (Marian's folders list <pad>, which the decoder starts from)
    min_length             </s> before the hypothesis (its start token counted) is this long
    forced_bos_token_id    the first token (mBART's target language), with score 0
    forced_eos_token_id    </s> as the last token a max_length allows, with score 0

and with beam search's settings: ``num_beams``, ``length_penalty``, ``early_stopping`` and
transformers' way of keeping finished hypotheses (`GenerationRules.finished_apart`). A setting
that would change the output in a way we do not reproduce is refused by name.
"""

import math

import torch

__all__ = ["GenerationRules", "FinishedApart", "REFUSED_IF_SET"]

#: Settings that change transformers' output, which we do not reproduce: (name, its neutral
#: value(s)).
REFUSED_IF_SET = (("do_sample", (False, None)), ("repetition_penalty", (1.0, None)),
                  ("encoder_no_repeat_ngram_size", (0, None)), ("sequence_bias", (None,)),
                  ("suppress_tokens", (None, [])), ("begin_suppress_tokens", (None, [])),
                  ("num_beam_groups", (1, None)), ("diversity_penalty", (0.0, None)),
                  ("exponential_decay_length_penalty", (None,)), ("min_new_tokens", (None,)),
                  ("renormalize_logits", (False, None)), ("constraints", (None,)),
                  ("force_words_ids", (None,)), ("guidance_scale", (None, 1.0)))


class GenerationRules:
    """A folder's rules for generating (see the module docstring); ``end_id``: its </s>.
    ``max_length`` counts the decoder's start token, as transformers does."""

    finished_apart = True     # beam search keeps finished hypotheses as transformers does

    def __init__(self, *, end_id, max_length=20, min_length=0, bad_words_ids=(),
                 forced_bos_token_id=None, forced_eos_token_id=None, no_repeat_ngram_size=0,
                 num_beams=1, length_penalty=1.0, early_stopping=False):
        self.end_id, self.max_length, self.min_length = end_id, max_length, min_length or 0
        words = [tuple(w) for w in bad_words_ids or () if list(w) != [end_id]]
        self.banned = sorted({w[0] for w in words if len(w) == 1})          # always
        self.sequences = [w for w in words if len(w) > 1]                  # after a prefix
        self.forced_bos, self.forced_eos = forced_bos_token_id, forced_eos_token_id
        self.ngram = no_repeat_ngram_size or 0
        self.num_beams, self.length_penalty = num_beams or 1, length_penalty
        self.early_stopping = early_stopping

    @classmethod
    def of_folder(cls, generation, config, end_id, path="the folder"):
        """The rules of a folder's generation_config.json (``generation``) over its
        config.json, or ValueError naming every setting we do not reproduce."""
        merged = {**config, **generation}
        refused = [f"{name} {merged[name]!r}" for name, neutral in REFUSED_IF_SET
                   if merged.get(name, neutral[0]) not in neutral]
        if refused:
            raise ValueError(f"{path}: generation settings we do not reproduce: "
                             f"{'; '.join(refused)}")
        max_length = merged.get("max_length", 20)
        if merged.get("max_new_tokens") is not None:      # after the one start token
            max_length = 1 + merged["max_new_tokens"]
        forced_eos = merged.get("forced_eos_token_id")
        if isinstance(forced_eos, list):
            forced_eos = forced_eos[0] if len(forced_eos) == 1 else None
        return cls(end_id=end_id, max_length=max_length,
                   min_length=merged.get("min_length", 0),
                   bad_words_ids=merged.get("bad_words_ids") or (),
                   forced_bos_token_id=merged.get("forced_bos_token_id"),
                   forced_eos_token_id=forced_eos,
                   no_repeat_ngram_size=merged.get("no_repeat_ngram_size", 0),
                   num_beams=merged.get("num_beams", 1),
                   length_penalty=merged.get("length_penalty", 1.0),
                   early_stopping=merged.get("early_stopping", False))

    def __call__(self, ys, scores):
        """The scores of each row's next token under the rules.
        Shape: ys (N, t) the tokens so far, the start token first; scores (N, V) -> (N, V)"""
        t = ys.size(1)
        scores = scores.clone()
        if self.ngram and t + 1 >= self.ngram:
            for row, token in self.repeats(ys):
                scores[row, token] = -math.inf
        if self.banned:
            scores[:, self.banned] = -math.inf
        for word in self.sequences:
            n = len(word) - 1
            if n <= t:
                hit = (ys[:, t - n:] == torch.tensor(word[:-1], device=ys.device)).all(dim=1)
                scores[hit, word[-1]] = -math.inf
        if t < self.min_length:
            scores[:, self.end_id] = -math.inf
        for token, when in ((self.forced_bos, 1), (self.forced_eos, self.max_length - 1)):
            if token is not None and t == when:
                scores.fill_(-math.inf)
                scores[:, token] = 0.0
        return scores

    def repeats(self, ys):
        """(row, token) for each token that would repeat one of the row's n-grams."""
        n, found = self.ngram, []
        for row, seq in enumerate(ys.tolist()):
            last = tuple(seq[len(seq) - n + 1:])
            for i in range(len(seq) - n + 1):
                if tuple(seq[i:i + n - 1]) == last:
                    found.append((row, seq[i + n - 1]))
        return found


class FinishedApart:
    """Beam search's bookkeeping as transformers' ``generate`` keeps it (its ``_beam_search``):
    the K running hypotheses of a sentence are never finished ones. Of the K V candidates,
    the 2K best are taken; those among the first K that end (</s>, or the last step) join
    the sentence's K best finished hypotheses, ranked by log p / length^length_penalty, and
    the K best that do not end run on. A sentence stops when its finished list is full and
    ``early_stopping`` is True, or when its best running hypothesis, at its present length
    (at max_length with early_stopping="never"), could not beat the worst finished one.

    Args: B sentences, K beams, L = max_len - 1 tokens at most, ``rules`` (GenerationRules:
        end_id, length_penalty, early_stopping), device.
    """

    LOST = -1.0e9           # transformers' score for "not a candidate"

    def __init__(self, B, K, L, rules, device):
        self.K, self.L, self.end, self.rules = K, L, rules.end_id, rules
        self.scores = torch.full((B, K), self.LOST, device=device)        # finished, ranked
        self.ids = torch.full((B, K, L), self.end, dtype=torch.long, device=device)
        self.full = torch.zeros(B, K, dtype=torch.bool, device=device)    # a slot holds one
        self.open = torch.ones(B, dtype=torch.bool, device=device)        # may improve

    def first_scores(self, B):
        scores = torch.full((B, self.K), self.LOST, device=self.scores.device)
        scores[:, 0] = 0.0
        return scores

    def step(self, scores, logp, ys, sentences, t, last):
        """One step: the finished candidates kept, the K running returned as beam_step's
        (scores, origin, word). Shape: scores (B_t, K), logp (B_t, K, V), ys (B_t K, t + 1)
        """
        B_t, K, V = logp.shape
        top, flat = (scores[..., None] + logp).view(B_t, K * V).topk(2 * K, dim=1)
        origin, word = flat // V, flat % V                                   # (B_t, 2K)
        ends = (word == self.end) | last
        ended = ends.clone()
        ended[:, K:] = False                        # only the first K may be finished
        lp, early = self.rules.length_penalty, self.rules.early_stopping
        ranked = top / (t + 1) ** lp                 # (as transformers: each "no" adds LOST)
        ranked = ranked + (self.full[sentences].all(1, keepdim=True) & (early is True)) * \
            self.LOST + (~self.open[sentences, None]) * self.LOST + (~ended) * self.LOST
        made = ys.view(B_t, K, -1)[:, :, 1:].gather(
            1, origin[..., None].expand(-1, -1, t)) if t else \
            torch.empty(B_t, 2 * K, 0, dtype=torch.long, device=ys.device)
        made = torch.cat([made, word[..., None]], dim=2)                    # (B_t, 2K, t + 1)
        cand = torch.full((B_t, 2 * K, self.L), self.end, dtype=torch.long, device=ys.device)
        cand[:, :, :t + 1] = made
        merged = torch.cat([self.scores[sentences], ranked], dim=1)         # (B_t, 3K)
        best = merged.topk(K, dim=1).indices
        self.scores[sentences] = merged.gather(1, best)
        self.ids[sentences] = torch.cat([self.ids[sentences], cand], dim=1).gather(
            1, best[..., None].expand(-1, -1, self.L))
        self.full[sentences] = torch.cat([self.full[sentences], ended], dim=1).gather(1, best)
        running, keep = (top + ends.float() * self.LOST).topk(K, dim=1)     # (B_t, K)
        return running, origin.gather(1, keep), word.gather(1, keep)

    def done(self, scores, sentences, t, last):
        """Which sentences stop after step t (transformers' early-stopping test)."""
        lp, early = self.rules.length_penalty, self.rules.early_stopping
        length = (self.rules.max_length - 1 if early == "never" and lp > 0.0 else t + 1)
        best = scores[:, :1] / length ** lp
        worst = torch.where(self.full[sentences],
                            self.scores[sentences].min(dim=1, keepdim=True).values,
                            torch.full_like(self.scores[sentences], self.LOST))
        self.open[sentences] &= (best > worst).any(dim=1)
        full = self.full[sentences].all(dim=1) & (early is True)
        return ~self.open[sentences] | full | last

    def best(self, sentences):
        """Each sentence's best finished hypothesis. Shape: -> (N, L)"""
        return self.ids[sentences, 0]

    def found(self, sentence):
        """The sentence's finished hypotheses, best first, as (ids, score, ranking score)."""
        return [(self.ids[sentence, k].tolist(), self.scores[sentence, k].item(),
                 self.scores[sentence, k].item()) for k in range(self.K)
                if self.scores[sentence, k] > self.LOST]
