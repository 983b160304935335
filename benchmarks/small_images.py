#!/usr/bin/env python3
"""The visTransformer's small-data recipe, measured: scikit-learn's 1,797 handwritten digits
(8x8, grey), written as an image folder, held-out accuracy of `--recipe small_images`
against a plain ViT given the same schedule, size and number of tokens, an SVM, and the
recipe with each of its parts switched off in turn; then the recipe on our own shapes.

    python benchmarks/small_images.py --results docs/results/vision.json     # about 35 minutes

The digits are split once (80% to train, 20% held out, stratified, seed 0) and written as
DIR/train/<label>/*.png and DIR/test/<label>/*.png, each 8x8 image scaled to 0-255 and
upscaled to 32x32 by nearest neighbour, grey as RGB: what a user's own folder would be.
Each model row is `image_recog_with_visTransformer.py --image-folder DIR` in a process of
its own, one per seed; its accuracy is the script's `held-out accuracy` line. The SVM is
scikit-learn's SVC (RBF kernel, its default settings) on the 64 raw pixels of the same split.
Needs scikit-learn (pip install -e '.[bench]'). Runs alone on the machine.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.quick import CAPS, quick, shrink  # noqa: E402

SCRIPT = os.path.join(ROOT, "ExamplesTransformers", "image_recog_with_visTransformer.py")
RECIPE = ["--recipe", "small_images"]
#: Each row: its name, what it adds to the script's flags. The plain ViT has the recipe's
#: sizes, schedule and label smoothing, patches of 4x4 (64 tokens, as the convolutions
#: make), a class token and no augmentation.
ROWS = {
    "recipe (small_images)": RECIPE,
    "plain ViT": RECIPE + ["--tokenizer", "patches", "--patch-size", "4", "--pooling",
                           "class_token", "--augment", "none"],
    "recipe, patches for convolutions": RECIPE + ["--tokenizer", "patches",
                                                  "--patch-size", "4"],
    "recipe, class token for sequence pooling": RECIPE + ["--pooling", "class_token"],
    "recipe, no shifts": RECIPE + ["--augment", "none"],
}
ACCURACY = re.compile(r"held-out accuracy: ([0-9.]+)%")


def write_digits(out, per_class=None):
    """scikit-learn's digits as an image folder (see the docstring); ``per_class``: at most
    that many images of each digit (the tests' tiny runs). Returns (train, test) arrays for
    the SVM: (X, y) each."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    keep = np.arange(len(digits.target))
    if per_class:
        keep = np.concatenate([np.flatnonzero(digits.target == k)[:per_class]
                               for k in range(10)])
    train, test = train_test_split(keep, test_size=0.2, stratify=digits.target[keep],
                                   random_state=0)
    for split, ids in (("train", train), ("test", test)):
        for i in ids:
            pixels = (digits.images[i] / 16.0 * 255).round().astype(np.uint8)
            pixels = np.kron(pixels, np.ones((4, 4), dtype=np.uint8))          # 32 x 32
            folder = os.path.join(out, split, str(digits.target[i]))
            os.makedirs(folder, exist_ok=True)
            Image.fromarray(pixels).convert("RGB").save(os.path.join(folder, f"{i}.png"))
    return ((digits.data[train], digits.target[train]),
            (digits.data[test], digits.target[test]))


def svm_accuracy(train, test):
    from sklearn.svm import SVC
    return 100.0 * SVC().fit(*train).score(*test)


def run_script(flags, work, name):
    """One run of the script in a process of its own: (accuracy %, minutes)."""
    start = time.time()
    done = subprocess.run([sys.executable, SCRIPT, *flags, "--checkpoints-dir",
                           os.path.join(work, name)], capture_output=True, text=True)
    found = ACCURACY.findall(done.stdout)
    if done.returncode or not found:
        print(f"{' '.join(flags)}: failed\n{(done.stdout + done.stderr)[-2000:]}")
        return None, None
    return float(found[-1]), (time.time() - start) / 60


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--seeds", type=int, default=5,
                   help="seeds of the recipe and the plain ViT (default: %(default)s)")
    p.add_argument("--part-seeds", type=int, default=1,
                   help="seeds of each row with a part switched off (default: %(default)s)")
    p.add_argument("--per-class", type=int, default=None,
                   help="at most this many digits of each class (the tests' tiny runs)")
    p.add_argument("--shapes", type=int, default=2000, metavar="N",
                   help="then the recipe on N of our shapes (0: not; default: %(default)s)")
    p.add_argument("--extra", default="",
                   help="flags added to every run of the script (the tests': '--epochs 1')")
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add the rows to a result file (docs/results/vision.json)")
    args = p.parse_args(argv)
    if quick() and args.per_class is None:      # DLSTUDIO_QUICK=1: a few digits of each class
        args.per_class = CAPS["per_class"]
    args = shrink(args)                          # and tiny sizes
    if args.seeds < 1 or args.part_seeds < 0 or args.shapes < 0 or (
            args.per_class is not None and args.per_class < 5):
        p.error("--seeds must be at least 1, --part-seeds and --shapes at least 0, "
                "--per-class at least 5")
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("scikit-learn is not installed: pip install -e '.[bench]' (its digits and SVM)")
        return 1
    print(f"machine: {machine()}")
    extra = args.extra.split()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        folder = os.path.join(work, "digits")
        train, test = write_digits(folder, args.per_class)
        print(f"digits: {len(train[1])} training and {len(test[1])} held-out images "
              f"(8x8 upscaled to 32x32) in {folder}")
        rows.append({"data": "digits", "model": "SVM (RBF, scikit-learn's defaults)",
                     "accuracies": [round(svm_accuracy(train, test), 2)], "minutes": None})
        for name, flags in ROWS.items():
            n = args.seeds if name in ("recipe (small_images)", "plain ViT") else \
                args.part_seeds
            runs = [run_script(["--image-folder", folder, *flags, "--seed", str(seed),
                                *extra], work, f"run{len(rows)}_{seed}") for seed in range(n)]
            if any(acc is None for acc, _ in runs):
                return 1
            if runs:
                rows.append({"data": "digits", "model": name,
                             "accuracies": [round(a, 2) for a, _ in runs],
                             "minutes": round(max(m for _, m in runs), 1)})
        if args.shapes:
            acc, minutes = run_script(RECIPE + ["--num-train", str(args.shapes),
                                                "--num-test", "2000", *extra], work, "shapes")
            if acc is None:
                return 1
            rows.append({"data": f"shapes ({args.shapes} training images)",
                         "model": "recipe (small_images)", "accuracies": [acc],
                         "minutes": round(minutes, 1)})
    print_table(rows)
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        command = as_typed("benchmarks/small_images.py", sys.argv[1:] if argv is None
                           else argv)
        for row in rows:
            record(args.results, {**row, "mean": round(mean(row["accuracies"]), 2)}, command)
        print(f"rows added to {args.results}")
    recipe = next(r for r in rows if r["model"] == "recipe (small_images)")
    print(f"RECIPE_ACCURACY {mean(recipe['accuracies']):.2f}")
    return 0


def mean(values):
    return sum(values) / len(values)


def print_table(rows):
    print("\n| data | model | held-out accuracy (mean) | each seed | minutes (slowest) |")
    print("|---|---|---|---|---|")
    for r in rows:
        each = ", ".join(f"{a:.2f}" for a in r["accuracies"])
        minutes = "-" if r["minutes"] is None else f"{r['minutes']:.1f}"
        print(f"| {r['data']} | {r['model']} | {mean(r['accuracies']):.2f}% | {each} | "
              f"{minutes} |")


if __name__ == "__main__":
    sys.exit(main())
