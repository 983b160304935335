#!/usr/bin/env python3
"""Is PreLN more stable but slower to converge? Does FG need its warm-up? What does each
design switch buy? Train and see.

    python3 compare_fg_preln.py --archive ../datasets/en_es_synthetic_8_20000.tar.gz --minutes 3
    python3 compare_fg_preln.py --archive data/en_es_xformer_8_90000.tar.gz --minutes 30 --every 5

Trains, on the same data, for the same budget each (--minutes of training time, or --steps
optimiser steps, which stays fair when the machine is busy):
    FG with warm-up            the lecture's recipe (ScheduledOptim)
    FG-no-warmup               Adam at the schedule's peak rate from the first step
    PreLN                      Adam at --preln-lr, no warm-up
and plots loss and held-out BLEU against steps and against minutes on one figure
(compare_fg_preln.png), with the table in compare_fg_preln.csv. Designs switched on by the
flags (--dropout, --label-smoothing, --full-width-heads, ...) apply to every run; a run can
also change one for itself, after a colon, to measure what that switch does:

    --runs "FG,FG:full_width_heads,FG:tie_embeddings,FG:learned_positions,FG:dropout=0"
"""
import argparse
import csv
import os
import sys

from DLStudio import DLStudio, TransformerFG, TransformerPreLN
from DLStudio.datasets import BUNDLED_ARCHIVE, load_archive
from DLStudio.distributed import DistributedError, single_process_only
from DLStudio.experiments import budget_run
from DLStudio.visualize import plot_runs

SWITCHES = ("dropout", "label_smoothing", "full_width_heads", "tie_embeddings",
            "learned_positions")
BASES = ("FG", "FG-no-warmup", "PreLN")


def parse_run(name, defaults):
    """ "FG:tie_embeddings:dropout=0" -> ("FG", switches for that run)."""
    base, *changes = name.strip().split(":")
    if base not in BASES:
        raise ValueError(f"run {name!r}: starts with {base!r}; use one of {', '.join(BASES)}")
    switches = dict(defaults)
    for change in changes:
        key, _, value = change.partition("=")
        if key not in SWITCHES:
            raise ValueError(f"run {name!r}: unknown switch {key!r}; the switches are "
                             + ", ".join(SWITCHES))
        if isinstance(defaults[key], bool):
            switches[key] = value.lower() not in ("0", "false", "off", "no") if value else True
        else:
            try:
                switches[key] = float(value)
            except ValueError:
                raise ValueError(f"run {name!r}: {key} needs a number, as in {key}=0.1") from None
    return base, switches


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", default=BUNDLED_ARCHIVE)
    p.add_argument("--minutes", type=float, default=3.0, help="training time for each run")
    p.add_argument("--every", type=float, default=0.5, help="minutes between evaluations")
    p.add_argument("--steps", type=int, default=None,
                   help="budget in optimiser steps instead of minutes (then --every counts "
                        "steps too)")
    p.add_argument("--embedding-size", type=int, default=128)
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--num-atten-heads", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-warmup-steps", type=int, default=400)
    p.add_argument("--lr-mul", type=float, default=1.0)
    p.add_argument("--preln-lr", type=float, default=5e-4)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--full-width-heads", action="store_true")
    p.add_argument("--tie-embeddings", action="store_true")
    p.add_argument("--learned-positions", action="store_true")
    p.add_argument("--runs", default="FG,FG-no-warmup,PreLN",
                   help="comma-separated runs: FG, FG-no-warmup or PreLN, each optionally "
                        "followed by :switch or :switch=value (switches: "
                        + ", ".join(SWITCHES) + ")")
    p.add_argument("--out", default="compare_fg_preln")
    args = p.parse_args()
    try:
        single_process_only("compare_fg_preln.py")
    except DistributedError as e:
        p.error(str(e))
    if args.minutes <= 0 or args.every <= 0 or (args.steps is not None and args.steps <= 0):
        p.error("--minutes, --steps and --every must be > 0")
    defaults = {name: getattr(args, name) for name in SWITCHES}
    try:
        specs = {name: parse_run(name, defaults) for name in args.runs.split(",")}
    except ValueError as e:
        p.error(str(e))
    budget, unit = (args.steps, "steps") if args.steps else (args.minutes, "minutes")
    corpus = load_archive(args.archive, max_seq_length=10)
    peak = TransformerFG.ScheduledOptim(None, args.lr_mul, args.embedding_size,
                                        args.num_warmup_steps).lr_at(args.num_warmup_steps)
    setups = {"FG": (TransformerFG, args.num_warmup_steps, None),
              "FG-no-warmup": (TransformerFG, 0, peak),
              "PreLN": (TransformerPreLN, args.num_warmup_steps, args.preln_lr)}
    runs = {}
    for name, (base, switches) in specs.items():
        cls, warmup, lr = setups[base]
        dls = DLStudio(use_gpu=True, batch_size=args.batch_size, epochs=100_000, seed=0,
                       learning_rate=lr or 1e-4)
        x = cls(dl_studio=dls, corpus=corpus, embedding_size=args.embedding_size,
                num_warmup_steps=warmup, lr_mul=args.lr_mul, save_checkpoints=False,
                **switches)
        enc = cls.MasterEncoder(dls, x, args.num_layers, args.num_atten_heads)
        dec = cls.MasterDecoderWithMasking(dls, x, args.num_layers, args.num_atten_heads)
        rate = f"lr {lr:.2e}" if lr else f"warm-up {warmup}, peak {peak:.2e}"
        print(f"== {name} ({rate}; " + ", ".join(f"{k} {v}" for k, v in switches.items())
              + ")", flush=True)
        runs[name] = budget_run(x, enc, dec, budget, args.every, unit=unit, report=lambda r: print(
            f"   {r['minutes']:6.2f} min  step {r['steps']:6d}  loss {r['loss']:.3f}  "
            f"BLEU {r['bleu']:6.2f}", flush=True))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "compare_fg_preln.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run", "minutes", "steps", "loss", "bleu", "sacrebleu"])
        for name, rows in runs.items():
            for r in rows:
                writer.writerow([name, r["minutes"], r["steps"], f"{r['loss']:.4f}",
                                 f"{r['bleu']:.2f}", f"{r['sacrebleu']:.2f}"])
    path = plot_runs(runs, os.path.join(args.out, "compare_fg_preln.png"),
                     f"{os.path.basename(args.archive)}, {budget:g} {unit} each")
    w = max(len(n) for n in runs) + 2
    print(f"{'run':<{w}}{'steps':>7}{'minutes':>9}{'loss':>8}{'BLEU':>8}{'sacreBLEU':>10}")
    for n, rows in runs.items():
        r = rows[-1]
        print(f"{n:<{w}}{r['steps']:>7}{r['minutes']:>9.1f}{r['loss']:>8.3f}{r['bleu']:>8.2f}"
              f"{r['sacrebleu']:>10.2f}")
    print("final held-out BLEU: " + ", ".join(f"{n} {rows[-1]['bleu']:.2f}"
                                              for n, rows in runs.items() if rows))
    print(f"wrote {path} and {args.out}/compare_fg_preln.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
