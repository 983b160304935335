"""Checks of the exercise `lora`: MyLoRA.reset_parameters, MyLoRA.delta(rows) and
MyLoRA.merged(W, rows)."""

import torch

from ..model import lora as reference
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
IN, OUT, RANK, ALPHA = 10, 6, 3, 12.0        # alpha / r = 4: a missing scale shows


def drawn(seed, square=False):
    """A (r, in), B (out, r), W (out, in) drawn from the seed (square: out = in)."""
    g = torch.Generator().manual_seed(fresh(seed))
    out = IN if square else OUT
    return (torch.randn(RANK, IN, generator=g, dtype=torch.float64),
            torch.randn(out, RANK, generator=g, dtype=torch.float64),
            torch.randn(out, IN, generator=g, dtype=torch.float64))


def built(module, out_size, A=None, B=None, in_size=IN):
    lora = module.MyLoRA(in_size, out_size, RANK, ALPHA).double()
    if A is not None:
        with torch.no_grad():
            lora.A.copy_(A)
            lora.B.copy_(B)
    return lora


@question
def fresh_weights(module, in_size, out_size):
    with student_code():
        lora = built(module, out_size, in_size=in_size)
    return lora.A, lora.B


@question
def delta_of(module, A, B, rows):
    lora = built(module, len(B), A, B)
    with student_code():
        return lora.delta(slice(*rows))


@question
def merged_of(module, A, B, W, rows):
    lora = built(module, len(B), A, B)
    with student_code():
        return lora.merged(W, slice(*rows))


@question
def adapted_logits(module, ids, seed):
    torch.manual_seed(seed)
    with student_code():
        gpt = tiny(module.MyTransformer)
        before = gpt(ids)
        gpt.add_lora(rank=2, alpha=4, targets=("WQ", "WV", "W_O"))
        at_start = gpt(ids)
        drawn_into(gpt, seed)
        return before, at_start, gpt(ids)


