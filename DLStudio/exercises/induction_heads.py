"""Checks of the exercise `induction_heads`: induction_score(pattern, half)."""

import torch

from ..evaluation import interpret
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    fresh,
    question,
    student_code,
    tensor,
)

CHECKS = []
B, H = 3, 4


def patterns(seed, half, start=1, batch=B):
    """Causal attention weights (B, H, T, T) of random scores, T = start + 2 half."""
    g = torch.Generator().manual_seed(seed)
    T = start + 2 * half
    scores = torch.randn(batch, H, T, T, generator=g, dtype=torch.float64) * 2
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1)


def reference(pattern, half, offset=1, queries="second"):
    """The score; ``offset`` 0 (the duplicate token), -half + 1 ... or the queries of every
    position: what the usual mistakes compute."""
    T = pattern.size(-1)
    q = torch.arange(T - half, T) if queries == "second" else torch.arange(half, T)
    return pattern[:, :, q, q - half + offset].mean(dim=(0, 2))


def pointing(half, start, offsets):
    """Weights (1, H, T, T) where head h's query q looks only at key q + offsets[h] (where
    that key exists and is not ahead; else at itself)."""
    T = start + 2 * half
    out = torch.zeros(1, H, T, T, dtype=torch.float64)
    for h, offset in enumerate(offsets):
        for q in range(T):
            k = q + offset
            out[0, h, q, k if 0 <= k <= q else q] = 1.0
    return out


@question
def scored(module, pattern, half):
    with torch.no_grad(), student_code():
        return module.induction_score(pattern, half)


def run(pattern, half):
    return tensor(ask(scored, pattern, half), "the scores")


@check(CHECKS, "heads_kept", "returns (H,): one score a head, the batch and queries averaged")
def heads_kept():
    half = 2 + fresh(0) % 4
    out = run(patterns(fresh(0), half), half)
    if tuple(out.shape) != (H,):
        raise Mistake(f"the scores have shape {tuple(out.shape)}, expected ({H},): one score a "
                      "head; average over the batch (axis 0) and the queries (the second copy's "
                      "positions), keep the heads' axis")


@check(CHECKS, "offset", "the key looked at is q - half + 1: the token after the earlier copy")
def offset():
    half, start = 5, fresh(1) % 2
    # head 0 an induction head, 1 a duplicate-token head, 2 a previous-token head, 3 one
    # that looks two past the earlier copy
    out = tensor(run(pointing(half, start, (-half + 1, -half, -1, -half + 2)), half),
                 "the scores", (H,))
    named = {1: "the duplicate-token head's (key q - half: the earlier copy itself)",
             2: "the previous-token head's (key q - 1)",
             3: "a head's that looks two past the earlier copy (key q - half + 2)"}
    for head, what in named.items():
        if out[head] > 0.5 and out[0] < 0.5:
            raise Mistake(f"the score is {what}; an induction head looks at the token after "
                          "the earlier copy: key q - half + 1")
    close(out, torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64),
          "the scores of four heads that each look at one place", 1e-9,
          "head 0 looks at q - half + 1 from every query of the second copy: score 1")


@check(CHECKS, "second_copy_only", "averaged over the second copy's queries only")
def second_copy_only():
    half = 3 + fresh(2) % 3
    pattern = patterns(fresh(2), half)
    out = tensor(run(pattern, half), "the scores", (H,))
    if torch.allclose(out, reference(pattern, half, queries="all")):
        raise Mistake("the average runs over queries of the first copy too: only a token of "
                      "the second copy has an earlier copy to look back to (queries T - half "
                      "to T - 1)")
    close(out, reference(pattern, half), "the scores", 1e-9)


@check(CHECKS, "with_or_without_a_start_token", "the copies are found from the end: T - 2 half "
                                                  "tokens may come first")
def with_or_without_a_start_token():
    half = 2 + fresh(3) % 4
    for start in (0, 1, 2):
        pattern = patterns(fresh(3) + start, half, start=start)
        close(run(pattern, half), reference(pattern, half),
              f"the scores with {start} token(s) before the first copy", 1e-9,
              "count the second copy's queries from the end (T - half), whatever comes first")


EXERCISE = Exercise(
    name="induction_heads",
    summary="the induction-head detector: attention to the token after the earlier copy "
            "(Olsson et al. 2022)",
    defines=("induction_score",),
    forbids=lambda: [(interpret, "pattern_scores", "the library's interpret.pattern_scores"),
                     (interpret, "head_scores", "the library's interpret.head_scores")],
    checks=CHECKS)
