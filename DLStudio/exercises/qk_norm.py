"""Checks of the exercise `qk_norm`: MyHead.forward with QK-norm (Qwen3's): each head's queries
and keys normalised by its attention's q_norm and k_norm, before the rotary turn."""

import torch

from ..model.architecture import GPTParts, TransformerParts, scaled_dot_product
from ..model.since_2017 import RMSNorm, RotaryEmbedding
from ..Transformers import TransformerGPT
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
TOL = 1e-6


def inputs(seed, shape=(B, T, D)):
    g = torch.Generator().manual_seed(fresh(seed))
    return torch.randn(*shape, generator=g, dtype=torch.float64) * 2


def head_weights(seed):
    """A head's W_Q, W_K, W_V and the two norms' gains (not all 1: the order matters)."""
    torch.manual_seed(fresh(seed))
    head = TransformerParts.AttentionHead(None, 10, D, 2).double()
    g = torch.Generator().manual_seed(fresh(seed) + 1)
    gains = torch.rand(2, D, generator=g, dtype=torch.float64) * 1.5 + 0.25
    return head.state_dict(), gains


def norms(gains):
    q_norm, k_norm = RMSNorm(D, 1e-6).double(), RMSNorm(D, 1e-6).double()
    with torch.no_grad():
        q_norm.weight.copy_(gains[0])
        k_norm.weight.copy_(gains[1])
    return q_norm, k_norm


def built(cls, weights, gains, rotary, normed=True):
    head = cls(None, 10, D, 2).double()
    head.load_state_dict(weights)
    head.rotary = RotaryEmbedding(D).double() if rotary else None
    q_norm, k_norm = norms(gains) if normed else (None, None)
    head.__dict__.update(q_norm=q_norm, k_norm=k_norm)      # as SelfAttention hands them
    return head


CAUSAL = torch.ones(T, T, dtype=torch.bool).triu(1)


@question
def head_output(module, weights, gains, x, rotary=True, memory=None, normed=True):
    """MyHead with these weights and norms on x (a causal mask), turned by a reference
    RotaryEmbedding (``rotary``); with ``memory``, as cross-attention calls it."""
    head = built(module.MyHead, weights, gains, rotary, normed)
    with student_code():
        if memory is not None:
            return head(x, mask=None, memory=memory)
        return head(x, mask=CAUSAL)


def reference(weights, gains, x, rotary=True, memory=None, normed=True):
    head = built(TransformerParts.AttentionHead, weights, gains, rotary, normed)
    with torch.no_grad():
        return TransformerParts.AttentionHead.forward(
            head, x, mask=None if memory is not None else CAUSAL, memory=memory)


def variant(weights, gains, x, q="q", k="k", v=False, after=False):
    """The head's arithmetic with a mistake: Q normalised by gain ``q`` ("q", "k" or None),
    K by ``k``, V normalised too (``v``), the norms after the turn (``after``)."""
    head = built(TransformerParts.AttentionHead, weights, gains, True)
    q_norm, k_norm = norms(gains)
    by = {"q": q_norm, "k": k_norm, None: lambda t: t}
    with torch.no_grad():
        Q, K, V = head.WQ(x), head.WK(x), head.WV(x)
        if not after:
            Q, K = by[q](Q), by[k](K)
        Q, K = head.rotary(Q), head.rotary(K)
        if after:
            Q, K = by[q](Q), by[k](K)
        V = by["k"](V) if v else V
        return scaled_dot_product(Q, K, V, CAUSAL)[0]


def theirs(weights, gains, x, **options):
    return tensor(ask(head_output, weights, gains, x, **options), "the head's output",
                  (B, T, D))


@check(CHECKS, "normalised", "queries by q_norm, keys by k_norm, values as they are")
def normalised():
    (weights, gains), x = head_weights(0), inputs(1)
    out = theirs(weights, gains, x)
    for q, k, v, what in ((None, None, False, "nothing is normalised: Q, K = self.q_norm(Q), "
                           "self.k_norm(K)"),
                          ("q", None, False, "the keys are not normalised: K = self.k_norm(K)"),
                          (None, "k", False, "the queries are not normalised: Q = "
                           "self.q_norm(Q)"),
                          ("q", "q", False, "the keys are normalised with q_norm: each has a "
                           "gain of its own, K = self.k_norm(K)"),
                          ("q", "k", True, "the values are normalised too: QK-norm bounds the "
                           "scores, so it touches the queries and keys only")):
        if same(out, variant(weights, gains, x, q, k, v), TOL):
            raise Mistake(what)
    close(out, reference(weights, gains, x), "the head's output", TOL,
          "Q, K = self.q_norm(WQ(x)), self.k_norm(WK(x)); turned; then the scores")


