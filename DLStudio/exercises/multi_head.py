"""Checks of the exercise `multi_head`: MyMultiHead.forward(x, mask)."""

import torch
import torch.nn.functional as F

from ..model.architecture import EncoderDecoderParts, TransformerParts
from ..model.batched_heads import BatchedHeads
from ..Transformers import TransformerFG
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
from .rigs import sees_future, standing_in, translator

CHECKS = []
B, T, M, H = 2, 5, 12, 3
BASE = TransformerParts.SelfAttention


def parts(full_width):
    return EncoderDecoderParts(vocab_en_size=5, vocab_es_size=5, max_seq_length=8,
                               embedding_size=M, full_width_heads=full_width)


def attention(full_width=False, seed=0):
    """The reference self-attention, whose weights the student's gets."""
    torch.manual_seed(fresh(seed))
    return BASE(None, parts(full_width), H).double()


def x(seed=0):
    return torch.randn(B, T, M, generator=torch.Generator().manual_seed(fresh(seed)),
                       dtype=torch.float64)


@question
def attention_output(module, full_width, weights, x, mask=None):
    sa = module.MyMultiHead(None, parts(full_width), H).double()
    sa.load_state_dict(weights)
    with student_code():
        return sa(x, mask)


def want(sa, x, mask=None):
    return sa.W_O(BASE.per_head(sa, x, x, mask))


def run(sa, x, mask=None):
    out = ask(attention_output, sa.full_width, sa.state_dict(), x, mask)
    return tensor(out, "the output", (B, T, M))


def causal():
    return torch.ones(T, T, dtype=torch.bool).triu(1)[None, None]        # (1, 1, T, T)


def which_heads_differ(got, expected, s):
    bad = differs(got, expected).any(dim=(0, 1)).nonzero().squeeze(1)
    return sorted({int(j) // s for j in bad})


@check(CHECKS, "sliced_heads", "head i reads slice i; outputs concatenated in head order")
def sliced_heads():
    sa, inputs = attention(), x()
    out, expected = run(sa, inputs), want(sa, inputs)
    if not same(out, expected):
        heads = which_heads_differ(out, expected, sa.qkv_size)
        swapped = sa.W_O(torch.cat([h(inputs[..., i * sa.qkv_size:(i + 1) * sa.qkv_size])
                                    for i, h in reversed(list(enumerate(sa.heads)))], -1))
        if same(out, swapped):
            raise Mistake("the heads' outputs are concatenated in reverse order: head 0's "
                          "output comes first")
        raise Mistake(f"the output columns of head(s) {heads} differ from the reference "
                      f"(tolerance 1e-9): head i must read x[..., i s_qkv:(i + 1) s_qkv] "
                      f"(s_qkv = {sa.qkv_size}) and its output goes to the same columns")


@check(CHECKS, "full_width_W_O", "full width: every head reads all of x, then W^O projects")
def full_width_w_o():
    sa, inputs = attention(full_width=True, seed=1), x(1)
    out = run(sa, inputs)
    concatenated = BASE.per_head(sa, inputs, inputs, None)
    if same(out, concatenated):
        raise Mistake("with full_width the output is the heads' concatenation: apply "
                      "self.W_O to it (Vaswani et al. 2017, sec. 3.2.2)")
    close(out, want(sa, inputs), "the full-width output", hint="W^O(concat(head_1(x), ..., "
          "head_H(x)))")


@check(CHECKS, "mask", "the mask reaches every head (a causal mask of (1, 1, T, T))")
def mask():
    sa, inputs = attention(seed=2), x(2)
    out = run(sa, inputs, causal())
    if same(out, want(sa, inputs)):
        raise Mistake("the output is the same with a causal mask as without: pass the mask "
                      "to every head", exhibit="no_causal_mask")
    close(out, want(sa, inputs, causal()), "the output with a causal mask")


@check(CHECKS, "in_a_model", "a TransformerFG of MyMultiHead: no position sees a later word")
def in_a_model():
    def asked(sa, x, mask=None):
        out = ask(attention_output, False, sa.state_dict(), x, mask)
        return tensor(out, "your attention's output", x.shape)
    model = standing_in(translator(seed=fresh(0), heads=H, embedding_size=M), BASE, asked)
    with torch.no_grad():
        sees_future(lambda src, targets: [model(src, tgt) for tgt in targets])


EXERCISE = Exercise(
    name="multi_head",
    summary="multi-head self-attention: split M into H slices, run the heads, concatenate, W^O",
    defines=("MyMultiHead", "MyTransformer"),
    forbids=lambda: [(BASE, name, f"the standard SelfAttention's {name}")
                     for name in ("forward", "attend", "per_head")]
    + [(BatchedHeads, "all_heads", "the standard SelfAttention's all_heads")]
    + [(F, "scaled_dot_product_attention", "F.scaled_dot_product_attention")],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
