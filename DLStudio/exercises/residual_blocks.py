"""Checks of the exercise `residual_blocks`: MyEncoderLayer.forward, post-LN and pre-LN."""

import torch

from ..model import architecture
from ..model.architecture import EncoderDecoderParts, TransformerParts
from ..Transformers import TransformerFG
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
B, T, M, H = 2, 6, 8, 2
BASE = TransformerParts.BasicEncoder


def parts(norm_first, dropout=0.0):
    return EncoderDecoderParts(vocab_en_size=5, vocab_es_size=5, max_seq_length=T,
                               embedding_size=M, norm_first=norm_first, dropout=dropout)


def layer(norm_first, seed=0, dropout=0.0):
    """The reference layer, whose weights the student's gets."""
    torch.manual_seed(fresh(seed))
    enc = BASE(None, parts(norm_first, dropout), H).double()
    enc.self_attention.fused = False
    for norm in (enc.norm1, enc.norm2):          # LayerNorms that are not the identity
        norm.weight.data.uniform_(0.5, 1.5)
        norm.bias.data.uniform_(-0.5, 0.5)
    return enc


def x(seed=0):
    return torch.randn(B, T, M, generator=torch.Generator().manual_seed(fresh(seed)),
                       dtype=torch.float64) * 3


@question
def layer_output(module, norm_first, dropout, weights, inputs, mask=None, seed=None):
    """MyEncoderLayer with these weights on the inputs (``seed``: in training, the random
    state its dropout starts from)."""
    enc = module.MyEncoderLayer(None, parts(norm_first, dropout), H).double()
    enc.self_attention.fused = False
    enc.load_state_dict(weights)
    if seed is not None:
        enc.train()
        torch.manual_seed(seed)
    with student_code():
        return enc(inputs, mask)


def run(enc, inputs, mask=None, seed=None):
    out = ask(layer_output, enc.norm_first, enc.dropout.p, enc.state_dict(), inputs, mask,
              seed)
    return tensor(out, "the layer's output", (B, T, M))


def variants(enc, inputs, mask=None):
    """What the usual mistakes compute: LayerNorm on the other side of the residual."""
    sa, ff, n1, n2 = enc.self_attention, enc.feed_forward, enc.norm1, enc.norm2
    y = inputs + n1(sa(inputs, mask))
    outside = y + n2(ff(y))                               # x + norm(sub(x))
    z = n1(inputs + sa(n1(inputs), mask))
    both = n2(z + ff(n2(z)))                              # norm(x + sub(norm(x)))
    return {"x + norm(sublayer(x))": outside, "norm(x + sublayer(norm(x)))": both}


def compare(enc, inputs, name):
    out, want = run(enc, inputs), BASE.forward(enc, inputs)
    if same(out, want):
        return
    right = "x + sublayer(norm(x))" if enc.norm_first else "norm(x + sublayer(x))"
    enc.norm_first = not enc.norm_first
    other = BASE.forward(enc, inputs)
    enc.norm_first = not enc.norm_first
    if same(out, other):
        raise Mistake(f"with norm_first={enc.norm_first} your layer computes the "
                      f"{'post' if enc.norm_first else 'pre'}-LN block: LayerNorm is on the "
                      f"wrong side of the residual ({name} is {right})")
    for formula, value in variants(enc, inputs).items():
        if same(out, value):
            raise Mistake(f"your layer computes {formula}: LayerNorm is on the wrong side of "
                          f"the residual ({name} is {right})")
    close(out, want, f"the {name} output", hint="self-attention then feed-forward, each in "
          "its residual connection")


@check(CHECKS, "post_ln", "norm_first False: x = norm(x + sublayer(x)) (Vaswani, sec. 3.1)")
def post_ln():
    compare(layer(False), x(), "post-LN")


@check(CHECKS, "pre_ln", "norm_first True: x = x + sublayer(norm(x)) (Xiong et al., Fig. 1b)")
def pre_ln():
    compare(layer(True, seed=1), x(1), "pre-LN")


@check(CHECKS, "order", "self-attention first, then the feed-forward network")
def order():
    enc, inputs = layer(False, seed=2), x(2)
    out = run(enc, inputs)
    swapped = enc.norm2(inputs + enc.feed_forward(inputs))
    swapped = enc.norm1(swapped + enc.self_attention(swapped, None))
    if same(out, swapped):
        raise Mistake("the feed-forward network runs before self-attention: attention "
                      "comes first (Vaswani et al. 2017, Fig. 1)")
    close(out, BASE.forward(enc, inputs), "the output")


@check(CHECKS, "mask", "the mask reaches the self-attention")
def mask():
    enc, inputs = layer(True, seed=3), x(3)
    pad = torch.zeros(B, 1, 1, T, dtype=torch.bool)
    pad[0, ..., -2:] = True
    out = run(enc, inputs, pad)
    if same(out, BASE.forward(enc, inputs)):
        raise Mistake("the output is the same with a padding mask as without: pass the mask "
                      "to self.self_attention", exhibit="no_padding_mask")
    close(out, BASE.forward(enc, inputs, pad), "the output with a padding mask")


@check(CHECKS, "dropout", "dropout on each sublayer's output, in training only")
def dropout():
    enc = layer(False, seed=4, dropout=0.5).train()
    inputs = x(4)
    out = run(enc, inputs, seed=fresh(5))
    torch.manual_seed(fresh(5))
    close(out, BASE.forward(enc, inputs), "the output in training with dropout 0.5",
          hint="self.dropout on the sublayer's output, before it is added to x")


EXERCISE = Exercise(
    name="residual_blocks",
    summary="an encoder layer: self-attention and feed-forward in residuals, post-LN and pre-LN",
    defines=("MyEncoderLayer", "MyTransformer"),
    forbids=lambda: [(BASE, "forward", "the standard BasicEncoder's forward"),
                     (architecture, "residual", "the model's residual function")],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