@check(CHECKS, "before_the_turn", "normalised before the rotary turn, as Qwen3 does")
def before_the_turn():
    (weights, gains), x = head_weights(2), inputs(3)
    out = theirs(weights, gains, x)
    if same(out, variant(weights, gains, x, after=True), TOL):
        raise Mistake("the norms come after the turn: normalise Q and K first, then turn them "
                      "(with gains that are not all 1 the order changes the scores)")
    close(out, reference(weights, gains, x), "the head's output", TOL)


@check(CHECKS, "scale_free", "W_Q and W_K ten times larger change nothing")
def scale_free():
    (weights, gains), x = head_weights(4), inputs(5)
    larger = {k: v * 10 if k.startswith(("WQ", "WK")) else v for k, v in weights.items()}
    out, out_larger = theirs(weights, gains, x), theirs(larger, gains, x)
    close(out_larger, out, "the output with W_Q, W_K ten times larger", 1e-5,
          "RMS-normalised queries and keys do not depend on the size of W_Q and W_K")
    close(out, reference(weights, gains, x), "the head's output", TOL)


@check(CHECKS, "without_the_switch", "with q_norm None (no qk_norm) the head is unchanged")
def without_the_switch():
    (weights, gains), x = head_weights(6), inputs(7)
    out = theirs(weights, gains, x, normed=False)
    close(out, reference(weights, gains, x, normed=False), "the output without qk_norm", TOL,
          "a model built without qk_norm gives its heads q_norm None: then normalise nothing")


@check(CHECKS, "cross_attention", "with memory: keys of memory normalised, nothing turned")
def cross_attention():
    (weights, gains), x, memory = head_weights(8), inputs(9), inputs(10, (B, T + 3, D))
    out = tensor(ask(head_output, weights, gains, x, False, memory), "the head's output with "
                 "memory", (B, T, D))
    if same(out, reference(weights, gains, x, False, memory, normed=False), TOL):
        raise Mistake("in cross-attention nothing is normalised: the queries (from x) and the "
                      "keys (from memory) are normalised there too")
    close(out, reference(weights, gains, x, False, memory), "the cross-attention output", TOL,
          "Q = q_norm(WQ(x)), K = k_norm(WK(memory)), V = WV(memory); nothing turned")


@question
def model_logits(module, ids):
    """A GPT of MyHead with qk_norm and rotary positions on ``ids``."""
    probe = module.MyHead(None, 10, D, 2).double()
    with student_code(), torch.no_grad():     # a forward not written yet says so here
        probe(torch.zeros(1, 2, D, dtype=torch.float64))
    torch.manual_seed(0)
    model = type("Yours", (GPTParts,), {"AttentionHead": module.MyHead})(**GPT_SIZES).double()
    with student_code(), torch.no_grad():
        return model(ids)


GPT_SIZES = dict(vocab_size=40, embedding_size=32, max_seq_length=16, num_basic_decoders=2,
                 num_atten_heads=4, positions="rope", norm="rmsnorm", full_width_heads=True,
                 kv_heads=2, qk_norm=True)


@check(CHECKS, "in_a_model", "a GPT of MyHead with qk_norm gives the model's logits")
def in_a_model():
    ids = torch.randint(0, 40, (2, 11), generator=torch.Generator().manual_seed(fresh(11)))
    got = tensor(ask(model_logits, ids), "the model's logits", (2, 11, 40))
    torch.manual_seed(0)
    model = GPTParts(**GPT_SIZES).double().eval()
    with torch.no_grad():
        close(got, model(ids), "the logits of a GPT of your head", 1e-6,
              "every layer's heads normalise their queries and keys, then turn them")


EXERCISE = Exercise(
    name="qk_norm",
    summary="QK-norm: each head's queries and keys normalised before the turn (Qwen3)",
    defines=("MyHead", "MyTransformer"),
    forbids=lambda: [(TransformerParts.AttentionHead, "forward", "AttentionHead.forward")],
    checks=CHECKS, container="MyTransformer", base=TransformerGPT)
