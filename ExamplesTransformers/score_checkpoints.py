#!/usr/bin/env python3
"""Held-out BLEU of every checkpoint in a directory: when did the model learn, and did it
diverge?

    python3 score_checkpoints.py checkpoints_with_masking_FG [--beam 1]

Prints a table (epoch, BLEU, sacreBLEU), writes bleu_by_epoch.png in the directory and
flags a divergence: BLEU collapsing below a quarter of its best after it had risen.
"""
import argparse
import os
import sys

from DLStudio.checkpoints import checkpoint_path, list_checkpoints
from DLStudio.cli import load_checkpoint_or_exit
from DLStudio.evaluation import evaluate_bleu
from DLStudio.visualize import find_divergence, plot_bleu_by_epoch


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints_dir")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--archive", help="the archive it was trained on, if it has moved")
    p.add_argument("--model-class", metavar="MODULE:CLASS",
                   help="the container class of checkpoints trained with your own subclass")
    args = p.parse_args()
    indices = list_checkpoints(args.checkpoints_dir) if os.path.isdir(args.checkpoints_dir) \
        else []
    if not indices:
        print(f"error: no checkpoints in {args.checkpoints_dir}", file=sys.stderr)
        return 1
    print(f"{'epoch':>6}{'BLEU':>8}{'sacreBLEU':>11}")
    bleus = []
    for index in indices:
        xformer, model = load_checkpoint_or_exit(args.checkpoints_dir, index, args.archive,
                                                 args.model_class)
        if not xformer.held_out_corpus:
            print("error: the training archive is not where it was; give --archive",
                  file=sys.stderr)
            return 1
        result = evaluate_bleu(model, xformer.vocab, xformer.held_out_corpus,
                               beam_width=args.beam)
        bleus.append(result["bleu"])
        print(f"{index:>6}{result['bleu']:>8.2f}{result.get('sacrebleu', float('nan')):>11.2f}")
    diverged = find_divergence(bleus)
    if diverged is not None:
        print(f"DIVERGED: BLEU collapsed at the checkpoint of epoch {indices[diverged]} "
              f"(best before: {max(bleus[:diverged]):.2f}); use "
              f"{checkpoint_path(args.checkpoints_dir, indices[diverged - 1])}, and lower the "
              "learning rate or lengthen the warm-up")
    path = plot_bleu_by_epoch(indices, bleus,
                              os.path.join(args.checkpoints_dir, "bleu_by_epoch.png"),
                              f"Transformer{xformer.variant}: held-out BLEU by checkpoint",
                              diverged)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
