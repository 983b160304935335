"""Checks of the exercise `swiglu`: MySwiGLU.forward(x)."""

import torch
import torch.nn.functional as F

from ..model.since_2017 import SwiGLU
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
B, T, M = 2, 4, 12


class Sizes:
    embedding_size, feed_forward_size, feed_forward = M, None, "swiglu"


def block(seed=0):
    """The reference block (weights drawn from the seed) and x (B, T, M)."""
    torch.manual_seed(fresh(seed))
    ref = SwiGLU(None, Sizes).double()
    g = torch.Generator().manual_seed(fresh(seed))
    return ref, torch.randn(B, T, M, generator=g, dtype=torch.float64) * 2


@question
def forward_of(module, weights, x):
    mine = module.MySwiGLU(None, Sizes).double()
    mine.load_state_dict(weights)
    with student_code():
        return mine(x)


def run(ref, x):
    return tensor(ask(forward_of, ref.state_dict(), x), "the output", x.shape)


def of(ref, x, gate, other, act):
    return ref.W2(act(gate(x)) * other(x))


@check(CHECKS, "shape", "(B, T, M) -> (B, T, M), position by position")
def shape():
    ref, x = block()
    out = run(ref, x)
    close(run(ref, x[:, 1:2]), out[:, 1:2], "one position alone", 1e-9,
          "each position goes through the block on its own")


@check(CHECKS, "gate_branch", "SiLU is applied to W1 x, which gates V x")
def gate_branch():
    ref, x = block(1)
    out = run(ref, x)
    if same(out, of(ref, x, ref.V, ref.W1, F.silu), 1e-9):
        raise Mistake("the gate is on the wrong branch: SiLU(V x) * W1 x; it is "
                      "SiLU(W1 x) * V x")
    if same(out, ref.W2(F.silu(ref.W1(x))), 1e-9):
        raise Mistake("V x is missing: the SiLU of W1 x must be multiplied by V x (the gate)")
    close(out, of(ref, x, ref.W1, ref.V, F.silu), "the output")


@check(CHECKS, "silu", "the gate's nonlinearity is SiLU, z sigmoid(z), not the sigmoid")
def silu():
    ref, x = block(2)
    out = run(ref, x)
    if same(out, of(ref, x, ref.W1, ref.V, torch.sigmoid), 1e-9):
        raise Mistake("sigmoid(W1 x) gates V x: that is GLU (Dauphin et al. 2017); SwiGLU's "
                      "gate is SiLU(z) = z sigmoid(z)")
    close(out, of(ref, x, ref.W1, ref.V, F.silu), "the output")


EXERCISE = Exercise(
    name="swiglu",
    summary="SwiGLU: W2 (SiLU(W1 x) * V x), the gated feed-forward of Llama (Shazeer 2020)",
    defines=("MySwiGLU", "MyTransformer"),
    forbids=lambda: [(SwiGLU, "forward", "the model's SwiGLU.forward"),
                     (F, "silu", "F.silu")],
    checks=CHECKS, container="MyTransformer", base=TransformerPreLN,
    settings={"feed_forward": "swiglu"})
