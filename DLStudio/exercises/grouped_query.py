"""Checks of the exercise `grouped_query`: MyGroupedAttention.weighted(Q, K, V, mask), the
attention of H query heads over G key/value heads."""

import torch
import torch.nn.functional as F

from ..model import since_2017
from ..model.architecture import TransformerParts, scaled_dot_product
from ..model.hooks import add_hook_points
from ..Transformers import TransformerPreLN
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    differs,
    fresh,
    question,
    same,
    student_code,
    tensor,
)

CHECKS = []
B, H, T_Q, T_K, S = 2, 4, 5, 6, 3


def inputs(seed, G):
    """Q (B, H, T_q, s), K and V (B, G, T_k, s)."""
    g = torch.Generator().manual_seed(fresh(seed))
    return (torch.randn(B, H, T_Q, S, generator=g, dtype=torch.float64),
            torch.randn(B, G, T_K, S, generator=g, dtype=torch.float64),
            torch.randn(B, G, T_K, S, generator=g, dtype=torch.float64))


def reference(Q, K, V, mask=None, order="interleave"):
    """Query head h reads key/value head h // (H / G) ("interleave": 0 0 1 1), or, to
    recognise the mistake, h % G ("tile": 0 1 0 1)."""
    group = Q.size(1) // K.size(1)
    if order == "tile":
        K, V = K.repeat(1, group, 1, 1), V.repeat(1, group, 1, 1)
    else:
        K, V = K.repeat_interleave(group, 1), V.repeat_interleave(group, 1)
    return scaled_dot_product(Q, K, V, mask)


@question
def attended(module, Q, K, V, mask=None):
    attention = module.MyGroupedAttention()
    attention.group = Q.size(1) // K.size(1)
    attention.score_scale = None                 # the model's: 1 / sqrt(s_qkv) (since_2023)
    add_hook_points(attention, None, "attn_scores", "pattern")   # as SelfAttention has
    with student_code():
        return attention.weighted(Q, K, V, mask)


def run(Q, K, V, mask=None):
    out, weights = ask(attended, Q, K, V, mask)
    return (tensor(out, "the output", Q.shape),
            tensor(weights, "the weights", (B, H, T_Q, T_K)))


@check(CHECKS, "shapes", "Q (B, H, T_q, s), K and V (B, G, T_k, s) -> (B, H, T_q, s), weights")
def shapes():
    run(*inputs(0, 2))


@check(CHECKS, "groups_in_order", "query head h reads key/value head h // (H / G): 0 0 1 1")
def groups_in_order():
    Q, K, V = inputs(1, 2)
    out, weights = run(Q, K, V)
    if same(weights, reference(Q, K, V, order="tile")[1]) or \
            same(out, reference(Q, K, V, order="tile")[0]):
        raise Mistake("the key/value heads are repeated in the wrong order (0 1 0 1, as "
                      "K.repeat does): the query heads of a group are neighbours, heads 0 and 1 "
                      "read key/value head 0, heads 2 and 3 head 1 (repeat_interleave)")
    close(weights, reference(Q, K, V)[1], "the weights")
    close(out, reference(Q, K, V)[0], "the output")


@check(CHECKS, "multi_head", "G = H: every head its own keys and values (2017's attention)")
def multi_head():
    Q, K, V = inputs(2, H)
    out, _ = run(Q, K, V)
    close(out, scaled_dot_product(Q, K, V)[0], "the output with G = H")


@check(CHECKS, "multi_query", "G = 1: every query head reads the one key/value head")
def multi_query():
    Q, K, V = inputs(3, 1)
    out, _ = run(Q, K, V)
    close(out, reference(Q, K, V)[0], "the output with G = 1")


@check(CHECKS, "mask", "the mask (True: may not look) is applied to every head")
def mask():
    Q, K, V = inputs(4, 2)
    padding = torch.zeros(B, 1, 1, T_K, dtype=torch.bool)
    padding[0, ..., -2:] = True
    out, weights = run(Q, K, V, padding)
    if differs(weights[0, ..., -2:], 0.0, 0.0).any():
        raise Mistake("weight on masked keys: fill the scores where mask is True with -inf "
                      "before the softmax")
    close(out, reference(Q, K, V, padding)[0], "the output with padding")


EXERCISE = Exercise(
    name="grouped_query",
    summary="grouped-query attention: H query heads over G key/value heads (Ainslie et al. "
            "2023)",
    defines=("MyGroupedAttention", "MyTransformer"),
    forbids=lambda: [(TransformerParts.SelfAttention, "weighted", "SelfAttention.weighted"),
                     (since_2017, "repeat_kv", "repeat_kv"),
                     (F, "scaled_dot_product_attention", "F.scaled_dot_product_attention")],
    checks=CHECKS, container="MyTransformer", base=TransformerPreLN,
    settings={"kv_heads": 2, "full_width_heads": True})
