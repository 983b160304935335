"""Checks of the exercise `residual_blocks`: MyEncoderLayer.forward, post-LN and pre-LN."""

import torch

from ..model import architecture
from ..model.architecture import EncoderDecoderParts, TransformerParts
from ..Transformers import TransformerFG
from .checking import Exercise, Mistake, check, close, same, student_code, tensor

CHECKS = []
B, T, M, H = 2, 6, 8, 2
BASE = TransformerParts.BasicEncoder


def layer(module, norm_first, seed=0):
    parts = EncoderDecoderParts(vocab_en_size=5, vocab_es_size=5, max_seq_length=T,
                                embedding_size=M, norm_first=norm_first)
    torch.manual_seed(seed)
    enc = module.MyEncoderLayer(None, parts, H).double()
    enc.self_attention.fused = False
    for norm in (enc.norm1, enc.norm2):          # LayerNorms that are not the identity
        norm.weight.data.uniform_(0.5, 1.5)
        norm.bias.data.uniform_(-0.5, 0.5)
    return enc


def x(seed=0):
    return torch.randn(B, T, M, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64) * 3


def run(enc, inputs, mask=None):
    with student_code():
        return tensor(enc(inputs, mask), "the layer's output", (B, T, M))


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
def post_ln(module):
    compare(layer(module, False), x(), "post-LN")


@check(CHECKS, "pre_ln", "norm_first True: x = x + sublayer(norm(x)) (Xiong et al., Fig. 1b)")
def pre_ln(module):
    compare(layer(module, True, seed=1), x(1), "pre-LN")


@check(CHECKS, "order", "self-attention first, then the feed-forward network")
def order(module):
    enc, inputs = layer(module, False, seed=2), x(2)
    out = run(enc, inputs)
    swapped = enc.norm2(inputs + enc.feed_forward(inputs))
    swapped = enc.norm1(swapped + enc.self_attention(swapped, None))
    if same(out, swapped):
        raise Mistake("the feed-forward network runs before self-attention: attention "
                      "comes first (Vaswani et al. 2017, Fig. 1)")
    close(out, BASE.forward(enc, inputs), "the output")


@check(CHECKS, "mask", "the mask reaches the self-attention")
def mask(module):
    enc, inputs = layer(module, True, seed=3), x(3)
    pad = torch.zeros(B, 1, 1, T, dtype=torch.bool)
    pad[0, ..., -2:] = True
    out = run(enc, inputs, pad)
    if same(out, BASE.forward(enc, inputs)):
        raise Mistake("the output is the same with a padding mask as without: pass the mask "
                      "to self.self_attention", exhibit="no_padding_mask")
    close(out, BASE.forward(enc, inputs, pad), "the output with a padding mask")


@check(CHECKS, "dropout", "dropout on each sublayer's output, in training only")
def dropout(module):
    parts = EncoderDecoderParts(vocab_en_size=5, vocab_es_size=5, max_seq_length=T,
                                embedding_size=M, dropout=0.5)
    torch.manual_seed(4)
    enc = module.MyEncoderLayer(None, parts, H).double().train()
    enc.self_attention.fused = False
    inputs = x(4)
    torch.manual_seed(5)
    out = run(enc, inputs)
    torch.manual_seed(5)
    close(out, BASE.forward(enc, inputs), "the output in training with dropout 0.5",
          hint="self.dropout on the sublayer's output, before it is added to x")


EXERCISE = Exercise(
    name="residual_blocks",
    summary="an encoder layer: self-attention and feed-forward in residuals, post-LN and pre-LN",
    defines=("MyEncoderLayer", "MyTransformer"),
    forbids=lambda: [(BASE, "forward", "the standard BasicEncoder's forward"),
                     (architecture, "residual", "the model's residual function")],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
