"""Checks of the exercise `t5_bias`: MyT5Bias, T5's bucketed relative bias (the bucket of
each offset, both ways in an encoder and causal in a decoder, exact then log-spaced), its
table's numbers for the queries the last of the keys, and one table a stack."""

import math

import torch

from ..model import relative_positions
from ..model.architecture import EncoderDecoderParts
from ..model.relative_positions import T5Bias
from ..Transformers import TransformerGPT
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    fresh,
    question,
    student_code,
    tensor,
)

CHECKS = []
H = 3


def reference_buckets(distance, bidirectional, n=32, m=128, exact_shift=0, log_in=torch.float32):
    """The buckets written out (``exact_shift``, for the mistakes: the log-spaced buckets
    moved by one; ``log_in``: the logarithm's dtype, either is right)."""
    bucket = torch.zeros_like(distance)
    if bidirectional:
        n //= 2
        bucket = bucket + (distance > 0).long() * n
        distance = distance.abs()
    else:
        distance = (-distance).clamp(min=0)
    e = n // 2
    far = e + exact_shift + (torch.log(distance.clamp(min=1).to(log_in) / e)
                             / math.log(m / e) * (n - e)).long()
    return bucket + torch.where(distance < e, distance, far.clamp(max=n - 1))


@question
def buckets_of(module, distance, bidirectional, n, m):
    cls = type("Sized", (module.MyT5Bias,), {"num_buckets": n, "max_distance": m})
    with student_code():
        bias = cls(H, bidirectional)
        return bias.buckets(distance)


def student_buckets(distance, bidirectional, n=32, m=128):
    got = ask(buckets_of, distance, bidirectional, n, m)
    got = tensor(got, "buckets(distance)", tuple(distance.shape))
    if got.dtype.is_floating_point:
        raise Mistake(f"buckets(distance) gives {got.dtype}: buckets are whole numbers "
                      "(torch.long), to index the table")
    return got.long()


def agrees(got, distance, bidirectional, n=32, m=128, **mistake):
    """Whether ``got`` is the reference's buckets (the logarithm in float32 or float64)."""
    wants = [reference_buckets(distance, bidirectional, n, m, log_in=dtype, **mistake)
             for dtype in (torch.float32, torch.float64)]
    return bool(((got == wants[0]) | (got == wants[1])).all())


def distances(seed, far=300):
    g = torch.Generator().manual_seed(fresh(seed))
    return torch.cat([torch.arange(-20, 21), torch.randint(-far, far + 1, (200,), generator=g)])


@check(CHECKS, "near", "a near offset is its own bucket; keys after the query in the upper half")
def near():
    g = torch.Generator().manual_seed(fresh(7))
    d = torch.cat([torch.arange(-7, 8), torch.randint(-15, 16, (20,), generator=g)])
    got = student_buckets(d, True)
    if agrees(got, d, False):
        raise Mistake("the encoder's buckets are not bidirectional: a key after the query "
                      "(j - i > 0) must get a bucket of its own, num_buckets // 2 + its "
                      "distance; only a causal decoder folds them to 0")
    if not agrees(got, d, True):
        raise Mistake(f"near offsets j - i = -7 .. 7 should give "
                      f"{reference_buckets(d, True)[:15].tolist()}, got {got[:15].tolist()}",
                      "a distance under n // 2 (n: a side's buckets) is its own bucket")


@check(CHECKS, "causal", "a decoder's buckets: keys before only, every bucket for them")
def causal():
    d = distances(1)
    got = student_buckets(d, False)
    if agrees(got, d, True):
        raise Mistake("the decoder's buckets are bidirectional: with bidirectional False "
                      "every bucket is for keys before the query (distance -(j - i)), a key "
                      "after it counts as distance 0")
    if not agrees(got, d, False):
        bad = (got != reference_buckets(d, False)).nonzero()[0].item()
        raise Mistake(f"offset j - i = {d[bad].item()} in a causal decoder: bucket "
                      f"{reference_buckets(d, False)[bad].item()}, got {got[bad].item()}")


@check(CHECKS, "log_spaced", "far offsets in logarithmic buckets up to max_distance, then "
       "the last")
def log_spaced():
    for n, m, seed in ((32, 128, 2), (16, 64, 3), (8, 20, 4)):
        d = distances(seed, far=3 * m)
        got = student_buckets(d, True, n, m)
        for shift in (1, -1):
            if agrees(got, d, True, n, m, exact_shift=shift):
                raise Mistake(f"the log-spaced buckets are off by {shift:+d}: the first far "
                              "distance, e = n // 2, is bucket e + floor(log(e / e) ...) = e")
        if not agrees(got, d, True, n, m):
            want = reference_buckets(d, True, n, m)
            bad = (got != want).nonzero()[0].item()
            raise Mistake(f"with num_buckets {n} and max_distance {m}, offset j - i = "
                          f"{d[bad].item()}: bucket {want[bad].item()}, got "
                          f"{got[bad].item()}", "e + floor(log(d / e) / log(m / e) * (n - "
                          "e)), at most n - 1 (n: the side's buckets)")


@question
def bias_of(module, table, bidirectional, T_q, T_k):
    with student_code():
        bias = module.MyT5Bias(H, bidirectional).double()
        bias.table.weight.data.copy_(table)
        return bias(T_q, T_k)


