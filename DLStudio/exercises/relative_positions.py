"""Checks of the exercise `relative_positions`: MyRelativePosition, one head's
Transformer-XL terms (W_R, u, v, the clipped offsets' sinusoids), in a GPT's heads."""

import torch

from ..model import relative_positions
from ..model.architecture import GPTParts
from ..model.relative_positions import RelativePosition, offsets
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
S, D = 4, 6                  # a head's width s_qkv and W_R's input width
TOL = 1e-9


def reference(state, Q, K, scale, clip, sign=1, clipped=True, first=None):
    """The terms written out with the model's arithmetic; ``sign`` -1 reverses the offset,
    ``clipped`` False reads past the table, ``first`` the first query's position other than
    T_k - T_q (for the mistakes to be recognised by)."""
    head = type("Ref", (RelativePosition,), {"clip": clip})(D, S).double()
    head.load_state_dict(state, strict=False)
    P = head.WR(head.R.double())
    T_q, T_k = Q.size(-2), K.size(-2)
    at = sign * offsets(T_q, T_k) if first is None else \
        torch.arange(first, first + T_q)[:, None] - torch.arange(T_k)[None, :]
    at = (at.clamp(-clip, clip) if clipped else at) + clip
    if not clipped and (at.min() < 0 or at.max() >= P.size(0)):
        return None
    by_offset = (Q + head.v) @ P.T
    positional = by_offset.gather(-1, at.expand(*by_offset.shape[:-1], at.size(-1)))
    return (positional + head.u[None] @ K.transpose(-2, -1)) * scale


def state_of(seed, zero_uv=False):
    g = torch.Generator().manual_seed(fresh(seed))
    u, v = (torch.zeros(S, dtype=torch.float64) for _ in range(2)) if zero_uv else (
        torch.randn(S, generator=g, dtype=torch.float64) for _ in range(2))
    return {"WR.weight": torch.randn(S, D, generator=g, dtype=torch.float64), "u": u, "v": v}


@question
def terms(module, state, Q, K, scale, clip):
    cls = type("Clipped", (module.MyRelativePosition,), {"clip": clip})
    with student_code():
        head = cls(D, S).double()
        missing = [n for n in ("WR", "u", "v") if not hasattr(head, n)]
        if missing:
            return f"MyRelativePosition has no {', '.join(missing)} (see the skeleton's names)"
        if len(head.R) != 2 * clip + 1:
            return (f"self.R has {len(head.R)} rows: it must hold the sinusoids of the "
                    f"offsets -clip .. clip, 2 clip + 1 = {2 * clip + 1} of them")
        head.load_state_dict(state, strict=False)
        try:
            return head(Q, K, scale)
        except (IndexError, RuntimeError) as e:
            return f"your forward raised {type(e).__name__}: {e}"


def run(state, Q, K, scale=0.5, clip=16):
    got = ask(terms, state, Q, K, scale, clip)
    if isinstance(got, str):
        raise Mistake(got + (" (an offset further than clip reads R(clip), row 2 clip of "
                             "self.R: clamp i - j to -clip .. clip)" if "raised" in got
                             else ""))
    return tensor(got, "forward(Q, K, scale)", (*Q.shape[:-1], K.size(-2)))


def qk(seed, T_q, T_k, lead=()):
    g = torch.Generator().manual_seed(fresh(seed))
    return (torch.randn(*lead, T_q, S, generator=g, dtype=torch.float64),
            torch.randn(*lead, T_k, S, generator=g, dtype=torch.float64))


@check(CHECKS, "offsets", "row i, column j reads W_R R(i - j) with the query's q_i + v")
def offsets_check():
    state, (Q, K) = state_of(0, zero_uv=True), qk(1, 6, 6)
    got, want = run(state, Q, K), reference(state, Q, K, 0.5, 16)
    if same(got, reference(state, Q, K, 0.5, 16, sign=-1)):
        raise Mistake("the offset's sign is reversed: query i and key j read R(i - j), the "
                      "query's position minus the key's (a key before the query: positive)")
    if same(got, want.transpose(-2, -1)):
        raise Mistake("rows and columns are swapped: row i is the query, column j the key")
    close(got, want, "the positional term q_i . W_R R(i - j)", TOL,
          "P = self.WR(self.R) holds W_R R(r) in row r + clip; score[i, j] = q_i . P[i - j + "
          "clip]")


