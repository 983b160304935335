#!/usr/bin/env python3
"""One attention call, forward and backward, in milliseconds: the readable
softmax(QK^T / sqrt(s_qkv)) V of `scaled_dot_product` against PyTorch's fused kernel
``F.scaled_dot_product_attention``, on the same Q, K, V and causal mask, per precision.

    python benchmarks/bench_attention.py                      # the lecture's shape, fp32 and bf16
    python benchmarks/bench_attention.py --lengths 10,64,256 --batch-size 32

This is the measurement behind the kernel rule of `SelfAttention.all_heads` (README,
Performance): the two kernels take turns on every repeat, so a drift of the machine's speed
touches both. The last column says which one the model's batched path calls for that
precision here (one pass of a SelfAttention layer, its calls to the fused kernel counted).
"""

import argparse
import os
import statistics
import sys
import time
from types import SimpleNamespace
from unittest import mock

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from DLStudio import TransformerFG  # noqa: E402
from DLStudio.cli import positive_int  # noqa: E402
from DLStudio.cli.common import Parser  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.runtime.precision import native_bf16  # noqa: E402
from DLStudio.Transformers import scaled_dot_product  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def lengths(text):
    """An argparse type: comma-separated positive sequence lengths."""
    try:
        out = [int(n) for n in text.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected lengths like 10,64,256, got {text!r}")
    return out


def kernels(mask):
    """{name: attention(Q, K, V)}, each as the model's batched path calls it."""
    return {"readable": lambda Q, K, V: scaled_dot_product(Q, K, V, mask)[0],
            "fused": lambda Q, K, V: F.scaled_dot_product_attention(Q, K, V, attn_mask=~mask)}


def time_kernels(args, T, dtype, device):
    """Median milliseconds of each kernel, forward and forward + backward, turn about."""
    g = torch.Generator().manual_seed(0)
    shape = (args.batch_size, args.num_atten_heads, T, args.qkv_size)
    Q, K, V = [torch.randn(shape, generator=g).to(device, dtype).requires_grad_()
               for _ in range(3)]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), 1)  # causal
    fns, times = kernels(mask), {}

    def forward(fn):
        with torch.no_grad():
            fn(Q, K, V)

    def forward_backward(fn):
        fn(Q, K, V).float().sum().backward()

    for i in range(args.warmup + args.repeats):
        for name, fn in fns.items():
            for part, step in (("forward", forward), ("forward+backward", forward_backward)):
                if device.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                step(fn)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                if i >= args.warmup:
                    times.setdefault((name, part), []).append(time.perf_counter() - start)
    return {key: 1e3 * statistics.median(t) for key, t in times.items()}


def model_calls(dtype, device):
    """"fused" or "readable": the kernel a SelfAttention layer calls under ``dtype`` here."""
    xformer = SimpleNamespace(embedding_size=8, max_seq_length=3, full_width_heads=False,
                              AttentionHead=TransformerFG.AttentionHead)
    layer = TransformerFG.SelfAttention(None, xformer, 2).to(device)
    with mock.patch.object(F, "scaled_dot_product_attention",
                           wraps=F.scaled_dot_product_attention) as fused, \
            torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
        layer(torch.randn(1, 3, 8, device=device))
    return "fused" if fused.called else "readable"


def main():
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--qkv-size", type=positive_int, default=64,
                   help="s_qkv, each head's width (embedding 256 / 4 heads in the lecture)")
    p.add_argument("--lengths", type=lengths, default=[10],
                   help="sequence lengths T, comma-separated (the lecture's is 10)")
    p.add_argument("--precisions", default="fp32,bf16",
                   help="comma-separated, of fp32 and bf16")
    p.add_argument("--repeats", type=positive_int, default=100)
    p.add_argument("--warmup", type=positive_int, default=10)
    args = p.parse_args()
    precisions = args.precisions.split(",")
    if not set(precisions) <= set(DTYPES):
        p.error(f"--precisions: expected fp32 and/or bf16, got {args.precisions!r}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"machine: {machine()}; {device}, native bf16: {native_bf16(device)}")
    print(f"Q, K, V: batch {args.batch_size}, {args.num_atten_heads} heads, s_qkv "
          f"{args.qkv_size}, causal mask; medians of {args.repeats} repeats after "
          f"{args.warmup}, the two kernels in turn")
    print(f"{'precision':>9} {'T':>5} {'part':>17} {'readable ms':>12} {'fused ms':>9} "
          f"{'fused/readable':>15}  the model calls")
    for precision in precisions:
        for T in args.lengths:
            ms = time_kernels(args, T, DTYPES[precision], device)
            calls = model_calls(DTYPES[precision], device)
            for part in ("forward", "forward+backward"):
                r, f = ms["readable", part], ms["fused", part]
                print(f"{precision:>9} {T:>5} {part:>17} {r:>12.3f} {f:>9.3f} {f / r:>15.2f}"
                      f"  {calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
