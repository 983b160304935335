#!/usr/bin/env python3
"""Does a change of code leave the arithmetic alone? Runs the same small training runs on two
versions of the package, one after the other on this machine, and compares them bit for bit:

    - TransformerFG and TransformerPreLN on the bundled corpus: the loss of every step, and the
      greedy and beam translations of the held-out sentences;
    - TransformerFG with the budget schedule over --steps steps (where a version has it): every
      loss, and the last rate;
    - a TransformerGPT on the corpus's Spanish: every loss, and a greedy continuation;
    - a visTransformer on our shapes: every loss, and its predicted classes.

    python benchmarks/same_arithmetic.py --base 3dfdafd             # that commit vs. this tree
    python benchmarks/same_arithmetic.py --base v1 --head v2 --steps 60 --sentences 200

A version is a commit (read with ``git archive``) or ``.`` (the files as they are here). Each
runs in a process of its own, with one thread, so that the two see the same order of sums.
Prints each quantity side by side and exits 1 if anything differs.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
from DLStudio.cli.common import Parser  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE as ARCHIVE  # noqa: E402  (this tree's corpus)

# What runs in each version: only names that every version since DLStudio's API has had.
CHILD = r"""
import json, os, sys
# This version's package only: not an editable install's finder, which would fill in a
# module this version lacks from another tree.
sys.meta_path[:] = [f for f in sys.meta_path if "Editable" not in getattr(
    f, "__name__", type(f).__name__)]
import torch
torch.set_num_threads(1)
import DLStudio as package
from DLStudio import DLStudio, TransformerFG, TransformerPreLN, TransformerGPT, visTransformer
try:
    from DLStudio.data import BUNDLED_ARCHIVE, SHAPE_CLASSES
except ImportError:                      # (before the package's folders were its floors)
    from DLStudio.datasets import BUNDLED_ARCHIVE, SHAPE_CLASSES
steps, n, out = int(sys.argv[1]), int(sys.argv[2]), {}
archive = sys.argv[3] if os.path.isfile(sys.argv[3]) else BUNDLED_ARCHIVE
def dls(name):
    return DLStudio(batch_size=32, epochs=1000, seed=0, use_gpu=False,
                    path_saved_model=os.path.join(name, "saved.pt"))
for cls in (TransformerFG, TransformerPreLN):
    d = dls(cls.__name__)
    x = cls(dl_studio=d, data_archive=archive, max_seq_length=10, embedding_size=64,
            num_warmup_steps=40, save_checkpoints=False)
    enc = cls.MasterEncoder(d, x, num_basic_encoders=2, num_atten_heads=4)
    dec = cls.MasterDecoderWithMasking(d, x, num_basic_decoders=2, num_atten_heads=4)
    trainer = x.run_code_for_training(d, enc, dec, checkpoints_dir=cls.__name__ + "_ck",
                                      max_steps=steps)
    english = [en for en, _ in x.held_out_corpus[:n]]
    out[cls.__name__] = {"losses": [float(v).hex() for v in trainer.train_losses],
                         "greedy": x.translate(trainer.model, english, beam_width=1),
                         "beam": x.translate(trainer.model, english, beam_width=3)}
try:                                     # the budget schedule, where the version has it
    d = dls("budget")
    x = TransformerFG(dl_studio=d, data_archive=archive, max_seq_length=10, embedding_size=64,
                      num_warmup_steps=40, save_checkpoints=False, schedule="budget")
except Exception:
    x = None
if x is not None:
    enc = TransformerFG.MasterEncoder(d, x, num_basic_encoders=2, num_atten_heads=4)
    dec = TransformerFG.MasterDecoderWithMasking(d, x, num_basic_decoders=2, num_atten_heads=4)
    trainer = x.run_code_for_training(d, enc, dec, checkpoints_dir="budget_ck", max_steps=steps)
    out["FG, budget"] = {"losses": [float(v).hex() for v in trainer.train_losses],
                         "rates": [float(trainer.current_lr()).hex()]}
