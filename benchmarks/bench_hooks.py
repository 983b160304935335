#!/usr/bin/env python3
"""What the hook points cost a model that no one looks inside: the same model, in one run,
with its hook points as built (none registered), with every hook point taken out (each
replaced by a bare function that returns its input: the model as it ran before it had
them, but for one Python call a point), and caching every activation (run_with_cache's
cost, for comparison). Two kinds of work: training steps of the demo's GPT size, and greedy
generation at SmolLM2-135M's sizes (random weights), fp32, batch 1.

    python benchmarks/bench_hooks.py                           # about two minutes

The measurements alternate between the three, a repeat at a time, each of them first in
turn, and each row is the median of its repeats. The last lines say the ratios
machine-readably: HOOKS_TRAIN_RATIO and HOOKS_GENERATE_RATIO, the time with the hook points
as built over the time without them (1.00: no cost). Run alone on the machine.
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from bench_generate import our_model  # noqa: E402

from DLStudio.cli.common.flags import positive_int  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.evaluation.generation import generate  # noqa: E402
from DLStudio.model.architecture import GPTParts  # noqa: E402
from DLStudio.model.hooks import HookPoint  # noqa: E402
from DLStudio.quick import shrink  # noqa: E402

WAYS = ("hook points, none registered", "no hook points", "caching every activation")


class Bare:
    """A hook point taken out: a plain callable that returns its input."""
    active = False

    def __call__(self, x):
        return x


def take_out(model):
    """Every HookPoint of ``model`` replaced by a `Bare`; returns what `put_back` needs."""
    taken = []
    for module in model.modules():
        for name, point in list(vars(module).items()):
            if isinstance(point, HookPoint):
                setattr(module, name, Bare())
                taken.append((module, name, point))
    return taken


def put_back(taken):
    for module, name, point in taken:
        setattr(module, name, point)


def timed(model, way, work):
    """Seconds of ``work()`` with the model's hook points as ``way`` says."""
    taken = take_out(model) if way == WAYS[1] else []
    cache = {}
    hooks = [("*", lambda x, name: cache.__setitem__(name, x.detach()))] \
        if way == WAYS[2] else []
    try:
        with model.hooks(hooks):
            start = time.perf_counter()
            work()
            return time.perf_counter() - start
    finally:
        put_back(taken)


def compare(model, work, repeats):
    """{way: median seconds}, the ways alternating a repeat at a time after a warm-up."""
    for way in WAYS:
        timed(model, way, work)
    times = {way: [] for way in WAYS}
    for r in range(repeats):          # each way first in turn (none always after another)
        for way in WAYS[r % 3:] + WAYS[:r % 3]:
            times[way].append(timed(model, way, work))
    return {way: statistics.median(t) for way, t in times.items()}


def training(args):
    """The demo's GPT size: ``--train-steps`` AdamW steps on random batches."""
    torch.manual_seed(0)
    gpt = GPTParts(vocab_size=1000, embedding_size=args.train_width, max_seq_length=64,
                   num_basic_decoders=args.train_layers, num_atten_heads=4)
    opt = torch.optim.AdamW(gpt.parameters(), lr=1e-4)
    ids = torch.randint(2, 1000, (args.batch_size, 48), generator=torch.Generator()
                        .manual_seed(0))

    def work():
        for _ in range(args.train_steps):
            loss, n = gpt.loss(ids)
            opt.zero_grad()
            (loss / n).backward()
            opt.step()
    return gpt, work


def generation(args):
    gpt = our_model(args, None, torch.float32)
    prompt = torch.randint(2, args.vocab, (1, args.prompt), generator=torch.Generator()
                           .manual_seed(0))

    def work():
        with torch.inference_mode():
            generate(gpt, prompt, max_new_tokens=args.new, end_ids=())
    return gpt, work


def smollm2(args):
    sizes = (args.layers, args.width, args.heads, args.kv_heads, args.ffn, args.vocab)
    return " (SmolLM2-135M's sizes)" if sizes == (30, 576, 9, 3, 1536, 49152) else ""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--train-steps", type=positive_int, default=10,
                   help="training steps a measurement")
    p.add_argument("--train-width", type=positive_int, default=128,
                   help="the trained GPT's M (the demo's)")
    p.add_argument("--train-layers", type=positive_int, default=2)
    p.add_argument("--batch-size", type=positive_int, default=32, help="of training")
    p.add_argument("--layers", type=positive_int, default=30, help="the generating GPT's N")
    p.add_argument("--width", type=positive_int, default=576, help="its M")
    p.add_argument("--heads", type=positive_int, default=9)
    p.add_argument("--kv-heads", type=positive_int, default=3)
    p.add_argument("--ffn", type=positive_int, default=1536, help="SwiGLU's hidden width")
    p.add_argument("--vocab", type=positive_int, default=49152)
    p.add_argument("--prompt", type=positive_int, default=16, help="prompt tokens")
    p.add_argument("--new", type=positive_int, default=32, help="new tokens (greedy)")
    p.add_argument("--repeats", type=positive_int, default=5, help="timed runs of each way")
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes
    if args.width % args.heads or args.heads % args.kv_heads:
        p.error("--heads must divide --width, and --kv-heads must divide --heads")
    print(f"machine: {machine()}")
    ratios = {}
    for kind, build, unit in (("training", training, "steps/s"),
                              ("generation", generation, "tokens/s")):
        model, work = build(args)
        points = len(model.hook_points())
        seconds = compare(model, work, args.repeats)
        amount = args.train_steps if kind == "training" else args.new
        what = (f"GPT M={args.train_width}, {args.train_layers} layers, batch "
                f"{args.batch_size} x 47 tokens" if kind == "training" else
                f"GPT M={args.width}, {args.layers} layers{smollm2(args)}, prompt "
                f"{args.prompt}, {args.new} new tokens, fp32, batch 1")
        print(f"\n{kind}: {what}; {points} hook points; median of {args.repeats}")
        print(f"| {'way':30} | {unit:>9} | {'time / no hook points':>21} |")
        print(f"|{'-' * 32}|{'-' * 11}|{'-' * 23}|")
        for way in WAYS:
            print(f"| {way:30} | {amount / seconds[way]:9.2f} | "
                  f"{seconds[way] / seconds[WAYS[1]]:21.3f} |")
        ratios[kind] = seconds[WAYS[0]] / seconds[WAYS[1]]
    print(f"\nHOOKS_TRAIN_RATIO {ratios['training']:.3f}")
    print(f"HOOKS_GENERATE_RATIO {ratios['generation']:.3f}")
    return ratios


if __name__ == "__main__":
    main()
