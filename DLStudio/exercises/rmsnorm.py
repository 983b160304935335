"""Checks of the exercise `rmsnorm`: MyRMSNorm.forward(x)."""

import torch

from ..model.since_2017 import RMSNorm
from ..Transformers import TransformerPreLN
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

CHECKS = []
M = 12
TOL = 1e-6                  # a correct RMSNorm computed in float32 passes, as the model's


def inputs(seed=0, scale=3.0, shift=2.0, eps=1e-5):
    """x (2, 5, M), far from zero mean; the norm's weight and epsilon."""
    g = torch.Generator().manual_seed(fresh(seed))
    x = torch.randn(2, 5, M, generator=g, dtype=torch.float64) * scale + shift
    weight = torch.randn(M, generator=g, dtype=torch.float64)
    return x, weight, eps


def reference(x, weight, eps):
    norm = RMSNorm(M, eps).double()
    with torch.no_grad():
        norm.weight.copy_(weight)
    return RMSNorm.forward(norm, x)


@question
def normalised(module, x, weight, eps):
    norm = module.MyRMSNorm(M, eps).double()
    with torch.no_grad():
        norm.weight.copy_(weight)
    with student_code():
        return norm(x)


def run(x, weight, eps):
    return tensor(ask(normalised, x, weight, eps), "the output", x.shape)


@check(CHECKS, "shape", "(..., M) -> (..., M), every word on its own")
def shape():
    x, weight, eps = inputs()
    out = run(x, weight, eps)
    one = run(x[:1, 2:3], weight, eps)
    close(one, out[:1, 2:3], "a word normalised alone", TOL,
          "normalise each word's vector over its own M numbers (the last axis)")


@check(CHECKS, "no_centring", "no mean is subtracted (that is LayerNorm's)")
def no_centring():
    x, weight, eps = inputs(1)
    out = run(x, weight, eps)
    centred = x - x.mean(-1, keepdim=True)
    if same(out, reference(centred, weight, eps), TOL) or \
            same(out, torch.nn.functional.layer_norm(x, (M,), weight, None, eps), TOL):
        raise Mistake("the mean is subtracted: RMSNorm only scales each vector to a root "
                      "mean square of 1; centring it is LayerNorm")
    close(out, reference(x, weight, eps), "the output", TOL)


@check(CHECKS, "epsilon_inside", "epsilon is added inside the square root")
def epsilon_inside():
    x, weight, eps = inputs(2, scale=0.01, shift=0.0, eps=1e-3)     # eps matters here
    out = run(x, weight, eps)
    square = x.pow(2).mean(-1, keepdim=True)
    if same(out, x / (square.sqrt() + eps) * weight, TOL):
        raise Mistake("epsilon is added outside the root: x / (sqrt(mean(x^2)) + eps); it "
                      "goes inside, sqrt(mean(x^2) + eps)")
    floors = (x * torch.rsqrt(square.clamp(min=eps)) * weight,
              x / square.sqrt().clamp(min=eps) * weight, x * torch.rsqrt(square) * weight)
    if any(same(out, floor, TOL) for floor in floors):
        raise Mistake("epsilon is used as a floor (clamp or max), or not at all: it is added "
                      "inside the root, sqrt(mean(x^2) + eps), and so counts for every vector")
    close(out, reference(x, weight, eps), "the output for small vectors", TOL,
          "x / sqrt(mean(x^2) + eps) * weight")


@check(CHECKS, "weight", "the output is scaled by the learned weight g")
def weight():
    x, g, eps = inputs(3)
    out = run(x, g, eps)
    if same(out, reference(x, torch.ones(M, dtype=torch.float64), eps), TOL):
        raise Mistake("the weight g is not applied: multiply by self.weight")
    close(out, reference(x, g, eps), "the output", TOL)


EXERCISE = Exercise(
    name="rmsnorm",
    summary="RMSNorm: x / sqrt(mean(x^2) + eps) * g, no centring (Zhang and Sennrich 2019)",
    defines=("MyRMSNorm", "MyTransformer"),
    forbids=lambda: [(RMSNorm, "forward", "the model's RMSNorm.forward")],
    checks=CHECKS, container="MyTransformer", base=TransformerPreLN,
    settings={"norm": "rmsnorm"})
