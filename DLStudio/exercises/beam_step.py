"""Checks of the exercise `beam_step`: beam_step and length_normalised."""

import torch

from ..evaluation import decode_and_score
from ..model.tokens import EOS_INDEX
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    fresh,
    question,
    same,
    student_code,
    tensor,
)
from .rigs import T_MAX, V_EN, translator, words

CHECKS = []
B, K, V = 2, 3, 7


def step_inputs(seed=0, first=False):
    g = torch.Generator().manual_seed(fresh(seed))
    logp = torch.log_softmax(torch.randn(B, K, V, generator=g, dtype=torch.float64) * 2, -1)
    scores = -torch.rand(B, K, generator=g, dtype=torch.float64) * 3
    if first:
        scores[:, 1:] = float("-inf")
    return scores, logp, torch.zeros(B, K, dtype=torch.bool)


@question
def stepped(module, scores, logp, finished):
    with student_code():
        return module.beam_step(scores, logp, finished)


@question
def normalised(module, scores, lengths, alpha):
    with student_code():
        return module.length_normalised(scores, lengths, alpha)


def search_inputs(seed):
    model = translator(seed=seed)
    model.decoder.out.bias.data[EOS_INDEX] += 0.5
    return model, words(4, 7, V_EN, seed=seed, eos_at=[7, 5, 3, 6])


@question
def searched(module, seed):
    """The model's beam search (width 3) on our small model, with the student's functions."""
    model, src = search_inputs(seed)
    with student_code():
        return decode_and_score.beam_search(model, src, T_MAX, beam_width=3,
                                            step=module.beam_step, rank=module.length_normalised)


def step(scores, logp, finished):
    result = ask(stepped, scores, logp, finished)
    if not isinstance(result, tuple) or len(result) != 3:
        raise Mistake("beam_step should return three tensors: (scores, origin, word)")
    return [tensor(t, name, (B, K)) for t, name in zip(result, ("scores", "origin", "word"))]


def candidates(scores, origin, word):
    """Each kept candidate as (score rounded, origin, word), per sentence, as sets."""
    return [{(round(s, 9), o, w) for s, o, w in zip(*(t[b].tolist() for t in (
        scores, origin, word)))} for b in range(B)]


def compare(scores, logp, finished, what):
    got = step(scores, logp, finished)
    want = decode_and_score.beam_step(scores, logp, finished)
    if (got[0][:, 1:] > got[0][:, :-1] + 1e-12).any():
        raise Mistake(f"{what}: the scores are not best first")
    for b, (mine, ref) in enumerate(zip(candidates(*got), candidates(*want))):
        if mine != ref:
            per_hypothesis = torch.stack([(scores[b, k] + logp[b, k]).max()
                                          for k in range(K)])
            hint = (" (you kept the best word of each hypothesis: candidates compete across "
                    "all K hypotheses)" if sorted(round(x, 9) for x, _, _ in mine) ==
                    sorted(round(x, 9) for x in per_hypothesis.tolist()) else "")
            raise Mistake(f"{what}: sentence {b} keeps (score, origin, word) "
                          f"{sorted(mine, reverse=True)}, expected {sorted(ref, reverse=True)}"
                          + hint)


@check(CHECKS, "first_step", "from one hypothesis: its K likeliest words")
def first_step():
    compare(*step_inputs(0, first=True), "at the first step")


@check(CHECKS, "best_of_all", "the K best of all K x V candidates, best first")
def best_of_all():
    compare(*step_inputs(1), "a step")


@check(CHECKS, "finished", "a finished hypothesis goes on with EOS only, its score unchanged")
def finished():
    scores, logp, done = step_inputs(2)
    scores[:, 0] = -0.1                                      # the best, and finished
    done[:, 0] = True
    got_scores, origin, word = step(scores, logp, done)
    for b in range(B):
        kept = [(s, w) for s, o, w in zip(got_scores[b].tolist(), origin[b].tolist(),
                                          word[b].tolist()) if o == 0]
        if kept != [(-0.1, EOS_INDEX)]:
            raise Mistake(f"sentence {b}: the finished hypothesis 0 (score -0.1) became "
                          f"{kept} as (score, word): it may only go on with EOS, at no cost")
    compare(scores, logp, done, "with a finished hypothesis")


@check(CHECKS, "length_penalty", "log-probability / length^alpha")
def length_penalty():
    g = torch.Generator().manual_seed(fresh(4))
    scores = -torch.rand(2, 2, generator=g, dtype=torch.float64) * 5
    lengths = torch.randint(2, 9, (2, 2), generator=g).double()
    lengths[1, 0] = 0.0                                   # max(length, 1): never 0^alpha
    got = tensor(ask(normalised, scores, lengths, 0.6), "length_normalised", (2, 2))
    if same(got, scores, 1e-12):
        raise Mistake("the scores come back unchanged: beam scores without the length "
                      "penalty let a 2-word hypothesis at -2.0 beat a 6-word one at -2.5 "
                      "(divide by length^alpha)")
    close(got, decode_and_score.length_normalised(scores, lengths, 0.6),
          "length_normalised(alpha 0.6)", hint="scores / max(length, 1)^alpha")
    flat = tensor(ask(normalised, scores, lengths, 0.0), "alpha 0", (2, 2))
    close(flat, scores, "length_normalised with alpha 0", hint="alpha 0: no penalty")


@check(CHECKS, "whole_search", "the model's beam search with your functions translates alike")
def whole_search():
    model, src = search_inputs(fresh(1))
    want = decode_and_score.beam_search(model, src, T_MAX, beam_width=3)
    got = tensor(ask(searched, fresh(1)), "beam search's result")
    if got.shape != want.shape or (got != want).any():
        row = int((got != want).any(1).nonzero()[0]) if got.shape == want.shape else 0
        raise Mistake(f"beam search (width 3) with your functions translates sentence {row} "
                      f"as {got[row].tolist()}, expected {want[row].tolist()}")


EXERCISE = Exercise(
    name="beam_step",
    summary="one step of beam search (the K best of K x V) and the length penalty alpha",
    defines=("beam_step", "length_normalised"),
    forbids=lambda: [(decode_and_score, "beam_step", "the model's beam_step"),
                     (decode_and_score, "length_normalised", "the model's length_normalised")],
    checks=CHECKS)