@check(CHECKS, "bias", "the table's numbers, heads in dimension 1, the queries the last T_q")
def bias_check():
    g = torch.Generator().manual_seed(fresh(5))
    table = torch.randn(32, H, generator=g, dtype=torch.float64)
    for T_q, T_k in ((6, 6), (1, 9), (3, 9)):
        i = torch.arange(T_k - T_q, T_k)[:, None]
        want = table[reference_buckets(torch.arange(T_k)[None, :] - i, True)] \
            .permute(2, 0, 1)[None]
        got = ask(bias_of, table, True, T_q, T_k)
        got = tensor(got, f"forward({T_q}, {T_k})", (1, H, T_q, T_k))
        if T_q < T_k:
            first = table[reference_buckets(torch.arange(T_k)[None, :] -
                                            torch.arange(T_q)[:, None], True)]
            if torch.equal(got, first.permute(2, 0, 1)[None]):
                raise Mistake("the queries are taken from position 0: they are the last T_q "
                              f"of the T_k positions (row 0 is position {T_k - T_q})")
        close(got, want, f"forward({T_q}, {T_k})", 0, "self.table(buckets) is (T_q, T_k, H):"
              " permute to (H, T_q, T_k), then a batch dimension of 1")


SIZES = dict(vocab_en_size=30, vocab_es_size=30, max_seq_length=16, embedding_size=12,
             positions="t5")


@question
def tables_of(module, encoders, decoders):
    """How the heads of a model of the student's class see their tables."""
    with student_code():
        parts = type("Yours", (EncoderDecoderParts,), {"T5Bias": module.MyT5Bias})(**SIZES)
        model = parts.encoder_decoder(encoders, decoders, H)
    out = {}
    for stack, layers in (("encoder", model.encoder.basic_encoder_arr),
                          ("decoder", model.decoder.basic_decoder_arr)):
        owned = getattr(getattr(model, stack), "position_bias", None)
        seen = {id(h.t5.bias) for layer in layers for h in layer.self_attention.heads
                if getattr(h, "t5", None) is not None}
        out[stack] = {"owned": owned is not None,
                      "one": len(seen) == 1 and owned is not None and id(owned) in seen,
                      "tables": len(seen),
                      "bidirectional": getattr(owned, "bidirectional", None)}
    return out


@check(CHECKS, "shared", "one table a stack, held by the stack, every layer's heads reading it")
def shared():
    layers = torch.randint(2, 5, (2,), generator=torch.Generator().manual_seed(fresh(8)))
    seen = ask(tables_of, *layers.tolist())
    for stack, both_ways in (("encoder", True), ("decoder", False)):
        s = seen[stack]
        if s["tables"] > 1:
            raise Mistake(f"the {stack}'s layers have {s['tables']} tables: one table serves "
                          "every layer of a stack (make one in share, then hand each layer's "
                          "heads that one)")
        if not s["owned"] or not s["one"]:
            raise Mistake(f"the {stack}'s table is not stack.position_bias, or its heads do "
                          "not read it: head.t5 = T5Head(stack.position_bias, h)")
        if s["bidirectional"] is not both_ways:
            raise Mistake(f"the {stack}'s table has bidirectional={s['bidirectional']}: "
                          "share passes the stack's own (encoder True, decoder False) to it")


@question
def model_logits(module, src, tgt, state, cached):
    torch.manual_seed(0)
    parts = type("Yours", (EncoderDecoderParts,), {"T5Bias": module.MyT5Bias})(**SIZES)
    with student_code(), torch.no_grad():
        model = parts.encoder_decoder(2, 2, H).double().eval()
        model.load_state_dict(state)
        if not cached:
            return model(src, tgt)
        memory, mask = model.encode(src)
        with model.decoding():
            return torch.stack([model.decode_newest(tgt[:, :t + 1], memory, mask)
                                for t in range(tgt.size(1))], 1)


@check(CHECKS, "in_a_model", "a translation model of your class: its logits, with the cache too")
def in_a_model():
    g = torch.Generator().manual_seed(fresh(6))
    src, tgt = torch.randint(2, 30, (2, 9), generator=g), torch.randint(2, 30, (2, 7),
                                                                        generator=g)
    torch.manual_seed(0)
    model = EncoderDecoderParts(**SIZES).encoder_decoder(2, 2, H).double().eval()
    with torch.no_grad():
        for stack in (model.encoder, model.decoder):
            stack.position_bias.table.weight.normal_(generator=g)
        want = model(src, tgt)
    for cached in (False, True):
        got = ask(model_logits, src, tgt, model.state_dict(), cached)
        what = "the logits while decoding with the cache" if cached else "the model's logits"
        close(tensor(got, what, tuple(want.shape)), want, what, 1e-6,
              "the newest query is position T_k - T_q" if cached else "")


EXERCISE = Exercise(
    name="t5_bias",
    summary="T5's bucketed relative bias: the buckets, the table, one table a stack",
    defines=("MyT5Bias", "MyTransformer"),
    forbids=lambda: [(T5Bias, "buckets", "the model's T5Bias.buckets"),
                     (T5Bias, "forward", "the model's T5Bias.forward"),
                     (T5Bias, "share", "the model's T5Bias.share"),
                     (relative_positions, "t5_buckets", "the model's t5_buckets")],
    checks=CHECKS, container="MyTransformer", base=TransformerGPT,
    settings={"positions": "t5"})