d = dls("gpt")
gpt = TransformerGPT(dl_studio=d, sentences=[es for _, es in x.training_corpus[:2000]],
                     tokenizer="bpe", vocab_size=300, embedding_size=64, num_basic_decoders=2,
                     num_atten_heads=4, save_checkpoints=False)
trainer = gpt.run_code_for_training(checkpoints_dir="gpt_ck", max_steps=max(1, steps // 3))
out["TransformerGPT"] = {"losses": [float(v).hex() for v in trainer.train_losses],
                         "greedy": gpt.generate("el", max_new_tokens=8)}
d = dls("vit")
vit = visTransformer(dl_studio=d, patch_size=(8, 8), embedding_size=64, num_basic_encoders=2,
                     num_atten_heads=4, classes=SHAPE_CLASSES, save_checkpoints=False)
vit.load_shapes_dataset(num_train=256, num_test=64)
trainer = vit.run_code_for_training_visTransformer(checkpoint_dir="vit_ck",
                                                   max_steps=max(1, steps // 3))
out["visTransformer"] = {"losses": [float(v).hex() for v in trainer.train_losses],
                         "predicted": vit.predict(vit.test_set.images[:n]).tolist()}
print("PACKAGE " + os.path.dirname(os.path.abspath(package.__file__)))
print("RESULT " + json.dumps(out))
"""


def source_of(version, into):
    """The package's files of ``version`` (a commit, or "." for this tree) under ``into``."""
    if version == ".":
        return ROOT
    archive = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", version],
                             capture_output=True, check=True).stdout
    os.makedirs(into)
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def run(version, steps, sentences):
    with tempfile.TemporaryDirectory() as tmp:
        src = source_of(version, os.path.join(tmp, "src") if version != "." else tmp)
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        env = dict(os.environ, PYTHONPATH=src, OMP_NUM_THREADS="1")
        done = subprocess.run([sys.executable, "-c", CHILD, str(steps), str(sentences), ARCHIVE],
                              cwd=work, env=env, capture_output=True, text=True)
        line = next((s for s in done.stdout.splitlines() if s.startswith("RESULT ")), None)
        if done.returncode or line is None:
            sys.exit(f"version {version} failed:\n{done.stderr[-3000:]}")
        ran = next(s for s in done.stdout.splitlines() if s.startswith("PACKAGE "))[8:]
        if os.path.realpath(ran) != os.path.realpath(os.path.join(src, "DLStudio")):
            sys.exit(f"version {version} ran the package in {ran}, not its own")
        return json.loads(line[len("RESULT "):])


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="a commit, or . for this tree")
    p.add_argument("--head", default=".", help="a commit, or . for this tree (the default)")
    p.add_argument("--steps", type=int, default=60, help="training steps of each translation "
                   "model (a third of them for the GPT and the visTransformer)")
    p.add_argument("--sentences", type=int, default=200, help="held-out sentences translated")
    args = p.parse_args(argv)
    print(f"CPU: {cpu_name()}")
    base, head = (run(v, args.steps, args.sentences) for v in (args.base, args.head))
    rows = compare(base, head)
    print(f"{'model':18}{'quantity':12}{'base':>8}{'head':>8}  same")
    for model, what, n_base, n_head, same in rows:
        print(f"{model:18}{what:12}{n_base:>8}{n_head:>8}  {'yes' if same else 'NO'}")
    differ = sum(not same for *_, same in rows)
    print("identical" if not differ else f"{differ} quantities differ")
    return 1 if differ else 0


def compare(base, head):
    """(model, quantity, its length in base, in head, whether they are equal) for every
    quantity of ``base``; one missing from ``head`` counts as different."""
    return [(model, what, len(theirs), len(head.get(model, {}).get(what) or []),
             theirs == head.get(model, {}).get(what))
            for model, results in base.items() for what, theirs in results.items()]


def cpu_name():
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