def drawn_into(gpt, seed):
    """Every LoRA's A and B drawn from the seed."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, _, lora, _ in gpt.lora_places():
            lora.A.copy_(torch.randn(lora.A.shape, generator=g))
            lora.B.copy_(torch.randn(lora.B.shape, generator=g))


def tiny(cls):
    from ..runtime.studio import DLStudio
    return cls(dl_studio=DLStudio(use_gpu=False, seed=None), sentences=["la casa", "el perro"],
               tokenizer="word", embedding_size=16, num_basic_decoders=1, num_atten_heads=2,
               full_width_heads=True, kv_heads=1, max_seq_length=16).eval()


@check(CHECKS, "zero_start", "B starts at zero and A at random: the model is unchanged "
                             "at step 0, yet B's gradient is not zero")
def zero_start():
    g = torch.Generator().manual_seed(fresh(0))
    in_size, out_size = (int(n) for n in torch.randint(8, 40, (2,), generator=g))
    A, B = ask(fresh_weights, in_size, out_size)
    A, B = tensor(A, "self.A", (RANK, in_size)), tensor(B, "self.B", (out_size, RANK))
    A, B = finite(A, "self.A"), finite(B, "self.B")
    if not bool((B == 0).all()):
        raise Mistake("B is not zero at the start: the adapted model is then another model "
                      "before it has learnt anything (B starts at zero, A at random)")
    if bool((A == 0).all()):
        raise Mistake("A is zero too: B's gradient is (the change's gradient) A^T = 0, and "
                      "neither ever moves; A starts at random (kaiming_uniform_)")
    if not (A.std() >= 1e-3 and A.abs().max() <= 1.0):
        raise Mistake(f"A's values lie in [{A.min():.3g}, {A.max():.3g}]: draw them with "
                      "nn.init.kaiming_uniform_(self.A, a=math.sqrt(5)), PEFT's choice")


@check(CHECKS, "scale", "the change is (alpha / r) B A")
def scale():
    A, B, _ = drawn(1)
    got = tensor(ask(delta_of, A, B, (None, None)), "delta()", (OUT, IN))
    if same(got, B @ A):
        raise Mistake("the alpha / r scale is missing: the change is self.scale * B @ A, so "
                      "that alpha, not the rank, sets how large it is")
    if same(got, (B @ A) * RANK / ALPHA):
        raise Mistake("the scale is r / alpha: it is alpha / r (self.scale)")
    close(got, B @ A * (ALPHA / RANK), "delta()", 1e-9, "self.scale * (self.B @ self.A)")


@check(CHECKS, "rows", "delta(rows) is the change's rows: B's rows times all of A")
def rows():
    A, B, _ = drawn(2)
    got = tensor(ask(delta_of, A, B, (2, 5)), "delta(slice(2, 5))", (3, IN))
    close(got, B[2:5] @ A * (ALPHA / RANK), "delta(slice(2, 5))", 1e-9,
          "the rows of B, then A whole: self.B[rows] @ self.A")


@check(CHECKS, "merge", "merged(W) is W + (alpha / r) B A, the right way round")
def merge():
    A, B, W = drawn(3, square=True)          # square: a transposed change fits, and shows
    got = tensor(ask(merged_of, A, B, W, (None, None)), "merged(W)", W.shape)
    change = B @ A * (ALPHA / RANK)
    if same(got, W + change.T):
        raise Mistake("A and B are transposed in the merge: W + (B A)^T; the change of W "
                      "(out x in) is B (out x r) times A (r x in)")
    if same(got, W):
        raise Mistake("merged(W) returns W unchanged: add self.delta(rows)")
    close(got, W + change, "merged(W)", 1e-9, "W + self.delta(rows)")
    A, B, W = drawn(4)
    got = tensor(ask(merged_of, A, B, W[1:4], (1, 4)), "merged(W[1:4], slice(1, 4))",
                 (3, IN))
    close(got, W[1:4] + change_rows(A, B, 1, 4), "merged(W rows 1..3, slice(1, 4))",
          1e-9, "W + self.delta(rows): the rows of the change that W's rows are")


def change_rows(A, B, start, stop):
    return B[start:stop] @ A * (ALPHA / RANK)


@check(CHECKS, "in_a_model", "in a GPT: unchanged at step 0, the model's own logits after")
def in_a_model():
    ids = torch.randint(2, 4, (2, 5), generator=torch.Generator().manual_seed(fresh(5)))
    seed = fresh(6)
    before, at_start, adapted = ask(adapted_logits, ids, seed)
    want = ask_reference(ids, seed)
    close(tensor(at_start, "the logits after add_lora"), tensor(before, "the logits"),
          "the logits right after add_lora", 1e-6,
          "B starts at zero: the adapted model is the base model until it learns")
    close(tensor(adapted, "the adapted logits", want.shape), want,
          "the logits with random B, batched heads", 1e-4,
          "each head reads its rows of the change: delta(rows), added by merged(W, rows)")


def ask_reference(ids, seed):
    torch.manual_seed(seed)
    gpt = tiny(TransformerGPT)
    gpt.add_lora(rank=2, alpha=4, targets=("WQ", "WV", "W_O"))
    drawn_into(gpt, seed)
    with torch.no_grad():
        return gpt(ids)


EXERCISE = Exercise(
    name="lora",
    summary="LoRA: W x + (alpha / r) B A x, B zero at the start, merged into W (Hu et al. "
            "2021)",
    defines=("MyLoRA", "MyTransformer"),
    forbids=lambda: [(reference.LoRA, "reset_parameters", "the model's LoRA.reset_parameters"),
                     (reference.LoRA, "delta", "the model's LoRA.delta"),
                     (reference.LoRA, "merged", "the model's LoRA.merged")],
    checks=CHECKS, container=None, base=TransformerGPT)
