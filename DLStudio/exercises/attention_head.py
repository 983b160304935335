"""Checks of the exercise `attention_head`: MyHead.forward(x, mask, memory)."""

import torch
import torch.nn.functional as F

from ..model import architecture
from ..model.architecture import TransformerParts
from ..Transformers import TransformerFG
from .attention import causal, reference
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
from .rigs import sees_future, standing_in, translator

CHECKS = []
B, T_Q, T_K, S = 2, 5, 6, 4
BASE = TransformerParts.AttentionHead


def head(seed=0):
    """The reference head: the checker chooses the weights, and the student's head gets
    them."""
    torch.manual_seed(fresh(seed))
    return BASE(None, 10, S, 2).double()


def x_and_memory(seed=0):
    g = torch.Generator().manual_seed(fresh(seed))
    return (torch.randn(B, T_Q, S, generator=g, dtype=torch.float64),
            torch.randn(B, T_K, S, generator=g, dtype=torch.float64))


@question
def head_output(module, weights, x, mask=None, memory=None, record=False, size=S):
    """MyHead (s_qkv ``size``) with these weights on x: its output (and, ``record``: the
    weights it kept)."""
    h = module.MyHead(None, 10, size, 2).double()
    h.load_state_dict(weights)
    if record:
        h.record_attention, h.attention_weights = True, None
    with student_code():
        out = h(x, mask=mask, memory=memory)
    return (out, getattr(h, "attention_weights", None)) if record else out


def run(h, x, mask=None, memory=None, record=False):
    return ask(head_output, h.state_dict(), x, mask=mask, memory=memory, record=record)


def want(h, x, mask=None, memory=None, scale=True):
    kv = x if memory is None else memory
    return reference(h.WQ(x), h.WK(kv), h.WV(kv), mask, scale)


def unscaled(got, h, x, mask=None, memory=None, weights=False):
    """A Mistake if ``got`` is what the head gives without 1/sqrt(s_qkv)."""
    if same(got, want(h, x, mask, memory, scale=False)[1 if weights else 0]):
        raise Mistake("the scores are not divided by sqrt(s_qkv) (Vaswani et al. 2017, "
                      "eq. 1)", exhibit="no_scaling")


@check(CHECKS, "shape", "x (B, T_q, s_qkv) -> (B, T_q, s_qkv)")
def shape():
    x, _ = x_and_memory()
    tensor(run(head(), x), "the head's output", (B, T_Q, S))


@check(CHECKS, "projections", "queries, keys and values through W_Q, W_K, W_V; 1/sqrt(s_qkv)")
def projections():
    h, (x, _) = head(), x_and_memory(1)
    out = tensor(run(h, x), "the head's output", (B, T_Q, S))
    unscaled(out, h, x)
    if same(out, reference(x, x, x)[0]):
        raise Mistake("the output is attention over x itself: apply W_Q, W_K and W_V "
                      "(self.WQ(x), ...) first")
    close(out, want(h, x)[0], "the head's output", hint="it should be "
          "softmax(W_Q x (W_K x)^T / sqrt(s_qkv)) W_V x")


@check(CHECKS, "mask", "a causal mask: no query looks at a later word")
def mask():
    h, (x, _) = head(), x_and_memory(2)
    out = tensor(run(h, x, mask=causal(T_Q)), "the head's output", (B, T_Q, S))
    if same(out, want(h, x)[0]):
        raise Mistake("the output is the same with a causal mask as without: the mask is not "
                      "applied", exhibit="no_causal_mask")
    unscaled(out, h, x, causal(T_Q))
    close(out, want(h, x, causal(T_Q))[0], "the output with a causal mask",
          hint="fill the scores with -inf where the mask is True, before the softmax")


@check(CHECKS, "cross_attention", "with memory, keys and values come from the memory")
def cross_attention():
    h, (x, memory) = head(), x_and_memory(3)
    pad = torch.zeros(B, 1, T_K, dtype=torch.bool)
    pad[0, :, -2:] = True
    out = tensor(run(h, x, mask=pad, memory=memory), "the output with memory", (B, T_Q, S))
    unscaled(out, h, x, pad, memory)
    close(out, want(h, x, pad, memory)[0], "the output with memory", hint="queries from x, "
          "keys and values from memory (T_k positions)")


@check(CHECKS, "attention_maps", "hands its weights (B, T_q, T_k) to self.keep_weights")
def attention_maps():
    h, (x, _) = head(), x_and_memory(4)
    _, kept = run(h, x, mask=causal(T_Q), record=True)
    if kept is None:
        raise Mistake("no weights were kept: call self.keep_weights(weights) in forward, "
                      "so that attention maps can show this head")
    unscaled(kept, h, x, causal(T_Q), weights=True)
    close(kept, want(h, x, causal(T_Q))[1], "the kept weights")


@check(CHECKS, "in_a_model", "a TransformerFG of MyHead: no position sees a later word")
def in_a_model():
    def asked(h, x, mask=None, memory=None):
        out = ask(head_output, h.state_dict(), x, mask=mask, memory=memory, size=h.qkv_size)
        return tensor(out, "your head's output", x.shape)
    model = standing_in(translator(seed=fresh(0)), BASE, asked)
    with torch.no_grad():
        sees_future(lambda src, targets: [model(src, tgt) for tgt in targets])


EXERCISE = Exercise(
    name="attention_head",
    summary="one attention head: W_Q, W_K, W_V, scaling by 1/sqrt(s_qkv), the mask, memory",
    defines=("MyHead", "MyTransformer"),
    forbids=lambda: [(TransformerParts.AttentionHead, "forward", "the standard head's forward"),
                     (architecture, "scaled_dot_product", "the model's scaled_dot_product"),
                     (F, "scaled_dot_product_attention", "F.scaled_dot_product_attention")],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
