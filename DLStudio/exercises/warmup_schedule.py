"""Checks of the exercise `warmup_schedule`: MySchedule.lr_at(step).

Every check's sizes and steps are drawn from the grading seed (`drawn`), so that no table of
rates can stand in for the formula; a student checking their own file gets the same ones
every time.
"""

import math
import reprlib

import torch

from ..training.schedule import ScheduledOptim
from ..Transformers import TransformerFG
from .checking import Exercise, Mistake, ask, check, drawn, question, student_code

CHECKS = []
LR_MUL, D_MODEL, WARMUP = 2.0, 256, 400          # the lecture's sizes


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
def rate_after_steps(module, n, lr_mul=LR_MUL, d_model=D_MODEL, warmup=WARMUP):
    """The optimiser's rate after ``n`` steps of MySchedule."""
    s = schedule(module, lr_mul, d_model, warmup)
    with student_code():
        for _ in range(n):
            s.step()
    return s.param_groups[0]["lr"]


def eq3(step, lr_mul=LR_MUL, d_model=D_MODEL, warmup=WARMUP):
    return lr_mul * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def sizes(n):
    """lr_mul, d_model and n_warmup_steps of seed ``n``: near the lecture's, never equal."""
    rng = drawn(n)
    return dict(lr_mul=round(rng.uniform(0.5, 3.0), 3), d_model=rng.choice((64, 128, 192, 384)),
                warmup=rng.randrange(150, 900))


def rates(steps, **sizes):
    """{step: the student's rate}, each a number (else a Mistake)."""
    found = {}
    for step, lr in zip(steps, ask(rates_of, list(steps), **sizes)):
        try:
            found[step] = float(lr)
        except (TypeError, ValueError):
            raise Mistake(f"lr_at({step}) returned {reprlib.repr(lr)}: it should be a "
                          "number") from None
    return found


def diagnose(got, step, lr_mul, d_model, warmup):
    """The usual mistakes, by what they give at ``step``."""
    want = eq3(step, lr_mul, d_model, warmup)
    guesses = {
        "d_model^-0.5 is missing": want * d_model ** 0.5,
        "lr_mul is missing": want / lr_mul,
        "the warm-up uses n_warmup_steps^-0.5 (eq. 3 has ^-1.5)": lr_mul * d_model ** -0.5 * min(
            step ** -0.5, step * warmup ** -0.5),
        "the steps are off by one (step 1 is the first)": eq3(step + 1, lr_mul, d_model,
                                                              warmup),
        "it is max(...), not min(...)": lr_mul * d_model ** -0.5 * max(
            step ** -0.5, step * warmup ** -1.5),
    }
    return next((why for why, value in guesses.items() if math.isclose(got, value,
                                                                      rel_tol=1e-9)), None)


def steps_of(n, warmup):
    """Step 1, the peak and its neighbours, and eight steps drawn up to 3 n_warmup_steps."""
    rng = drawn(n)
    return sorted({1, warmup - 1, warmup, warmup + 1,
                   *(rng.randrange(2, 3 * warmup) for _ in range(8))})


@check(CHECKS, "formula", "equal to eq. 3 at steps 1 .. 3 n_warmup_steps")
def formula():
    size = dict(lr_mul=LR_MUL, d_model=D_MODEL, warmup=drawn(0).randrange(200, 4000))
    for step, got in rates(steps_of(1, size["warmup"]), **size).items():
        want = eq3(step, **size)
        if not math.isclose(got, want, rel_tol=1e-9):
            why = diagnose(got, step, **size)
            raise Mistake(f"with n_warmup_steps {size['warmup']}: lr_at({step}) is {got:.6g}, "
                          f"expected {want:.6g} (relative tolerance 1e-9)"
                          + (f": {why}" if why else ""))


@check(CHECKS, "peak", "the rate rises until n_warmup_steps, then falls")
def peak():
    warmup = drawn(2).randrange(20, 100)
    found = rates(range(1, 3 * warmup + 1), warmup=warmup)
    top = max(found, key=found.__getitem__)
    if top != warmup:
        raise Mistake(f"with n_warmup_steps {warmup} the rate peaks at step {top}: it must "
                      f"rise for {warmup} steps, then decay as 1/sqrt(step)",
                      exhibit="no_warmup")


@check(CHECKS, "other_sizes", "uses its own lr_mul, d_model and n_warmup_steps")
def other_sizes():
    size = sizes(3)
    for step, got in rates(steps_of(4, size["warmup"]), **size).items():
        want = eq3(step, **size)
        if not math.isclose(got, want, rel_tol=1e-9):
            raise Mistake(f"with lr_mul {size['lr_mul']}, d_model {size['d_model']}, "
                          f"n_warmup_steps {size['warmup']}: lr_at({step}) is {got:.6g}, "
                          f"expected {want:.6g}: read self.lr_mul, self.d_model and "
                          "self.n_warmup_steps, not fixed numbers")


@check(CHECKS, "drives_the_optimizer", "after k steps the optimiser's rate is lr_at(k)")
def drives_the_optimizer():
    size, k = sizes(5), drawn(6).randrange(2, 30)
    lr, want = ask(rate_after_steps, k, **size), eq3(k, **size)
    if not isinstance(lr, (int, float)) or not math.isclose(lr, want, rel_tol=1e-9):
        raise Mistake(f"after {k} steps the optimiser's rate is {lr:.6g}, expected "
                      f"{want:.6g}" if isinstance(lr, (int, float)) else
                      f"after {k} steps the optimiser's rate is {reprlib.repr(lr)}, not a number")


EXERCISE = Exercise(
    name="warmup_schedule",
    summary="the warm-up learning-rate schedule of Vaswani et al. 2017, eq. 3",
    defines=("MySchedule", "MyTransformer"),
    forbids=lambda: [(ScheduledOptim, "lr_at", "the standard ScheduledOptim.lr_at")],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
