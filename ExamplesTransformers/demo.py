#!/usr/bin/env python3
"""`make demo`: train TransformerFG on the bundled corpus for a few minutes of CPU time,
then translate held-out sentences it has never seen and score them with BLEU.

    python3 demo.py [--epochs 10] [--out demo_run]

(--archive, --embedding-size and --num-layers exist so that a test can run it small.)
"""
import argparse
import os
import sys
import time

from DLStudio.checkpoints import checkpoint_path, list_checkpoints
from DLStudio.cli import test_checkpoint_main, train_main
from DLStudio.datasets import BUNDLED_ARCHIVE
from DLStudio.Transformers import TransformerBase

SENTENCES = [
    "I will visit my grandmother tomorrow.",
    "Did the boys eat the red apples?",
    "She is not tired today.",
    "We went to the beach last week.",
]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--out", default="demo_run")
    p.add_argument("--archive", default=BUNDLED_ARCHIVE)
    p.add_argument("--embedding-size", type=int, default=128)
    p.add_argument("--num-layers", type=int, default=2)
    args = p.parse_args()
    ckpt_dir = os.path.join(args.out, "checkpoints_FG")
    start = time.time()
    print(f"== Training TransformerFG on the bundled corpus ({args.archive})")
    status = train_main("FG", ["--archive", args.archive, "--epochs", str(args.epochs),
                               "--embedding-size", str(args.embedding_size),
                               "--num-layers", str(args.num_layers),
                               "--batch-size", "64", "--num-warmup-steps", "400",
                               "--checkpoints-dir", ckpt_dir, "--overwrite", "--no-eval"])
    if status:
        return status
    last = list_checkpoints(ckpt_dir)[-1]
    print(f"\n== Training took {time.time() - start:.0f} s. Checkpoints: "
          f"{list_checkpoints(ckpt_dir)}; loss curve: {ckpt_dir}/train_loss.png")
    print(f"\n== python3 test_checkpointFG.py {ckpt_dir} {last}")
    status = test_checkpoint_main("FG", [ckpt_dir, str(last), "--show", "12"])
    if status:
        return status
    print(f"\n== Sentences of our own (python3 translate_sentence.py {ckpt_dir} {last} "
          '"..."):')
    xformer, model = TransformerBase.from_checkpoint(checkpoint_path(ckpt_dir, last))
    for english in SENTENCES:
        try:
            spanish = xformer.translate(model, [english])[0]
        except ValueError as e:      # another archive may not know every word of ours
            spanish = f"(not translated: {e})"
        print(f"  {english:40s} -> {spanish}")
    print(f"\n== Demo finished in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
