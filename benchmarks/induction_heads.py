#!/usr/bin/env python3
"""Induction heads forming, on a laptop: a 2-layer attention-only GPT of ours
(``feed_forward="none"``) trained on random tokens that repeat (each text: a start token,
then N random tokens, then the same N again). The first half cannot be predicted; the second
can, by finding the token's earlier copy and reading what came after it (Olsson et al. 2022).
Printed along training: the loss on the first half and on the second ("in-context": the
repeat's); it falls abruptly when the heads form (the phase change). Then the detector
(evaluation/interpret.head_scores) names the previous-token and induction heads, and
ablating the induction heads brings the in-context loss back up (ablating the others, as
many, does not).

    python benchmarks/induction_heads.py --results docs/results/induction_heads.json \\
        --picture docs/induction_heads.png                           # half a minute

Runs alone on the machine (the steps are counted, not the minutes: the curve is the same
on a busy machine, only slower).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from DLStudio.cli.common.flags import positive_float, positive_int  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.evaluation.interpret import (  # noqa: E402
    ablate,
    head_scores,
    in_context_loss,
    layer_hook,
    repeated_tokens,
)
from DLStudio.model.architecture import GPTParts  # noqa: E402
from DLStudio.quick import shrink  # noqa: E402

START = 0       # the start token; the random tokens are 1 .. V - 1


def attention_only_gpt(args):
    """The GPT of the experiment: attention only, pre-LN, heads with W^O (GPT-2's)."""
    return GPTParts(vocab_size=args.vocab, embedding_size=args.width,
                    max_seq_length=1 + 2 * args.half, num_basic_decoders=args.layers,
                    num_atten_heads=args.heads, feed_forward="none", positions=args.positions,
                    full_width_heads=True)


def training_texts(args, step):
    """A batch of texts: the start token, n random tokens, the same n again, then random
    tokens up to 1 + 2 ``half`` (n from half / 2 to half, drawn anew each step: the repeat
    is not always as far back, so that only its tokens, not its position, can find it)."""
    g = torch.Generator().manual_seed(step)
    n = int(torch.randint(args.half // 2, args.half + 1, (), generator=g))
    ids = repeated_tokens(args.vocab, n, batch=args.batch_size, seed=step, first=START, low=1)
    rest = torch.randint(1, args.vocab, (args.batch_size, 2 * (args.half - n)), generator=g)
    return torch.cat([ids, rest], dim=1)                                # (B, 1 + 2 half)


def train(gpt, args, report=print):
    """Adam on fresh repeated texts every step; every ``--every`` steps the two halves' loss
    on a fixed held-out batch. Returns the curve: [{step, first, second, seconds}]."""
    opt = torch.optim.AdamW(gpt.parameters(), lr=args.lr, weight_decay=0.0)
    held = repeated_tokens(args.vocab, args.half, batch=64, seed=10 ** 6, first=START, low=1)
    curve, start = [], time.perf_counter()
    for step in range(args.steps + 1):
        if step % args.every == 0 or step == args.steps:
            gpt.eval()
            with torch.no_grad():
                first, second = in_context_loss(gpt(held), held, args.half)
            curve.append({"step": step, "first": round(first, 4), "second": round(second, 4),
                          "seconds": round(time.perf_counter() - start, 1)})
            report(f"step {step:5d}  loss: first half {first:.3f}, second half (in-context) "
                   f"{second:.3f}")
            gpt.train()
        if step == args.steps:
            break
        ids = training_texts(args, step)
        logits = gpt(ids[:, :-1])                                          # (B, T - 1, V)
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    gpt.eval()
    return curve


def phase_change(curve):
    """The step where the in-context loss fell most between two measurements."""
    drops = [(a["second"] - b["second"], b["step"]) for a, b in zip(curve, curve[1:])]
    return max(drops)[1] if drops else 0


def ablation_rows(gpt, args, scores):
    """The in-context loss with the induction heads (score above ``--threshold``, or the
    best one) switched off together (zero ablation), and with each other head switched off
    alone."""
    ids = repeated_tokens(args.vocab, args.half, batch=64, seed=7, first=START, low=1)
    ranked = sorted(((v, layer, head) for layer, row in enumerate(scores["induction"].tolist())
                     for head, v in enumerate(row)), reverse=True)
    k = max(1, sum(v > args.threshold for v, _, _ in ranked))
    chosen = [(layer, head) for _, layer, head in ranked[:k]]
    others = [(layer, head) for _, layer, head in ranked[k:]]

    def loss_without(heads):
        hooks = []
        for layer, head in heads:
            def off(z, _name, head=head):
                z = z.clone()
                z[:, head] = 0
                return z
            hooks.append((layer_hook(gpt, layer, "self_attention.hook_z"), off))
        with torch.no_grad():
            return in_context_loss(gpt.run_with_hooks(ids, hooks=hooks), ids, args.half)[1]
    with torch.no_grad():
        intact = in_context_loss(gpt(ids), ids, args.half)[1]
        alone = {f"{layer}.{head}": round(in_context_loss(ablate(gpt, ids, layer, head), ids,
                                                           args.half)[1], 4)
                 for layer, head in others}             # one head off: interpret.ablate
    return {"induction_heads": chosen, "in_context_loss": round(intact, 4),
            "without_induction_heads": round(loss_without(chosen), 4),
            "without_each_other_head": alone}


def picture(curve, path, change):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = [r["step"] for r in curve]
    ax.plot(steps, [r["first"] for r in curve], label="first half (unpredictable)")
    ax.plot(steps, [r["second"] for r in curve], label="second half (in-context)")
    ax.axvline(change, color="grey", linestyle=":", label=f"largest drop (step {change})")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (nats a token)")
    ax.set_title("A 2-layer attention-only GPT: induction heads form")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--steps", type=positive_int, default=2000, help="optimiser steps")
    p.add_argument("--every", type=positive_int, default=50, help="steps between measurements")
    p.add_argument("--vocab", type=positive_int, default=64,
                   help="tokens (the start token included)")
    p.add_argument("--half", type=positive_int, default=20,
                   help="random tokens before the repeat")
    p.add_argument("--width", type=positive_int, default=64)
    p.add_argument("--layers", type=positive_int, default=2)
    p.add_argument("--heads", type=positive_int, default=4)
    p.add_argument("--positions", default="rope", choices=("rope", "learned", "sinusoidal"))
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--lr", type=positive_float, default=1e-3)
    p.add_argument("--threshold", type=float, default=0.4,
                   help="an induction score above which a head counts as one")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="write the curve, the heads and the ablation there")
    p.add_argument("--picture", metavar="FILE.png", default="", help="the curve's picture")
    args = shrink(p.parse_args(argv))     # DLSTUDIO_QUICK=1: tiny sizes
    torch.manual_seed(args.seed)
    print(f"machine: {machine()}")
    gpt = attention_only_gpt(args)
    print(f"a {args.layers}-layer attention-only GPT, {args.heads} heads, width {args.width},"
          f" {sum(p.numel() for p in gpt.parameters()):,} parameters; texts of "
          f"{args.half} random tokens (of {args.vocab - 1}) repeated")
    started = time.perf_counter()
    curve = train(gpt, args)
    seconds = time.perf_counter() - started
    change = phase_change(curve)
    ids = repeated_tokens(args.vocab, args.half, batch=64, seed=3, first=START, low=1)
    scores = head_scores(gpt, ids, args.half)
    print(f"\ntrained {args.steps} steps in {seconds:.0f} s; the in-context loss fell most "
          f"by step {change}")
    for kind in ("previous", "duplicate", "induction"):
        print(f"{kind}-token scores (layer x head):" if kind != "induction" else
              "induction scores (layer x head):")
        for layer, row in enumerate(scores[kind].tolist()):
            print(f"  layer {layer}: " + "  ".join(f"{v:.2f}" for v in row))
    rows = ablation_rows(gpt, args, scores)
    print(f"induction heads (layer, head): {rows['induction_heads']}")
    print(f"in-context loss {rows['in_context_loss']:.3f}; without the induction heads "
          f"{rows['without_induction_heads']:.3f}")
    print("without one other head (layer.head: in-context loss): " + ", ".join(
        f"{k}: {v:.3f}" for k, v in rows["without_each_other_head"].items()))
    result = {"seconds": round(seconds, 1),
              "sizes": {k: getattr(args, k) for k in ("steps", "vocab", "half", "width",
                                                      "layers", "heads", "positions",
                                                      "batch_size", "lr")},
              "curve": curve, "phase_change_step": change,
              "scores": {k: [[round(v, 3) for v in row] for row in t.tolist()]
                         for k, t in scores.items()}, **rows}
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        typed = sys.argv[1:] if argv is None else [str(a) for a in argv]
        record(args.results, result, as_typed("benchmarks/induction_heads.py", typed))
        print(f"a row added to {args.results}")
    if args.picture:
        picture(curve, args.picture, change)
        print(f"written: {args.picture}")
    return result


if __name__ == "__main__":
    main()
