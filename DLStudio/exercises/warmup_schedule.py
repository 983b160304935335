"""Checks of the exercise `warmup_schedule`: MySchedule.lr_at(step)."""

import math

import torch

from ..training.schedule import ScheduledOptim
from ..Transformers import TransformerFG
from .checking import Exercise, Mistake, ask, check, question, student_code

CHECKS = []
LR_MUL, D_MODEL, WARMUP = 2.0, 256, 400


def schedule(module, lr_mul, d_model, warmup):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    return module.MySchedule(optimizer, lr_mul, d_model, warmup)


@question
def rates_of(module, steps, lr_mul=LR_MUL, d_model=D_MODEL, warmup=WARMUP):
    """What MySchedule(lr_mul, d_model, warmup).lr_at gives at each of ``steps``."""
    s = schedule(module, lr_mul, d_model, warmup)
    with student_code():
        return [s.lr_at(step) for step in steps]


@question
def rate_after_steps(module, n):
    """The optimiser's rate after ``n`` steps of MySchedule (the lecture's sizes)."""
    s = schedule(module, LR_MUL, D_MODEL, WARMUP)
    with student_code():
        for _ in range(n):
            s.step()
    return s.param_groups[0]["lr"]


def eq3(step, lr_mul=LR_MUL, d_model=D_MODEL, warmup=WARMUP):
    return lr_mul * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def rates(steps, **sizes):
    """{step: the student's rate}, each a number (else a Mistake)."""
    found = {}
    for step, lr in zip(steps, ask(rates_of, list(steps), **sizes)):
        try:
            found[step] = float(lr)
        except (TypeError, ValueError):
            raise Mistake(f"lr_at({step}) returned {lr!r}: it should be a number") from None
    return found


def diagnose(got, step):
    """The usual mistakes, by what they give at ``step``."""
    want = eq3(step)
    guesses = {
        "d_model^-0.5 is missing": want * D_MODEL ** 0.5,
        "lr_mul is missing": want / LR_MUL,
        "the warm-up uses n_warmup_steps^-0.5 (eq. 3 has ^-1.5)": LR_MUL * D_MODEL ** -0.5 * min(
            step ** -0.5, step * WARMUP ** -0.5),
        "the steps are off by one (step 1 is the first)": eq3(step + 1),
        "it is max(...), not min(...)": LR_MUL * D_MODEL ** -0.5 * max(
            step ** -0.5, step * WARMUP ** -1.5),
    }
    return next((why for why, value in guesses.items() if math.isclose(got, value,
                                                                      rel_tol=1e-9)), None)


@check(CHECKS, "formula", "equal to eq. 3 at steps 1 .. 3 n_warmup_steps")
def formula():
    for step, got in rates((1, 2, 10, 100, 399, 400, 401, 800, 1200)).items():
        if not math.isclose(got, eq3(step), rel_tol=1e-9):
            why = diagnose(got, step)
            raise Mistake(f"lr_at({step}) is {got:.6g}, expected {eq3(step):.6g} (relative "
                          "tolerance 1e-9)" + (f": {why}" if why else ""))


@check(CHECKS, "peak", "the rate rises until n_warmup_steps, then falls")
def peak():
    found = rates(range(1, 201), warmup=50)
    top = max(found, key=found.__getitem__)
    if top != 50:
        raise Mistake(f"with n_warmup_steps 50 the rate peaks at step {top}: it must rise "
                      "for 50 steps, then decay as 1/sqrt(step)", exhibit="no_warmup")


@check(CHECKS, "other_sizes", "uses its own lr_mul, d_model and n_warmup_steps")
def other_sizes():
    for step, got in rates((3, 10, 30), lr_mul=0.5, d_model=64, warmup=10).items():
        want = eq3(step, 0.5, 64, 10)
        if not math.isclose(got, want, rel_tol=1e-9):
            raise Mistake(f"with lr_mul 0.5, d_model 64, n_warmup_steps 10: lr_at({step}) is "
                          f"{got:.6g}, expected {want:.6g}: read self.lr_mul, "
                          "self.d_model and self.n_warmup_steps, not fixed numbers")


@check(CHECKS, "drives_the_optimizer", "after k steps the optimiser's rate is lr_at(k)")
def drives_the_optimizer():
    lr = ask(rate_after_steps, 3)
    if not isinstance(lr, (int, float)) or not math.isclose(lr, eq3(3), rel_tol=1e-9):
        raise Mistake(f"after 3 steps the optimiser's rate is {lr:.6g}, expected "
                      f"{eq3(3):.6g}" if isinstance(lr, (int, float)) else
                      f"after 3 steps the optimiser's rate is {lr!r}, not a number")


EXERCISE = Exercise(
    name="warmup_schedule",
    summary="the warm-up learning-rate schedule of Vaswani et al. 2017, eq. 3",
    defines=("MySchedule", "MyTransformer"),
    forbids=lambda: [(ScheduledOptim, "lr_at", "the standard ScheduledOptim.lr_at")],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
