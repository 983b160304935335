#!/usr/bin/env python3
"""What BERT's pre-training buys, measured: translation detection (is the Spanish sentence
a translation of the English one?) with scarce and plentiful labels, a pre-trained BERT
against the same model from scratch on the same budget.

    python benchmarks/bert_pretraining.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz \\
        --out bert_bench --pretrain-minutes 20 --finetune-steps 600

1. One bilingual BERT is pre-trained (masked tokens only) on both sides of the archive's
   training split, each sentence alone (never beside its translation), for
   --pretrain-minutes, with a BPE vocabulary learnt from that text.
2. The translation task's rows (DLStudio.data.tasks: the held-out split's pairs, with hard
   negatives, are the test rows) are made in memory; each row of the table fine-tunes
   --finetune-steps steps on --labelled rows per label (and on all of them), once from the
   pre-trained weights and once from fresh weights of the same model and tokenizer, for
   each --seeds seed (the seed chooses the rows and the order). Test accuracy of each.

Runs alone on the machine (pre-training is a time budget). The pre-trained checkpoint is
kept in OUT and reused when the script runs again; each finished row goes to OUT/rows.json.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from DLStudio import DLStudio, TransformerBERT  # noqa: E402
from DLStudio.checkpoints import checkpoint_files  # noqa: E402
from DLStudio.cli.common import (  # noqa: E402
    Parser,
    archive_or_usage,
    positive_float,
    positive_int,
)
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE  # noqa: E402
from DLStudio.data.bert_text import LabelledRows  # noqa: E402
from DLStudio.data.tasks import pretraining_sentences, task_rows  # noqa: E402


def parser():
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--archive", default=BUNDLED_ARCHIVE)
    p.add_argument("--out", default="bert_bench")
    p.add_argument("--results", metavar="FILE.json",
                   help="add the accuracies to a result file (docs/results/bert.json)")
    p.add_argument("--pretrain-minutes", type=positive_float, default=20.0)
    p.add_argument("--pretrain-steps", type=positive_int, default=None,
                   help="instead of minutes (the tests' tiny runs)")
    p.add_argument("--finetune-steps", type=positive_int, default=600)
    p.add_argument("--labelled", default="50,500,all",
                   help="rows per label of each row of the table (all: every training row)")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--embedding-size", type=positive_int, default=256)
    p.add_argument("--num-layers", type=positive_int, default=4)
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--vocab-size", type=positive_int, default=8000)
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--warmup-steps", type=positive_int, default=300,
                   help="pre-training: BERT's schedule, a linear warm-up (post-LN) to the "
                        "peak, then linearly down to zero at the budget's end")
    p.add_argument("--lr-mul", type=positive_float, default=0.15,
                   help="pre-training: the warm-up's multiplier (0.15: a peak of 5.4e-4 at "
                        "embedding 256 and 300 steps)")
    p.add_argument("--finetune-learning-rate", type=positive_float, default=1e-4)
    p.add_argument("--test-rows", type=positive_int, default=None,
                   help="score on this many test rows (default: all)")
    return p


def pretrain(args, sentences):
    """The pre-trained BERT of OUT/pretrained (trained there first if it is not yet)."""
    folder = os.path.join(args.out, "pretrained")
    dls = DLStudio(seed=0, epochs=10_000, batch_size=args.batch_size,
                   path_saved_model=os.path.join(folder, "saved_BERT.pt"))
    if checkpoint_files(folder):
        path = checkpoint_files(folder)[-1]
        bert = TransformerBERT.from_checkpoint(path).model
        print(f"pre-trained BERT: {path} (kept from an earlier run)", flush=True)
        return bert
    bert = TransformerBERT(dl_studio=dls, sentences=sentences, archive_text=True, lang="both",
                           vocab_size=args.vocab_size, embedding_size=args.embedding_size,
                           num_basic_encoders=args.num_layers,
                           num_atten_heads=args.num_atten_heads, dropout=0.1,
                           schedule="budget", num_warmup_steps=args.warmup_steps,
                           lr_mul=args.lr_mul)
    peak = bert.ScheduledOptim(None, args.lr_mul, args.embedding_size,
                               args.warmup_steps).lr_at(args.warmup_steps)
    print(f"pre-training a BERT ({sum(p.numel() for p in bert.parameters()):,} parameters, "
          f"{bert.vocab.size} BPE pieces; post-LN, warm-up to {peak:.2e} in "
          f"{args.warmup_steps} steps, then down to zero) on "
          f"{len(bert.training_sentences)} sentences (English and Spanish, each alone) ...",
          flush=True)
    start = time.monotonic()
    trainer = bert.run_code_for_pretraining(
        folder, max_minutes=None if args.pretrain_steps else args.pretrain_minutes,
        max_steps=args.pretrain_steps, track_perplexity=True)
    scores = bert.masked_scores()
    print(f"pre-trained: {trainer.step} steps in {(time.monotonic() - start) / 60:.1f} min; "
          f"held-out masked tokens: accuracy {scores['accuracy']:.1f}%, perplexity "
          f"{scores['perplexity']:.1f}", flush=True)
    return bert


def as_rows(rows, path):
    return LabelledRows([r[1] for r in rows], [r[0] for r in rows], [r[2] for r in rows], path)


def finetune(args, pretrained, train, test, labelled, seed, from_pretrained):
    rows = train if labelled == "all" else train.keep_per_label(int(labelled), seed)
    dls = DLStudio(seed=seed, epochs=100_000, batch_size=min(32, len(rows)),
                   learning_rate=args.finetune_learning_rate,
                   path_saved_model=os.path.join(args.out, "finetuned.pt"))
    bert = pretrained.with_labels(("no", "yes"), dls, pretrained=from_pretrained,
                                  dropout=0.1, num_warmup_steps=0, schedule="budget",
                                  save_checkpoints=False)
    start = time.monotonic()
    bert.run_code_for_finetuning(rows, None, max_steps=args.finetune_steps)
    minutes = (time.monotonic() - start) / 60
    predicted = bert.classify(test.texts, test.seconds).argmax(-1).tolist()
    right = sum(bert.labels[p] == label for p, label in zip(predicted, test.labels))
    return {"labelled": labelled, "rows": len(rows), "seed": seed,
            "start": "pre-trained" if from_pretrained else "from scratch",
            "accuracy": 100.0 * right / len(test), "minutes": minutes}


def table(rows):
    lines = ["| labelled rows per label | start | " + " | ".join(
        f"seed {s}" for s in sorted({r['seed'] for r in rows})) + " | mean |",
        "|---|---|" + "---|" * (len({r["seed"] for r in rows}) + 1)]
    groups = {}
    for r in rows:
        groups.setdefault((r["labelled"], r["start"]), []).append(r)
    for (labelled, start), group in groups.items():
        accs = [g["accuracy"] for g in sorted(group, key=lambda g: g["seed"])]
        lines.append(f"| {labelled} ({group[0]['rows']} rows) | {start} | "
                     + " | ".join(f"{a:.1f}" for a in accs)
                     + f" | {sum(accs) / len(accs):.1f} |")
    lines.append("")
    for labelled in dict.fromkeys(r["labelled"] for r in rows):
        pre = [g["accuracy"] for g in groups.get((labelled, "pre-trained"), [])]
        scratch = [g["accuracy"] for g in groups.get((labelled, "from scratch"), [])]
        if pre and scratch:
            gains = [a - b for a, b in zip(pre, scratch)]
            spread = max(pre + scratch) - min(pre + scratch) if len(pre) == 1 else \
                max(abs(pre[0] - pre[-1]), abs(scratch[0] - scratch[-1]))
            gain = sum(gains) / len(gains)
            lines.append(f"{labelled} per label: pre-training's gain {gain:+.1f} "
                         f"points (per seed {', '.join(f'{g:+.1f}' for g in gains)}); "
                         f"seed-to-seed spread {spread:.1f}")
    return "\n".join(lines)


def main(argv=None):
    p = parser()
    args = p.parse_args(argv)
    corpus = archive_or_usage(p, args.archive, max_seq_length=None)
    os.makedirs(args.out, exist_ok=True)
    print(f"machine: {machine()}", flush=True)
    sentences = pretraining_sentences(corpus)     # split as the task's rows are: none tested
    task = task_rows(corpus, "translation")
    train, test = as_rows(task["train"], "train"), as_rows(task["test"], "test")
    if args.test_rows:
        test = LabelledRows(test.texts[:args.test_rows], test.labels[:args.test_rows],
                            test.seconds[:args.test_rows], "test")
    print(f"{args.archive}: translation task, {len(train)} training rows, {len(test)} test "
          "rows (held-out pairs and their hard negatives)", flush=True)
    pretrained = pretrain(args, sentences)
    done_path = os.path.join(args.out, "rows.json")
    done = json.load(open(done_path)) if os.path.isfile(done_path) else []
    for labelled in args.labelled.split(","):
        for seed in map(int, args.seeds.split(",")):
            for from_pretrained in (True, False):
                key = (labelled, seed, "pre-trained" if from_pretrained else "from scratch")
                if any((d["labelled"], d["seed"], d["start"]) == key for d in done):
                    continue
                row = finetune(args, pretrained, train, test, labelled, seed, from_pretrained)
                print(f"{row['labelled']} per label ({row['rows']} rows), seed {seed}, "
                      f"{row['start']}: test accuracy {row['accuracy']:.1f}% "
                      f"({args.finetune_steps} steps, {row['minutes']:.1f} min)", flush=True)
                done.append(row)
                with open(done_path, "w") as f:
                    json.dump(done, f, indent=1)
    print("\n" + table(done))
    if args.results:
        keep_rows(args, argv, done)
    return 0


def keep_rows(args, argv, done):
    """``--results``: one row per number of labelled rows, each start's accuracy by seed."""
    from DLStudio.cli.common.results import as_typed, record
    command = as_typed("benchmarks/bert_pretraining.py", sys.argv[1:] if argv is None else argv)
    for labelled in dict.fromkeys(r["labelled"] for r in done):
        by = {start: {r["seed"]: round(r["accuracy"], 1) for r in done
                      if r["labelled"] == labelled and r["start"] == start}
              for start in ("pre-trained", "from scratch")}
        seeds = sorted(set(by["pre-trained"]) & set(by["from scratch"]))
        if seeds:
            record(args.results, {
                "rows_per_label": labelled, "seeds": seeds,
                "pretrained": [by["pre-trained"][s] for s in seeds],
                "scratch": [by["from scratch"][s] for s in seeds]}, command)
    print(f"rows added to {args.results}")


if __name__ == "__main__":
    sys.exit(main())
