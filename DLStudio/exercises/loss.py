"""Checks of the exercise `loss`: sequence_loss(logits, tgt, label_smoothing)."""

import torch
import torch.nn.functional as F

from ..model.tokens import SOS_INDEX, padding_mask
from ..Transformers import TransformerFG
from .checking import (
    LOSS_KERNELS,
    Exercise,
    Mistake,
    ask,
    check,
    fresh,
    internal_kernels,
    near,
    question,
    student_code,
    tensor,
    with_grad,
)
from .rigs import words

CHECKS = []
B, T, V = 3, 8, 11
EPS = 0.1


def batch(seed=0):
    """Logits (B, T - 1, V) and full targets (B, T): rows end at different lengths, one
    with no padding."""
    g = torch.Generator().manual_seed(fresh(seed))
    logits = torch.randn(B, T - 1, V, generator=g, dtype=torch.float64) * 2
    tgt = torch.cat([torch.full((B, 1), SOS_INDEX),
                     words(B, T - 1, V, seed=fresh(seed), eos_at=[3, 6, 7])], dim=1)
    return logits, tgt


def want(logits, tgt, eps, shift=True):
    labels = tgt[:, 1:] if shift else tgt[:, :-1]
    keep = ~padding_mask(labels)
    return F.cross_entropy(logits[keep], labels[keep], label_smoothing=eps,
                           reduction="sum"), int(keep.sum())


@question
def loss_of(module, logits, tgt, eps):
    with student_code():
        return module.sequence_loss(logits, tgt, eps)


@question
def gradient_of(module, logits, tgt, eps):
    """(the loss, whether it carries a gradient, the gradient of the logits) of the
    student's loss (N left out)."""
    mine = logits.clone().requires_grad_()
    with torch.enable_grad(), student_code():
        result = module.sequence_loss(mine, tgt, eps)
        loss = result[0] if isinstance(result, tuple) and len(result) == 2 else result
        carries = isinstance(loss, torch.Tensor) and loss.requires_grad
        if carries:
            loss.backward()
    return result, carries, mine.grad


def checked(result):
    if not isinstance(result, tuple) or len(result) != 2:
        raise Mistake("sequence_loss should return two things: (the summed loss, N)")
    loss, n = result
    return tensor(loss, "the loss", ()), n


def theirs(logits, tgt, eps):
    return checked(ask(loss_of, logits, tgt, eps))


def compare(got, expected, what):
    if not near(got, expected):
        raise Mistake(f"{what} is {got.item():.6f}, expected {expected.item():.6f} "
                      "(tolerance 1e-9)")


@check(CHECKS, "count", "N: the real target positions, each sentence's first EOS included")
def count():
    logits, tgt = batch()
    _, n = theirs(logits, tgt, 0.0)
    expected = want(logits, tgt, 0.0)[1]
    if int(n) != expected:
        raise Mistake(f"N is {int(n)}, expected {expected}: count the positions whose "
                      "target is a word or the first EOS (not the padding after it)" + (
                          f"; {B * (T - 1)} is every position" if int(n) == B * (T - 1)
                          else ""))


@check(CHECKS, "shifted", "position t is scored against tgt[:, t + 1], the next word")
def shifted():
    logits, tgt = batch(1)
    loss, _ = theirs(logits, tgt, 0.0)
    unshifted = want(logits, tgt, 0.0, shift=False)[0]
    if abs(loss.item() - unshifted.item()) < 1e-9:
        raise Mistake("the targets are not shifted: the prediction at position t is scored "
                      "against tgt[:, t], the word it just read; it must be tgt[:, t + 1]")
    compare(loss, want(logits, tgt, 0.0)[0], "the loss without smoothing")


@check(CHECKS, "no_smoothing", "the summed cross-entropy at label_smoothing 0")
def no_smoothing():
    logits, tgt = batch(2)
    loss, n = theirs(logits, tgt, 0.0)
    expected = want(logits, tgt, 0.0)[0]
    if abs(loss.item() * n - expected.item()) < 1e-9 or \
            abs(loss.item() - expected.item() / want(logits, tgt, 0.0)[1]) < 1e-9:
        raise Mistake("the loss is the mean over the positions: return the sum (the trainer "
                      "divides by N, summed over every process)")
    compare(loss, expected, "the loss without smoothing")


@check(CHECKS, "smoothing", "(1 - eps) on the right word + eps / V on every word")
def smoothing():
    logits, tgt = batch(3)
    loss, _ = theirs(logits, tgt, EPS)
    compare(loss, want(logits, tgt, EPS)[0], f"the loss with label_smoothing {EPS}")


@check(CHECKS, "padding_ignored", "nothing at the padding counts, the smoothing's mass neither")
def padding_ignored():
    logits, tgt = batch(4)
    keep = ~padding_mask(tgt[:, 1:])
    noisy = logits.clone()
    noisy[~keep] = torch.randn(int((~keep).sum()), V, dtype=torch.float64) * 5
    real = logits.clone()                      # one real position's right word changed
    b0, t0 = keep.nonzero()[0].tolist()
    real[b0, t0, tgt[b0, t0 + 1]] -= 3.0
    for eps in (0.0, EPS):
        a, _ = theirs(logits, tgt, eps)
        b, _ = theirs(noisy, tgt, eps)
        if not near(a, b):
            raise Mistake("changing the logits at the padding changed the loss" + (
                f" with label_smoothing {eps}: the smoothing's mass is counted at the padding "
                "too; mask the whole per-position loss" if eps else ": leave the positions "
                "after each sentence's first EOS out"))
        c, _ = theirs(real, tgt, eps)      # (a loss that ignores everything ignores padding)
        if near(a, c):
            raise Mistake("making a real position's right word less likely left the loss "
                          "as it was: the loss must count every real position")


@check(CHECKS, "gradient", "the loss is differentiable, with the reference's gradient")
@with_grad
def gradient():
    logits, tgt = batch(5)
    result, carries, grad = ask(gradient_of, logits, tgt, EPS)
    checked(result)
    if not carries:
        raise Mistake("the loss carries no gradient (was it built from .item() or a new "
                      "tensor?): training could not learn from it")
    ref = logits.clone().requires_grad_()
    want(ref, tgt, EPS)[0].backward()
    diff = (tensor(grad, "the gradient of the logits", ref.shape) - ref.grad).abs().max().item()
    if not diff <= 1e-9:
        raise Mistake(f"the gradient differs from the reference's by up to {diff:.3g} "
                      "(tolerance 1e-9)")


EXERCISE = Exercise(
    name="loss",
    summary="label-smoothed cross-entropy over the real target positions, targets shifted",
    defines=("sequence_loss", "MyTransformer"),
    forbids=lambda: [(F, "cross_entropy", "F.cross_entropy"), (F, "nll_loss", "F.nll_loss"),
                     *internal_kernels("cross_entropy", LOSS_KERNELS)],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
