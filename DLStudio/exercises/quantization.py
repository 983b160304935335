"""Checks of the exercise `quantization`: MyInt8 and MyInt4's quantize(W) and
dequantize(parts)."""

import torch

from ..model import quantize as reference
from ..Transformers import TransformerGPT
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    finite,
    fresh,
    question,
    same,
    student_code,
    tensor,
)

CHECKS = []
N, K, G = 6, 64, 32             # rows, columns, the int4 group


def matrix(seed, shift=0.0):
    """W (N, K), float64: rows of very different sizes (1e-3 .. 10), shifted by ``shift``."""
    g = torch.Generator().manual_seed(fresh(seed))
    sizes = 10 ** torch.linspace(-3, 1, N, dtype=torch.float64)
    return torch.randn(N, K, generator=g, dtype=torch.float64) * sizes[:, None] + shift


@question
def int8_parts(module, W):
    with student_code():
        return module.MyInt8(kernel="dequantize").quantize(W)


@question
def int8_back(module, W):
    with student_code():
        quantizer = module.MyInt8(kernel="dequantize")
        return quantizer.dequantize(quantizer.quantize(W))


@question
def int4_parts(module, W):
    with student_code():
        return module.MyInt4(group_size=G, kernel="dequantize").quantize(W)


@question
def int4_back(module, W):
    with student_code():
        quantizer = module.MyInt4(group_size=G, kernel="dequantize")
        return quantizer.dequantize(quantizer.quantize(W))


def parts_of(answer, names):
    if not isinstance(answer, dict) or not set(names) <= set(answer):
        raise Mistake(f"quantize returns a dict with {', '.join(repr(n) for n in names)}, "
                      f"got {type(answer).__name__}"
                      + (f" with {sorted(answer)}" if isinstance(answer, dict) else ""))
    return [answer[n] for n in names]


def int8_reference(W, per_tensor=False, toward_zero=False):
    top = W.abs().amax() if per_tensor else W.abs().amax(dim=1)
    scale = (top.clamp(min=1e-12) / 127).expand(len(W))
    q = W / scale[:, None]
    q = (q.trunc() if toward_zero else q.round()).clamp(-127, 127)
    return q * scale[:, None]


