"""Exercise `induction_heads`: the detector of induction heads (Olsson et al. 2022).

An induction head, at a token it has seen before, looks at the token that came after that
earlier copy, and so can predict it: the mechanism of copying from context. On texts of
`half` random tokens repeated once, its attention from each token of the second copy falls
on the key one position after the same token's first copy.
Write `induction_score(pattern, half)`:
    pattern (B, H, T, T): one layer's attention weights on B such texts (row q: the weights
        with which query q looks at each key), T = s + 2 half, where s (0 or 1) tokens come
        before the first copy (a start token, or none).
    Returns (H,): for each head, its weight on key q - half + 1 from query q, averaged over
        the batch and over the queries of the second copy (q from T - half to T - 1).
A head that attends to the earlier copy itself (key q - half) is a duplicate-token head, not
an induction head; one that attends to key q - 1 a previous-token head.
The library's detector (DLStudio.evaluation.interpret.pattern_scores, head_scores) is
switched off while the checks run.

    dlstudio check induction_heads induction_heads.py
    python3 benchmarks/induction_heads.py      # heads that form during training, scored
"""
import torch


def induction_score(pattern, half):
    raise NotImplementedError
