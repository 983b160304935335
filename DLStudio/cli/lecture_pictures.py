"""The lecture's figures, drawn by the code itself: ``show_lr_schedule.py`` (the warm-up),
``show_positional_encoding.py`` (the position code) and ``compare_fg_preln.py`` (FG, FG
without its warm-up and PreLN trained for the same budget). Each script in
ExamplesTransformers/ is a few lines that call one of these; ``dlstudio <script>`` too.
"""

import csv
import os
import sys

from ..data import BUNDLED_ARCHIVE, load_archive
from ..runtime.distributed import DistributedError, single_process_only
from .common import (
    Parser,
    add_since_2017_arguments,
    resolve_archive,
)

__all__ = ["show_lr_schedule_main", "show_positional_encoding_main", "compare_fg_preln_main",
           "parse_run"]


def show_lr_schedule_main(argv=None):
    """``show_lr_schedule.py``: TransformerFG's warm-up, lr(step) = lr_mul * M^-0.5 *
    min(step^-0.5, step * warmup^-1.5), drawn for every step (lr_schedule.png)."""
    import torch

    from ..evaluation.visualize import plot_lr_schedule
    from ..Transformers import TransformerFG

    p = Parser(description="TransformerFG's warm-up schedule: the learning "
                                            "rate at every step.")
    p.add_argument("--embedding-size", type=int, default=256)
    p.add_argument("--num-warmup-steps", type=int, default=4000)
    p.add_argument("--lr-mul", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--out", default="lr_schedule.png")
    args = p.parse_args(argv)
    if min(args.embedding_size, args.num_warmup_steps, args.steps) < 1 or args.lr_mul <= 0:
        p.error("sizes and steps must be >= 1 and --lr-mul > 0")
    dummy = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    schedule = TransformerFG.ScheduledOptim(dummy, args.lr_mul, args.embedding_size,
                                            args.num_warmup_steps)
    peak = schedule.lr_at(args.num_warmup_steps)
    path = plot_lr_schedule(schedule.lr_at, args.steps, args.out,
                            f"warm-up schedule: M = {args.embedding_size}, warm-up "
                            f"{args.num_warmup_steps} steps, peak {peak:.2e}")
    print(f"peak learning rate {peak:.3e} at step {args.num_warmup_steps}; wrote {path}")
    return 0


def show_positional_encoding_main(argv=None):
    """``show_positional_encoding.py``: the sinusoidal code (positions x dimensions) and the
    cosine similarity of every pair of positions (positional_encoding.png)."""
    from ..evaluation.visualize import plot_positional_encoding
    from ..Transformers import TransformerFG

    p = Parser(description="The sinusoidal positional encoding as a picture, "
                                            "and how alike the positions are.")
    p.add_argument("--embedding-size", type=int, default=256)
    p.add_argument("--positions", type=int, default=10)
    p.add_argument("--base", type=float,
                   default=TransformerFG.EmbeddingsGenerator.positional_base)
    p.add_argument("--out", default="positional_encoding.png")
    args = p.parse_args(argv)
    if args.embedding_size < 2 or args.embedding_size % 2 or args.positions < 1:
        p.error("--embedding-size must be even and >= 2, --positions >= 1")
    pe = TransformerFG.EmbeddingsGenerator.sinusoids(args.positions, args.embedding_size,
                                                     args.base)
    path = plot_positional_encoding(pe, args.out, f"Sinusoidal positional encoding "
                                                  f"(M = {args.embedding_size}, base "
                                                  f"{args.base:g})")
    print(f"wrote {path}")
    return 0


# ---------------------------------------------------------------------------------------
# compare_fg_preln.py: FG, FG without its warm-up and PreLN, each for the same budget.
SWITCHES = ("dropout", "label_smoothing", "full_width_heads", "tie_embeddings",
            "learned_positions", "norm", "feed_forward", "positions", "kv_heads")
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
        elif isinstance(defaults[key], str):          # norm=rmsnorm, feed_forward=swiglu
            switches[key] = value
        elif key == "kv_heads":                       # kv_heads=1: a number of heads
            if not value.isdigit():
                raise ValueError(f"run {name!r}: kv_heads needs a whole number, as in kv_heads=1")
            switches[key] = int(value)
        else:
            try:
                switches[key] = float(value)
            except ValueError:
                raise ValueError(f"run {name!r}: {key} needs a number, as in {key}=0.1") from None
    return base, switches


def compare_fg_preln_main(argv=None):
    """``compare_fg_preln.py``: FG with and without warm-up and PreLN (and design switches)
    trained for the same budget on the same data; loss and held-out BLEU against steps and
    minutes (compare_fg_preln.png, .csv)."""
    from ..evaluation.visualize import plot_runs
    from ..runtime.studio import DLStudio
    from ..Transformers import TransformerFG, TransformerPreLN
    from .experiments import budget_run

    p = Parser(description="Is PreLN more stable but slower to converge? "
                                            "Does FG need its warm-up? What does each "
                                            "design switch buy? Train and see.")
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
    add_since_2017_arguments(p)
    p.add_argument("--runs", default="FG,FG-no-warmup,PreLN",
                   help="comma-separated runs: FG, FG-no-warmup or PreLN, each optionally "
                        "followed by :switch or :switch=value (switches: "
                        + ", ".join(SWITCHES) + ")")
    p.add_argument("--out", default="compare_fg_preln")
    p.add_argument("--results", metavar="FILE.json",
                   help="add each run's held-out figures to a result file "
                        "(docs/results/design_1000_steps.json)")
    args = p.parse_args(argv)
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
    corpus = load_archive(resolve_archive(args.archive), max_seq_length=10)
    peak = TransformerFG.ScheduledOptim(None, args.lr_mul, args.embedding_size,
                                        args.num_warmup_steps).lr_at(args.num_warmup_steps)
    setups = {"FG": (TransformerFG, args.num_warmup_steps, None),
              "FG-no-warmup": (TransformerFG, 0, peak),
              "PreLN": (TransformerPreLN, args.num_warmup_steps, args.preln_lr)}
    runs, sizes = {}, {}
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
        sizes[name] = sum(q.numel() for q in x.EncoderDecoder(x, enc, dec).parameters())
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
    if args.results:
        keep_runs(args, argv, runs, sizes)
    return 0


def keep_runs(args, argv, runs, sizes):
    """``--results``: each run's evaluations, with how they were made, added to the result
    file; a run is compared with the run it adds a switch to, where that ran too, else FG."""
    from .common.results import as_typed, record
    command = as_typed("ExamplesTransformers/compare_fg_preln.py",
                       sys.argv[1:] if argv is None else argv)
    for name, rows in runs.items():
        parent = name.rsplit(":", 1)[0]
        record(args.results, {
            "run": name, "change": name, "parameters": sizes[name],
            "seconds_per_step": round(60 * rows[-1]["minutes"] / max(rows[-1]["steps"], 1), 3)
            if rows else None,
            "evaluations": [{"steps": r["steps"], "minutes": round(r["minutes"], 2),
                             "bleu": round(r["bleu"], 2), "sacrebleu": round(r["sacrebleu"], 2)}
                            for r in rows],
            "compared_with": None if name == "FG" else parent if parent in runs and
            parent != name else "FG"}, command)
    print(f"runs added to {args.results}")
