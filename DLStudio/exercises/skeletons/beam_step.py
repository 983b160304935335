"""Exercise `beam_step`: one step of beam search, and the length penalty.

Beam search keeps the K best partial translations (hypotheses) of every sentence. At each
step every hypothesis may be extended by any of the V words: of those K V candidates, the K
of highest log-probability go on.

1. `beam_step(scores, logp, finished)`:
       scores (B, K): each hypothesis's log-probability so far; at the first step only
           hypothesis 0 exists and the others are -inf.
       logp (B, K, V): the log-probability of each next word after each hypothesis.
       finished (B, K) bool: the hypothesis has produced EOS (id 1). A finished hypothesis
           may only be extended by EOS, at no cost (its score stays as it is).
   Returns (scores (B, K), origin (B, K), word (B, K)): the K best candidates of each
   sentence, best first: their log-probabilities, which hypothesis (0..K-1) each extends,
   and the word it adds. Candidates compete across all K hypotheses of a sentence, not
   within each one.
2. `length_normalised(scores, lengths, alpha)`: the score finished hypotheses are ranked by
   at the end, log-probability / length^alpha (lengths in words, EOS included; a length
   below 1 counts as 1). Without it, short translations win merely for paying for fewer
   words; alpha (0.6 by default in translate_sentence.py --beam) sets how much it corrects.
The model's beam_step and length_normalised are switched off while the checks run; the
checks run the model's beam search with your two functions in it.

    dlstudio check beam_step beam_step.py
"""
import torch

SOS_INDEX, EOS_INDEX = 0, 1


def beam_step(scores, logp, finished):
    raise NotImplementedError


def length_normalised(scores, lengths, alpha):
    raise NotImplementedError
