#!/usr/bin/env python3
"""Held-out BLEU against minutes of training: "BLEU after N minutes on this machine" as a
command, not a claim.

    python benchmarks/bleu_vs_time.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz \\
        --variant FG --minutes 30 --every 5
    python benchmarks/bleu_vs_time.py ... --steps 2000 --every 500 --precision bf16

Trains one model for a wall-clock budget and, every --every minutes of training, translates
the whole held-out split (greedy) and scores it (the evaluation time is not counted as
training time, and is reported apart). Prints a table, writes it as CSV and plots it.
"""

import csv
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from DLStudio import DLStudio, TransformerFG, TransformerPreLN  # noqa: E402
from DLStudio.cli import (  # noqa: E402
    archive_or_usage,
    existing_file,
    nonnegative_float,
    positive_float,
    positive_int,
)
from DLStudio.cli.common import Parser  # noqa: E402
from DLStudio.cli.experiments import budget_run, machine  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE  # noqa: E402


def main():
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", default=BUNDLED_ARCHIVE, type=existing_file)
    p.add_argument("--variant", choices=("FG", "PreLN"), default="FG")
    p.add_argument("--minutes", type=positive_float, default=30.0)
    p.add_argument("--every", type=positive_float, default=5.0, help="minutes between evaluations")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="budget in optimiser steps instead of minutes (then --every counts "
                        "steps too): the fair budget for comparing settings of unequal speed")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16", "auto"), default="fp32",
                   help="of training (evaluation is fp32)")
    p.add_argument("--embedding-size", type=positive_int, default=256)
    p.add_argument("--num-layers", type=positive_int, default=4)
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--num-warmup-steps", type=positive_int, default=1000)
    p.add_argument("--lr-mul", type=positive_float, default=1.0, help="FG: scales the schedule")
    p.add_argument("--learning-rate", type=positive_float, default=3e-4, help="PreLN: Adam's rate")
    p.add_argument("--dropout", type=nonnegative_float, default=0.1)
    p.add_argument("--label-smoothing", type=nonnegative_float, default=0.1)
    p.add_argument("--full-width-heads", action="store_true")
    p.add_argument("--tie-embeddings", action="store_true")
    p.add_argument("--learned-positions", action="store_true")
    p.add_argument("--tokenizer", choices=("word", "bpe"), default="word")
    p.add_argument("--vocab-size", type=positive_int, default=8000, help="BPE pieces")
    p.add_argument("--vocab-from", choices=("archive", "training"), default="archive",
                   help="word level: the archive's vocabularies or the training split's words")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch threads (two runs side by side: one each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bleu_vs_time", help="folder for the CSV and the plot")
    p.add_argument("--results", metavar="FILE.json",
                   help="add the run's BLEU at each evaluation to a result file "
                        "(docs/results/bleu_vs_time.json)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    cls = {"FG": TransformerFG, "PreLN": TransformerPreLN}[args.variant]
    corpus = archive_or_usage(p, args.archive)
    dls = DLStudio(use_gpu=True, batch_size=args.batch_size, epochs=10_000, seed=args.seed,
                   learning_rate=args.learning_rate)
    x = cls(dl_studio=dls, corpus=corpus, embedding_size=args.embedding_size,
            num_warmup_steps=args.num_warmup_steps, lr_mul=args.lr_mul, dropout=args.dropout,
            label_smoothing=args.label_smoothing, save_checkpoints=False,
            full_width_heads=args.full_width_heads, tie_embeddings=args.tie_embeddings,
            learned_positions=args.learned_positions, tokenizer=args.tokenizer,
            vocab_size=args.vocab_size, vocab_from=args.vocab_from)
    enc = cls.MasterEncoder(dls, x, args.num_layers, args.num_atten_heads)
    dec = cls.MasterDecoderWithMasking(dls, x, args.num_layers, args.num_atten_heads)
    budget, unit = (args.steps, "steps") if args.steps else (args.minutes, "minutes")
    print(f"machine: {machine()}")
    print(f"Transformer{args.variant}, embedding {args.embedding_size}, {args.num_layers}+"
          f"{args.num_layers} layers, {args.num_atten_heads} heads, batch {args.batch_size}, "
          f"warm-up {args.num_warmup_steps}, lr_mul {args.lr_mul}, PreLN lr "
          f"{args.learning_rate}, dropout {args.dropout}, label smoothing "
          f"{args.label_smoothing}, full-width heads {args.full_width_heads}, tied "
          f"{args.tie_embeddings}, learned positions {args.learned_positions}; "
          f"tokenizer {x.tokenizer} ({x.vocab_en_size} / {x.vocab_es_size}, from "
          f"{'the training split' if x.tokenizer == 'bpe' else args.vocab_from}), "
          f"max_seq_length {x.max_seq_length}; {len(x.training_corpus)} training pairs, "
          f"{len({en for en, _ in x.held_out_corpus})} held-out English sentences; "
          f"device {dls.device}, {args.precision}; budget {budget} {unit}", flush=True)
    print(f"{'minutes':>8}{'steps':>7}{'epoch':>7}{'loss':>8}{'BLEU':>7}{'sacreBLEU':>10}"
          f"{'translatable':>14}{'eval s':>8}", flush=True)

    def report(row):
        print(f"{row['minutes']:>8.1f}{row['steps']:>7}{row['epoch']:>7}{row['loss']:>8.3f}"
              f"{row['bleu']:>7.2f}{row['sacrebleu']:>10.2f}"
              f"{row['translatable']:>7}/{row['sentences']:<6}{row['eval_seconds']:>8.0f}",
              flush=True)

    rows = budget_run(x, enc, dec, budget, args.every, report, unit=unit,
                      precision=args.precision)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"bleu_vs_time_{args.variant}_{args.tokenizer}_"
                                  f"{args.precision}")
    with open(stem + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    from matplotlib.figure import Figure
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    ax.plot([r["minutes"] for r in rows], [r["bleu"] for r in rows], marker="o")
    ax.set_xlabel("minutes of training")
    ax.set_ylabel("held-out BLEU (NLTK)")
    ax.set_title(f"Transformer{args.variant}")
    fig.savefig(stem + ".png", dpi=100)
    print(f"wrote {stem}.csv and {stem}.png")
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        at = {f"{round(r['minutes']) if unit == 'minutes' else r['steps']}":
              [round(r["bleu"], 1), round(r["sacrebleu"], 1)] for r in rows}
        record(args.results, {"variant": args.variant, "tokenizer": args.tokenizer,
                              "unit": unit, "bleu_by_minutes" if unit == "minutes"
                              else "bleu_by_steps": at},
               as_typed("benchmarks/bleu_vs_time.py", sys.argv[1:]))
        print(f"row added to {args.results}")


if __name__ == "__main__":
    main()