@check(CHECKS, "u_and_v", "u . k_j and v . W_R R(i - j): the two learned vectors")
def u_and_v():
    state, (Q, K) = state_of(2), qk(3, 5, 5, (2,))
    got, want = run(state, Q, K), reference(state, Q, K, 0.5, 16)
    swapped = {**state, "u": state["v"], "v": state["u"]}
    if same(got, reference(swapped, Q, K, 0.5, 16)):
        raise Mistake("u and v are swapped: u goes with the keys (u . k_j), v with the "
                      "offsets (v . W_R R(i - j))")
    close(got, want, "the three terms with u and v", TOL,
          "(q_i + u) . k_j - q_i . k_j = u . k_j; and (q_i + v) . W_R R(i - j)")


@check(CHECKS, "clipping", "an offset further than clip reads R(clip) (or R(-clip))")
def clipping():
    state, (Q, K) = state_of(4), qk(5, 9, 9)
    got, want = run(state, Q, K, clip=2), reference(state, Q, K, 0.5, 2)
    unclipped = reference(state, Q, K, 0.5, 2, clipped=False)
    if unclipped is not None and same(got, unclipped):
        raise Mistake("offsets are not clipped: with clip 2, query 8 and key 0 (offset 8) read "
                      "R(2)")
    close(got, want, "the terms with clip 2 over 9 positions", TOL,
          "offset = (i - j).clamp(-self.clip, self.clip), then row offset + clip")


@check(CHECKS, "decoding", "queries are the last T_q of T_k positions (the cache's words first)")
def decoding():
    state, (Q, K) = state_of(6), qk(7, 1, 7)
    got, want = run(state, Q, K), reference(state, Q, K, 0.5, 16)
    if same(got, reference(state, Q, K, 0.5, 16, first=0)):
        raise Mistake("the newest query is taken as position 0: it is position T_k - T_q "
                      "(6 here), after the words the key/value cache holds")
    close(got, want, "the newest query's terms over 7 keys", TOL,
          "query row a sits at position T_k - T_q + a")


SIZES = dict(vocab_size=40, embedding_size=16, max_seq_length=16, num_basic_decoders=2,
             num_atten_heads=4, positions="relative")


@question
def model_logits(module, ids, cached, state):
    """A small GPT with MyRelativePosition in every head, given the reference's weights."""
    torch.manual_seed(0)
    model = type("Yours", (GPTParts,), {"RelativePosition": module.MyRelativePosition})(
        **SIZES).double().eval()
    with student_code(), torch.no_grad():
        heads = [h for layer in model.master_decoder.basic_decoder_arr
                 for h in layer.self_attention.heads]
        if len({id(h.relative.u) for h in heads}) < len(heads) or \
                len({id(h.relative.v) for h in heads}) < len(heads):
            return "shared"
        model.load_state_dict(state)
        if not cached:
            return model(ids)
        with model.decoding():
            return torch.stack([model.decode_newest(ids[:, :t + 1])
                                for t in range(ids.size(1))], 1)


@check(CHECKS, "in_a_model", "a GPT of your heads: each head its own u and v; the logits, "
       "with the cache too")
def in_a_model():
    ids = torch.randint(0, 40, (2, 10), generator=torch.Generator().manual_seed(fresh(8)))
    torch.manual_seed(0)
    model = GPTParts(**SIZES).double().eval()
    g = torch.Generator().manual_seed(fresh(9))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "relative" in name:
                p.normal_(generator=g)
        want = model(ids)
    for cached in (False, True):
        got = ask(model_logits, ids, cached, model.state_dict())
        if isinstance(got, str):
            raise Mistake("u and v are shared between heads: each head learns its own "
                          "(create them in __init__ as parameters of the instance)")
        what = "the logits while decoding with the cache" if cached else "the model's logits"
        close(tensor(got, what, tuple(want.shape)), want, what, 1e-6,
              "the queries are the last T_q of the T_k positions" if cached else "")


EXERCISE = Exercise(
    name="relative_positions",
    summary="relative positions in the score (Transformer-XL): W_R, u, v, clipped offsets",
    defines=("MyRelativePosition", "MyTransformer"),
    forbids=lambda: [(RelativePosition, "forward", "the model's RelativePosition.forward"),
                     (relative_positions, "relative_scores", "the model's relative_scores")],
    checks=CHECKS, container="MyTransformer", base=TransformerGPT,
    settings={"positions": "relative"})
