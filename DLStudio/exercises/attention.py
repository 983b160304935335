"""Checks of the exercise `attention`: scaled_dot_product(Q, K, V, mask)."""

import math

import torch
import torch.nn.functional as F

from ..model import architecture
from ..Transformers import TransformerFG
from .checking import (
    SDPA_KERNELS,
    Exercise,
    Mistake,
    ask,
    check,
    close,
    differs,
    fresh,
    internal_kernels,
    question,
    same,
    student_code,
    tensor,
)
from .rigs import sees_future, standing_in, translator

CHECKS = []
B, H, T_Q, T_K, S = 2, 3, 5, 6, 4


def inputs(seed=0, T_q=T_Q, T_k=T_K, lead=(B, H)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*lead, T, S, generator=g, dtype=torch.float64) * 2
            for T in (T_q, T_k, T_k)]


def reference(Q, K, V, mask=None, scale=True, axis=-1):
    """(output, weights); ``scale`` False or ``axis`` -2: what the usual mistakes give."""
    scores = Q @ K.transpose(-2, -1) / (math.sqrt(Q.size(-1)) if scale else 1.0)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=axis)
    return weights @ V, weights


WRONG_AXIS = ("the softmax runs over the wrong axis: each query's row (dim=-1) must sum to "
              "1, not each column")


@question
def attend(module, *args):
    with student_code():
        return module.scaled_dot_product(*args)


def theirs(*args):
    result = ask(attend, *args)
    if not isinstance(result, tuple) or len(result) != 2:
        raise Mistake("scaled_dot_product should return two tensors: (output, weights)")
    return result


def padding(T_k=T_K):
    """(B, 1, 1, T_k): the last positions of each sentence are padding."""
    mask = torch.zeros(B, 1, 1, T_k, dtype=torch.bool)
    mask[0, ..., -2:], mask[1, ..., -1:] = True, True
    return mask


def causal(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)


def expect(got, Q, K, V, mask, what, part):
    """``got`` is part ``part`` (0 output, 1 weights) of the reference's result; the missing
    1/sqrt(s_qkv) is said as such wherever it shows."""
    if same(got, reference(Q, K, V, mask, scale=False)[part]):
        raise Mistake(f"{what}: the scores are not divided by sqrt(s_qkv) = {math.sqrt(S):g}: "
                      "large scores saturate the softmax (Vaswani et al. 2017, eq. 1)",
                      exhibit="no_scaling")
    wrong_axis = reference(Q, K, V, mask, axis=-2)[part]
    if same(torch.nan_to_num(got), torch.nan_to_num(wrong_axis)):
        raise Mistake(f"{what}: {WRONG_AXIS}")
    close(got, reference(Q, K, V, mask)[part], what)


@check(CHECKS, "shapes", "returns (output (..., T_q, s_qkv), weights (..., T_q, T_k))")
def shapes():
    out, weights = theirs(*inputs(fresh(0)))
    tensor(out, "the output", (B, H, T_Q, S))
    tensor(weights, "the weights", (B, H, T_Q, T_K))


@check(CHECKS, "softmax_rows", "each row of the weights is a distribution (sums to 1)")
def softmax_rows():
    _, weights = theirs(*inputs(fresh(0)))
    rows = weights.double().sum(-1)
    bad = differs(rows, 1.0).nonzero()
    if len(bad):
        at = tuple(bad[0].tolist())
        columns_sum = ((weights.double().sum(-2) - 1).abs() < 1e-9).all()
        raise Mistake(f"row {at[-1]} of the weights (batch {at[0]}, head {at[1]}) sums to "
                      f"{rows[at].item():.2f} (tolerance 1e-9): " + (
                          WRONG_AXIS if columns_sum else
                          "the weights must be a softmax over the keys (dim=-1)"))


@check(CHECKS, "scaling", "scores divided by sqrt(s_qkv) before the softmax (eq. 1)")
def scaling():
    Q, K, V = inputs(fresh(0))
    _, weights = theirs(Q, K, V)
    expect(weights, Q, K, V, None, "the weights", 1)


@check(CHECKS, "output", "the output is the weights times V")
def output():
    Q, K, V = inputs(seed=fresh(1))
    out, _ = theirs(Q, K, V)
    expect(out, Q, K, V, None, "the output", 0)


@check(CHECKS, "mask", "weights are exactly 0 where the mask is True, and only there")
def mask():
    for name, (Q, K, V), m in (("padding", inputs(fresh(2)), padding()),
                               ("causal", inputs(fresh(3), T_k=T_Q), causal(T_Q))):
        out, weights = theirs(Q, K, V, m)
        weights = tensor(weights, "the weights", (B, H, T_Q, m.size(-1)))
        if torch.isnan(weights).any():             # a softmax over all -inf: which axis?
            expect(weights, Q, K, V, m, f"the weights with a {name} mask", 1)
        m = m.expand_as(weights)
        if (weights[~m] == 0).all() and (weights[m] != 0).any():
            raise Mistake(f"with a {name} mask the weights are 0 where the mask is False: the "
                          "mask is inverted (True marks where a query may NOT look)",
                          exhibit="no_causal_mask" if name == "causal" else "no_padding_mask")
        if (weights[m] != 0).any():
            raise Mistake(f"with a {name} mask, weight {weights[m].abs().max().item():.3g} "
                          "falls where the mask is True: the mask is not applied (fill the "
                          "masked scores with -inf before the softmax)",
                          exhibit="no_causal_mask" if name == "causal" else "no_padding_mask")
        expect(weights, Q, K, V, m, f"the weights with a {name} mask", 1)
        expect(out, Q, K, V, m, f"the output with a {name} mask", 0)


@check(CHECKS, "any_leading_dims", "works for (B, T, s_qkv) inputs with a (T_q, T_k) mask")
def any_leading_dims():
    Q, K, V = inputs(fresh(4), T_k=T_Q, lead=(B,))
    out, weights = theirs(Q, K, V, causal(T_Q))
    expect(weights, Q, K, V, causal(T_Q), "the weights of (B, T, s_qkv) inputs", 1)
    expect(out, Q, K, V, causal(T_Q), "the output of (B, T, s_qkv) inputs", 0)


@check(CHECKS, "in_a_model", "a TransformerFG of MyHead: no position sees a later word")
def in_a_model():
    def head(h, x, mask=None, memory=None):      # MyHead of the skeleton, with theirs
        kv = x if memory is None else memory
        Q, K, V = h.WQ(x), h.WK(kv), h.WV(kv)
        return tensor(theirs(Q, K, V, mask)[0], "scaled_dot_product's output", Q.shape)
    model = standing_in(translator(seed=fresh(0)), architecture.TransformerParts.AttentionHead,
                        head)
    with torch.no_grad():
        sees_future(lambda src, targets: [model(src, tgt) for tgt in targets])


EXERCISE = Exercise(
    name="attention",
    summary="scaled dot-product attention with a mask: softmax(Q K^T / sqrt(s_qkv)) V",
    defines=("scaled_dot_product", "MyTransformer"),
    forbids=lambda: [(architecture, "scaled_dot_product", "the model's scaled_dot_product"),
                     (F, "scaled_dot_product_attention", "F.scaled_dot_product_attention"),
                     *internal_kernels("scaled_dot_product_attention", SDPA_KERNELS)],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
