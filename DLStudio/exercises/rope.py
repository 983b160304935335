"""Checks of the exercise `rope`: MyRotary.forward(x, offset) and MyHead.forward, which
turns the queries and keys (never the values) with it."""

import torch

from ..model.architecture import TransformerParts, scaled_dot_product
from ..model.since_2017 import RotaryEmbedding
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
B, T, D = 2, 7, 8           # a head's width d = s_qkv
TOL = 1e-6                  # the angles may be computed in float32, as the model's are


def inputs(seed=0, shape=(B, T, D)):
    g = torch.Generator().manual_seed(fresh(seed))
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def reference(x, offset=0, base=10000.0, scaling=None):
    return RotaryEmbedding(D, base, scaling).double()(x, offset)


def turned_by(x, angle_of):
    """x with pair i (2i, 2i+1) of position m turned by angle_of(m, i): the reference's
    arithmetic written out, for the mistakes to be recognised by."""
    out = x.clone()
    for m in range(x.size(-2)):
        for i in range(D // 2):
            a = torch.tensor(angle_of(m, i), dtype=x.dtype)
            even, odd = x[..., m, 2 * i], x[..., m, 2 * i + 1]
            out[..., m, 2 * i] = even * a.cos() - odd * a.sin()
            out[..., m, 2 * i + 1] = even * a.sin() + odd * a.cos()
    return out


@question
def turned(module, x, offset=0, base=10000.0, factor=None):
    scaling = {"rope_type": "linear", "factor": factor} if factor else None
    rotary = module.MyRotary(D, base, scaling).double()
    with student_code():
        return rotary(x, offset) if offset else rotary(x)


def run(x, offset=0, base=10000.0, factor=None):
    return tensor(ask(turned, x, offset, base, factor), "the output", x.shape)


@check(CHECKS, "shape", "(..., T, d) -> (..., T, d), for a batch of heads too")
def shape():
    x = inputs(0, (B, 3, T, D))                   # (B, H, T, d), as the batched path calls it
    close(run(x)[:, 1], run(x[:, 1]), "head 1 turned with the others", TOL,
          "turn each row of the last two axes (positions, numbers) alike for every head")


@check(CHECKS, "relative", "scores of turned queries and keys depend only on the offset")
def relative():
    q, k = inputs(1), inputs(2)
    scores = [run(q, shift) @ run(k, shift).transpose(-2, -1) for shift in (0, 5)]
    if not same(scores[0], scores[1], TOL):
        raise Mistake("moving every word 5 positions on changed the scores q . k: each pair "
                      "must be turned as a rotation, (x_2i cos - x_2i+1 sin, x_2i sin + "
                      "x_2i+1 cos), the same angle for both numbers of the pair")
    if same(scores[0], q @ k.transpose(-2, -1), TOL):
        raise Mistake("nothing was turned: position m turns pair i by m theta_i")


@check(CHECKS, "pairs", "pair i is numbers 2i and 2i+1, turned by m theta_i, in their place")
def pairs():
    x = inputs(3)
    out = run(x)
    # the halves layout (rotate_half): pair i is (i, i + d/2), turned by m theta_i; as our
    # neighbours' layout of the numbers reordered 0, d/2, 1, d/2 + 1, ... and put back
    order = torch.arange(D).view(2, -1).t().reshape(-1)
    if same(out, reference(x[..., order])[..., torch.argsort(order)], TOL):
        raise Mistake("this is the halves layout (rotate_half, as in Hugging Face's Llama): "
                      "pair i is (i, i + d/2) there; here a pair is two neighbours, (2i, "
                      "2i+1), as in Su et al. eq. 34")
    if same(out, turned_by(x, lambda m, i: -m * 10000.0 ** (-2 * i / D)), TOL):
        raise Mistake("turned the wrong way: x'_2i = x_2i cos(m theta) - x_2i+1 sin(m theta)")
    close(out, reference(x), "the output", TOL,
          "pair i of position m: (x_2i cos(m theta_i) - x_2i+1 sin(m theta_i), x_2i "
          "sin(m theta_i) + x_2i+1 cos(m theta_i)), theta_i = base^(-2i/d)")


@check(CHECKS, "base", "theta_i = base^(-2i/d), with the base it was built with")
def base():
    x = inputs(4)
    out = run(x, base=500.0)
    if same(out, reference(x, base=10000.0), TOL):
        raise Mistake("the base is always 10000: turn by self.theta, the module's own "
                      "frequencies (this one was built with base 500)")
    close(out, reference(x, base=500.0), "the output with base 500", TOL,
          "theta_i = self.theta[i], the frequencies the module was built with")


@check(CHECKS, "scaled", "theta_i: the module's own frequencies, also when scaled")
def scaled():
    x = inputs(13)
    out = run(x, factor=4.0)
    if same(out, reference(x), TOL):
        raise Mistake("the frequencies were computed afresh from self.base: a model that reads "
                      "a longer context than it was trained on (a Llama 3 folder) scales "
                      "them; turn by self.theta[i], the module's own")
    close(out, reference(x, scaling={"rope_type": "linear", "factor": 4.0}),
          "the output with frequencies scaled by 1/4", TOL, "theta_i = self.theta[i]")


@check(CHECKS, "offset", "offset: the first row's position (the words in the cache)")
def offset():
    x = inputs(5)
    out = run(x[:, 3:], 3)
    if same(out, run(x[:, 3:]), TOL):
        raise Mistake("offset is ignored: while decoding with the cache, the newest word is "
                      "at position offset (the words before it), not at 0")
    if same(out, turned_by(x[:, 3:], lambda m, i: (3 + (T - 4 - m)) * 10000.0 ** (-2 * i / D)),
             TOL):
        raise Mistake("positions are counted from the wrong end: row m is at offset + m")
    close(out, reference(x)[:, 3:], "rows 3.. turned with offset 3", TOL,
          "row m of x is at position offset + m")


class Known(torch.nn.Module):
    """A rotary whose answers the grader computed: each of the head's Q, K and V on the
    check's inputs, as the model's rotary turns it (the model's RotaryEmbedding is withheld
    where the student's code runs; their own rotary is checked on its own)."""

    def __init__(self, pairs):
        super().__init__()
        self.pairs = pairs

    def forward(self, t, offset=0):
        for given, turned in self.pairs:
            if given.shape == t.shape and torch.allclose(given, t, rtol=0, atol=1e-12):
                return turned.clone()
        raise ValueError("self.rotary was given something other than the head's Q, K or V "
                         "(WQ(x), WK(x) or WV(x), as they are): turn Q and K as they come")


def known(h, x):
    """What a Known rotary answers for head ``h`` on ``x``."""
    with torch.no_grad():
        return [(t, reference(t)) for t in (h.WQ(x), h.WK(x), h.WV(x))]


@question
def head_output(module, weights, x, pairs, memory=None):
    """MyHead with these weights on x, given a Known rotary of these ``pairs`` (or None: a
    cross-attention head, which has none); with ``memory``, as cross-attention calls it."""
    h = module.MyHead(None, 10, D, 2).double()
    h.load_state_dict(weights)
    h.rotary = Known(pairs) if pairs else None
    with student_code():
        if memory is not None:
            return h(x, mask=None, memory=memory)
        return h(x, mask=torch.ones(T, T, dtype=torch.bool).triu(1))


def head_weights(seed):
    torch.manual_seed(fresh(seed))
    return TransformerParts.AttentionHead(None, 10, D, 2).double()


def attention(h, x, turn_q, turn_k, turn_v):
    rope = RotaryEmbedding(D).double()
    Q, K, V = h.WQ(x), h.WK(x), h.WV(x)
    Q, K, V = (rope(t) if on else t for t, on in ((Q, turn_q), (K, turn_k), (V, turn_v)))
    return scaled_dot_product(Q, K, V, torch.ones(T, T, dtype=torch.bool).triu(1))[0]


@check(CHECKS, "queries_and_keys", "the head turns Q and K with self.rotary, never V")
def queries_and_keys():
    h, x = head_weights(6), inputs(7)
    out = tensor(ask(head_output, h.state_dict(), x, known(h, x)), "the head's output",
                 (B, T, D))
    with torch.no_grad():
        if same(out, attention(h, x, True, True, True), TOL):
            raise Mistake("the values are turned too: rotary positions go into the scores "
                          "(Q and K) only; V carries the words' content, as it is")
        for q, k, what in ((False, True, "the queries are"), (True, False, "the keys are"),
                           (False, False, "nothing is")):
            if same(out, attention(h, x, q, k, False), TOL):
                raise Mistake(f"{what} not turned: Q, K = self.rotary(Q), self.rotary(K)")
        close(out, attention(h, x, True, True, False), "the head's output")


@check(CHECKS, "no_rotary", "with self.rotary None (cross-attention) the head is unchanged")
def no_rotary():
    h, x = head_weights(8), inputs(9)
    out = tensor(ask(head_output, h.state_dict(), x, None), "the head's output", (B, T, D))
    with torch.no_grad():
        close(out, attention(h, x, False, False, False), "the output without rotary", TOL,
              "cross-attention heads have rotary None: then turn nothing")


@check(CHECKS, "cross_attention", "with memory (cross-attention): K and V of memory, unturned")
def cross_attention():
    h, x, memory = head_weights(10), inputs(11), inputs(12, (B, T + 3, D))
    out = tensor(ask(head_output, h.state_dict(), x, None, memory), "the head's output with "
                 "memory", (B, T, D))
    with torch.no_grad():
        Q, K, V = h.WQ(x), h.WK(memory), h.WV(memory)
        if same(out, scaled_dot_product(Q, h.WK(x), h.WV(x))[0], TOL):
            raise Mistake("memory is ignored: in cross-attention the keys and values come "
                          "from memory (the encoder's output), the queries from x")
        close(out, scaled_dot_product(Q, K, V)[0], "the cross-attention output", TOL,
              "Q = WQ(x), K = WK(memory), V = WV(memory); nothing turned")


EXERCISE = Exercise(
    name="rope",
    summary="rotary positions: queries and keys turned by m theta_i (Su et al. 2021)",
    defines=("MyRotary", "MyHead", "MyTransformer"),
    forbids=lambda: [(RotaryEmbedding, "forward", "the model's RotaryEmbedding.forward"),
                     (TransformerParts.AttentionHead, "forward", "AttentionHead.forward")],
    checks=CHECKS, container="MyTransformer", base=TransformerPreLN,
    settings={"positions": "rope"})
