#!/usr/bin/env python3
"""Kill training with SIGKILL at random moments and check that every checkpoint under its
final name is complete and loadable.

    python tests/stress_sigkill.py --trials 25

Training writes a checkpoint every epoch of a tiny corpus (several a second), so kills land
before, between and during writes. The test suite runs a few trials; this script runs many.
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from DLStudio.checkpoints import CheckpointError, checkpoint_files, load_checkpoint  # noqa: E402
from DLStudio.data import generate_corpus, save_archive  # noqa: E402


def kill_trials(trials, folder, seed=0, min_delay=2.0, max_delay=6.0):
    """Run ``trials`` trainings in ``folder``, SIGKILL each at a random delay of up to
    ``max_delay - min_delay`` seconds after its first checkpoint, and load every checkpoint
    file left. Returns one dict per trial: delay, checked, bad."""
    rng = random.Random(seed)
    archive = os.path.join(folder, "tiny.tar.gz")
    save_archive(generate_corpus(200, seed=5), archive)
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")
    results = []
    for trial in range(trials):
        ck = os.path.join(folder, f"ck{trial}")
        cmd = [sys.executable, os.path.join(ROOT, "ExamplesTransformers",
                                            "seq2seq_with_transformerFG.py"),
               "--archive", archive, "--epochs", "100000", "--embedding-size", "16",
               "--num-layers", "1", "--num-atten-heads", "2", "--batch-size", "64",
               "--checkpoint-freq", "1", "--checkpoints-dir", ck, "--cpu", "--no-eval"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # the random moment is counted from the first checkpoint (a slower machine starts
        # PyTorch and reads the corpus for longer), so that each kill falls among the writes
        deadline = time.time() + 120
        while proc.poll() is None and time.time() < deadline and not (
                os.path.isdir(ck) and checkpoint_files(ck)):
            time.sleep(0.05)
        delay = rng.uniform(0.0, max_delay - min_delay)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        files = checkpoint_files(ck) if os.path.isdir(ck) else []
        bad = []
        for path in files:
            try:
                load_checkpoint(path)
            except CheckpointError as e:
                bad.append(f"{path}: {e}")
        results.append({"trial": trial, "delay": round(delay, 2), "checked": len(files),
                        "bad": bad})
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--trials", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = kill_trials(args.trials, folder, args.seed)
    for r in results:
        print(f"trial {r['trial']:3d}: killed after {r['delay']:5.2f} s, "
              f"{r['checked']:4d} checkpoints loaded, {len(r['bad'])} bad")
        for line in r["bad"]:
            print("   ", line)
    total = sum(r["checked"] for r in results)
    bad = sum(len(r["bad"]) for r in results)
    print(f"{args.trials} kills, {total} checkpoints checked, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