def int4_reference(W, zero_point=True, per_row=False):
    g = K if per_row else G
    Wg = W.reshape(N, K // g, g)
    low, high = Wg.amin(-1).clamp(max=0), Wg.amax(-1).clamp(min=0)
    scale = ((high - low) / 15).clamp(min=1e-12)
    zero = torch.round(-low / scale) if zero_point else torch.zeros_like(scale)
    q = (torch.round(Wg / scale[..., None]) + zero[..., None]).clamp(0, 15)
    return ((q - zero[..., None]) * scale[..., None]).reshape(N, K)


def round_trip(answer, what):
    return finite(tensor(answer, what, (N, K)), what)


@check(CHECKS, "int8_format", "int8: q holds integers of int8 in [-127, 127], one scale a row")
def int8_format():
    q, scale = parts_of(ask(int8_parts, matrix(0)), ("q", "scale"))
    q, scale = tensor(q, "q", (N, K)), tensor(scale, "scale")
    if q.dtype != torch.int8:
        raise Mistake(f"q is {q.dtype}: keep it as torch.int8 (.to(torch.int8) after "
                      "rounding), a byte a weight")
    if int(q.min()) < -127 or int(q.max()) > 127:
        raise Mistake(f"q lies in [{int(q.min())}, {int(q.max())}]: clamp it to [-127, 127]")
    if scale.numel() == 1:
        raise Mistake("one scale for the whole matrix: absmax is taken per output channel, a "
                      "scale (N,) for each row")
    tensor(scale, "scale", (N,))


@check(CHECKS, "int8_per_channel", "int8: each row has its own scale (a row of small "
                                   "weights keeps its precision)")
def int8_per_channel():
    W = matrix(1)
    got = round_trip(ask(int8_back, W), "dequantize(quantize(W))")
    if same(got, int8_reference(W, per_tensor=True), 1e-6 * float(W.abs().max())):
        raise Mistake("one scale for the whole matrix (per tensor): the row of the largest "
                      "weights sets it, and a row of weights 10^4 times smaller is rounded to "
                      "zero; take max |W| over each row (dim=1), a scale per output channel")
    close(got, int8_reference(W), "dequantize(quantize(W))", 1e-6 * float(W.abs().max()),
          "s_n = max_k |W_nk| / 127, q = round(W / s_n), W' = s_n q")


@check(CHECKS, "int8_rounding", "int8: to the nearest level, not toward zero (an error of "
                                "at most s / 2)")
def int8_rounding():
    W = matrix(2)
    got = round_trip(ask(int8_back, W), "dequantize(quantize(W))")
    tol = 1e-6 * float(W.abs().max())
    if same(got, int8_reference(W, toward_zero=True), tol):
        raise Mistake("q is rounded toward zero (.to(torch.int8) or trunc cuts the fraction "
                      "off): the error reaches a whole level s; torch.round first, and it is "
                      "at most s / 2")
    levels = W.abs().amax(dim=1, keepdim=True) / 127
    worst = ((got - W).abs() / levels).max()
    if not worst <= 0.5 + 1e-6:
        raise Mistake(f"the round trip is off by {float(worst):.3g} of a level: rounding to "
                      "the nearest level keeps it within half a level")
    close(got, int8_reference(W), "dequantize(quantize(W))", tol)


@check(CHECKS, "int4_format", "int4: q in [0, 15], a scale and a zero point per group of g")
def int4_format():
    q, scale, zero = parts_of(ask(int4_parts, matrix(3)), ("q", "scale", "zero"))
    q = tensor(q, "q", (N, K))
    if q.is_floating_point():
        raise Mistake(f"q is {q.dtype}: keep it as integers (torch.uint8)")
    if int(q.min()) < 0 or int(q.max()) > 15:
        raise Mistake(f"q lies in [{int(q.min())}, {int(q.max())}]: 4 bits hold 0 .. 15 "
                      "(clamp after adding the zero point)")
    if tensor(scale, "scale").numel() in (1, N):
        raise Mistake(f"scale has {scale.numel()} number(s): one per group of g = {G} "
                      f"numbers of a row, ({N}, {K // G}); a group's outlier then costs "
                      "its own group only")
    tensor(scale, "scale", (N, K // G))
    tensor(zero, "zero", (N, K // G))


@check(CHECKS, "int4_zero_point", "int4: the zero point lets the 16 levels cover a group "
                                  "that is not centred on zero")
def int4_zero_point():
    W = matrix(4, shift=0.3)                     # groups mostly positive, some negatives
    got = round_trip(ask(int4_back, W), "dequantize(quantize(W))")
    tol = 1e-6 * float(W.abs().max())
    if same(got, int4_reference(W, zero_point=False), tol) or not bool((got < 0).any()):
        raise Mistake("the zero point is dropped: negative weights are clamped to level 0 "
                      "and lost; q = clamp(round(W / s) + z, 0, 15) with z = round(-low / s), "
                      "and W' = s (q - z)")
    close(got, int4_reference(W), "dequantize(quantize(W))", tol,
          "a group's low = min(min, 0), high = max(max, 0), s = (high - low) / 15, the "
          "zero point z = round(-low / s); q = clamp(round(W / s) + z, 0, 15), W' = s (q - z)")


@check(CHECKS, "int4_groups", "int4: each group of g numbers of a row has its own scale")
def int4_groups():
    W = matrix(5)
    W[:, 0] *= 50                                # an outlier in each row's first group
    got = round_trip(ask(int4_back, W), "dequantize(quantize(W))")
    tol = 1e-6 * float(W.abs().max())
    if same(got, int4_reference(W, per_row=True), tol):
        raise Mistake("one scale and zero point for a whole row: the outlier of the first "
                      "group coarsens every group; cut each row into groups of "
                      "g = self.group_of(K) numbers, each with its own")
    close(got, int4_reference(W), "dequantize(quantize(W))", tol)


@question
def quantized_logits(module, ids, seed, kind):
    torch.manual_seed(seed)
    with student_code():
        gpt = tiny(module.MyTransformer)
        gpt.quantize(kind, kernel="dequantize")
        return gpt(ids)


def tiny(cls):
    from ..runtime.studio import DLStudio
    return cls(dl_studio=DLStudio(use_gpu=False, seed=None), sentences=["la casa", "el perro"],
               tokenizer="word", embedding_size=64, num_basic_decoders=1, num_atten_heads=2,
               full_width_heads=True, kv_heads=1, max_seq_length=16).eval()


@check(CHECKS, "in_a_model", "in a GPT: quantize('int8') and quantize('int4') give the "
                             "model's own logits")
def in_a_model():
    ids = torch.randint(2, 4, (2, 5), generator=torch.Generator().manual_seed(fresh(6)))
    seed = fresh(7)
    for kind in ("int8", "int4"):
        got = ask(quantized_logits, ids, seed, kind)
        torch.manual_seed(seed)
        gpt = tiny(TransformerGPT).quantize(kind, kernel="dequantize")
        with torch.no_grad():
            want = gpt(ids)
        close(tensor(got, f"the logits after quantize({kind!r})", want.shape), want,
              f"the logits after quantize({kind!r})", 1e-4 * float(want.abs().max()),
              "every Linear of the model is kept by your quantizer: its round trip is the "
              "weight the model computes with")


EXERCISE = Exercise(
    name="quantization",
    summary="Weights in 8 bits (absmax, per output channel) and 4 bits (group-wise, with a "
            "zero point): the round trip and its error",
    defines=("MyInt8", "MyInt4", "MyTransformer"),
    forbids=lambda: [(reference.Int8Quantizer, "quantize", "the model's Int8Quantizer.quantize"),
                     (reference.Int8Quantizer, "dequantize",
                      "the model's Int8Quantizer.dequantize"),
                     (reference.Int4Quantizer, "quantize", "the model's Int4Quantizer.quantize"),
                     (reference.Int4Quantizer, "dequantize",
                      "the model's Int4Quantizer.dequantize")],
    checks=CHECKS, container=None, base=TransformerGPT)
