#!/usr/bin/env python3
"""The 30-minute recipe, one change at a time: which levers buy BLEU on a small budget.

    python benchmarks/recipe_sweep.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz \\
        --out sweep                        # every row not done yet, one after the other
    python benchmarks/recipe_sweep.py ... --rows baseline,budget    # only these
    python benchmarks/recipe_sweep.py ... --table                   # what is done, as a table

Every row starts from today's recipe (``--recipe today30`` of the training scripts) and
changes one thing: the learning rate falls to zero at the budget's end (budget), one BPE
vocabulary for both languages with one matrix for the three embeddings (shared), a deep
encoder and a shallow decoder (deep-encoder); "seed1" is the recipe again with another seed,
the noise floor. "best" combines every change whose gain on the development split is larger
than that noise (when none does, it is the baseline row and is not trained again);
"best-10" is it on a 10-minute budget. Each row trains for --minutes on the
training split less a development split carved from it (--dev-sentences distinct English
sentences, all their pairs), keeping a moving average of the weights (--ema). Its last
checkpoint is then scored on the development split for each decoding (greedy; beam 4 and 8,
length penalty alpha 0.6 and 1.0) with the raw and the averaged weights. The choice of
weights and decoding is made there, never on the held-out split. Held-out BLEU is then given
for greedy raw weights (the old recipe's measure) and for the choice.

The "modern" rows are today's parts together in place of the 2017 model's: pre-LN (Adam at
5e-4, no warm-up), RMSNorm, rotary positions and SwiGLU (model/since_2017.py), two seeds;
"modern-gqa" is the same with one key/value head for the four query heads (full-width
heads, which grouped-query attention needs). "best" never combines them (they are another
model, not one lever); they are compared with the baseline and seed1 rows. The rows
"modern-gqa-rate", "modern-gqa-budget" and "modern-gqa-nodrop" change one thing more in
modern-gqa: Adam at 1e-3 instead of 5e-4 (``--recipe modern30`` since it scored highest of
the three at 10 minutes); 1e-3 falling to zero at the budget's end; no dropout.
"modern30-nodrop" is modern30 as it now is (modern-gqa-rate without dropout);
"modern30-batch64", "modern30-nols" and "modern30-cooldown" change one thing more in it:
a batch of 64 sentences instead of 128; no label smoothing (2.0 higher on the development
split at 10 minutes, but 0.7 lower held out at 30, where the model sees each sentence 7 times:
``--recipe modern30`` keeps it); the rate down to zero over the budget's last fifth
(``--schedule cooldown``). The rows after them change modern30-nodrop's model or batch: a
feed-forward width of 4 M (modern30-ffn1024, and with dropout), embedding 320, six encoder
and four decoder layers, 256 sentences a step at 1.4 times the rate.

``--time-steps N`` trains each row N steps and prints its step time against the first row's;
``--max-steps`` then trains each row on a faster machine (a GPU) for the steps this one
trains it in --minutes, a screen that takes minutes where the rows take half an hour each.

``--also-ema 0.999,0.9995`` keeps moving averages of the weights at other decays beside
--ema's in the same run (OtherAverages), each then scored on the development split (greedy
and the recipes' beam 4 at alpha 1.0) and a candidate for the row's choice: decays compared
on one training, with none of the seed-to-seed noise two runs would add.

Runs one at a time on an otherwise idle machine. Each finished row is one file, OUT/ROW.json;
a row stopped midway (Ctrl-C, a closed laptop) resumes from its last checkpoint, its
training time counted across the stops.
"""

import argparse
import copy
import json
import logging
import math
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from DLStudio import DLStudio, TransformerFG, TransformerPreLN  # noqa: E402
from DLStudio.checkpoints import checkpoint_files, load_checkpoint  # noqa: E402
from DLStudio.cli import (  # noqa: E402
    archive_or_usage,
    existing_file,
    positive_float,
    positive_int,
)
from DLStudio.cli.common import RECIPES, Parser  # noqa: E402
from DLStudio.cli.common.results import as_typed, record  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE, split_pairs  # noqa: E402
from DLStudio.data.vocabulary import TranslationData, Vocabulary  # noqa: E402
from DLStudio.evaluation.decode_and_score import evaluate_bleu  # noqa: E402
from DLStudio.training.trainer import TrainingInterrupted  # noqa: E402

MODERN = {"variant": "PreLN", "norm": "rmsnorm", "positions": "rope", "feed_forward": "swiglu"}
MODERN_GQA = {**MODERN, "full_width_heads": True, "kv_heads": 1}
#: Each row: what it changes from today's recipe (training flags by argparse name).
LEVERS = {
    "baseline": {},
    "budget": {"schedule": "budget"},
    "shared": {"shared_vocab": True},
    "deep-encoder": {"num_encoder_layers": 6, "num_decoder_layers": 2},
    "seed1": {"seed": 1},
    # today's parts together (since 2017): pre-LN (Adam at 5e-4, no warm-up), RMSNorm, rotary
    # positions, SwiGLU; then the same with one key/value head for the four query heads
    "modern": MODERN,
    "modern-seed1": {**MODERN, "seed": 1},
    "modern-gqa": MODERN_GQA,
    "modern-gqa-seed1": {**MODERN_GQA, "seed": 1},
    # modern-gqa (modern30 as it was, at 5e-4) with one more change each: twice the rate; the rate
    # down to zero at the budget's end from twice the peak; no dropout
    "modern-gqa-rate": {**MODERN_GQA, "learning_rate": 1e-3},
    "modern-gqa-budget": {**MODERN_GQA, "learning_rate": 1e-3, "schedule": "budget"},
    "modern-gqa-nodrop": {**MODERN_GQA, "dropout": 0.0},
    # modern-gqa-rate (modern30 with dropout 0.1 put back) at its second seed
    "modern-gqa-rate-seed1": {**MODERN_GQA, "learning_rate": 1e-3, "seed": 1},
    # modern30 as it is (modern-gqa-rate) with no dropout: at these budgets the model sees
    # each sentence a few times, and dropout's masks are a tenth of the CPU step
    "modern30-nodrop": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0},
    # its second seed: the two modern30-nodrop rows of the table are two stops of one
    # training (seed 0), the one seed the changes below were first measured against
    "modern30-nodrop-seed1": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0, "seed": 1},
    # modern30-nodrop with one more change each: half the batch (twice the steps for about
    # the same sentences a minute); no label smoothing (the one regulariser left)
    "modern30-batch64": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0, "batch_size": 64},
    "modern30-nols": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0,
                      "label_smoothing": 0.0},
    # modern30-nodrop with the rate kept at 1e-3, then down to zero over the budget's last
    # fifth ("warmup-stable-decay"): with the same seed, the same steps as modern30-nodrop's
    # until the fall starts, so the two rows differ by the fall alone
    "modern30-cooldown": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0,
                          "schedule": "cooldown"},
    # modern30-nodrop with half the BPE pieces (4,000 a language): half the output layer's
    # products and embeddings, sentences a little longer in pieces; small corpora often
    # translate better with fewer pieces (Sennrich and Zhang 2019)
    "modern30-bpe4k": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0, "vocab_size": 4000},
    # modern30-nodrop at twice its rate (2e-3, still constant and clipped at norm 1): the last
    # doubling (modern-gqa to modern-gqa-rate) was worth the most of any change at 30 minutes
    # held out, and 8 passes over the pairs leave the model far from converged
    "modern30-rate2e3": {**MODERN_GQA, "learning_rate": 2e-3, "dropout": 0.0},
    # ... and at its second seed
    "modern30-rate2e3-seed1": {**MODERN_GQA, "learning_rate": 2e-3, "dropout": 0.0, "seed": 1},
    # modern30-nodrop with the output layer reading the target word vectors (Press and Wolf
    # 2017): 2 million weights fewer, and every output step trains the decoder's embeddings
    "modern30-tied": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0,
                      "tie_embeddings": True},
    # modern30-nodrop with a larger model, fewer steps in the same minutes: every change of
    # the recipe's training scored about 50 held out, with 4,000 to 7,400 steps (docs/results.md):
    # past about 4,500 steps the lecture's model gains little, and its feed-forward network is
    # narrow (F = 2 M, where 2017's is 4 M; SwiGLU's hidden width round(2 F / 3): 341). Each:
    # a feed-forward width of 4 M; embedding 320; six encoder layers and four decoder layers
    "modern30-ffn1024": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0,
                         "feed_forward_size": 1024},
    "modern30-ffn1024-seed1": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0,
                               "feed_forward_size": 1024, "seed": 1},
    "modern30-emb320": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0,
                        "embedding_size": 320},
    "modern30-6+4": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.0,
                     "num_encoder_layers": 6, "num_decoder_layers": 4},
    # the wider feed-forward network with dropout 0.1 (a larger model may need it); and
    # modern30-nodrop with twice the batch at 1.4 times the rate (square root of 2)
    "modern30-ffn1024-drop": {**MODERN_GQA, "learning_rate": 1e-3, "dropout": 0.1,
                              "feed_forward_size": 1024},
    "modern30-batch256": {**MODERN_GQA, "learning_rate": 1.4e-3, "dropout": 0.0,
                          "batch_size": 256},
}
COMBINED = ("best", "best-10")
VARIANTS = {"FG": TransformerFG, "PreLN": TransformerPreLN}
DECODINGS = [(1, 0.6), (4, 0.6), (4, 1.0), (8, 0.6)]     # (beam width, length penalty alpha)


def settings_of(row, minutes, short_minutes, sizes, best=None):
    """The flags of a row: today's recipe, the lecture's sizes, the row's change."""
    recipe = {k: v for k, v in RECIPES["today30"].items() if k != "archive"}
    s = {**recipe, **sizes, "seed": 0, "schedule": "warmup", "shared_vocab": False,
         "num_encoder_layers": sizes["num_layers"], "num_decoder_layers": sizes["num_layers"],
         "max_minutes": minutes, "variant": "FG", "norm": "layernorm",
         "positions": "sinusoidal", "feed_forward": "relu", "full_width_heads": False,
         "kv_heads": None, "tie_embeddings": False, "feed_forward_size": None}
    if row in COMBINED:
        for lever in best:
            s.update(LEVERS[lever])
        if row == "best-10":
            s["max_minutes"] = short_minutes
    else:
        s.update(LEVERS[row])
    return s


class OtherAverages:
    """Moving averages of the weights at other decays than the trainer's own (--also-ema),
    kept beside it in one run: the decays are compared on one training, free of the
    seed-to-seed noise that two runs would add. A callback of ``Trainer.run``: every
    ``every`` steps, average <- d^every average + (1 - d^every) weights, d as the trainer's
    own (Trainer.update_average), which a window of hundreds of steps barely tells from
    every step, at a fraction of the cost; like the trainer's, a decay counts only from
    step `reached_at` on (0.999: 8,990), the start-up's average until then. Saved to
    ``averages.pt`` beside the checkpoints when training ends; a row resumed after a stop
    starts them again (the file's ``since_step`` says from which step)."""

    def __init__(self, model, decays, every=4, start=10):
        self.model, self.every, self.start = model, every, start
        self.averages = {d: copy.deepcopy(model).requires_grad_(False) for d in decays}
        self.since_step = self.seen = None

    def __call__(self, trainer):
        if self.since_step is None:
            self.since_step = trainer.step - 1
        self.seen = trainer.step
        if trainer.step % self.every == 0:
            now = [p.detach() for p in self.model.parameters()]
            with torch.no_grad():
                for decay, average in self.averages.items():
                    d = min(decay, (1 + trainer.step) / (self.start + trainer.step))
                    torch._foreach_lerp_(list(average.parameters()), now, 1 - d ** self.every)
        return False                                     # never stops the run

    def finish(self, trainer):
        """After ``run``: the last step's update (a budget's end stops the run before
        calling back), and a word on each decay the run never reached."""
        if trainer.step != self.seen:
            self(trainer)
        for decay in self.averages:
            reached = reached_at(decay, self.start)
            if trainer.step < reached:
                print(f"--also-ema {decay}: never reached in {trainer.step:,} steps (the "
                      f"start-up decay (1 + step) / ({self.start} + step) is below it until step "
                      f"{reached:,}): this average is the start-up's, as --ema's would be",
                      flush=True)

    def save(self, path):
        torch.save({"since_step": self.since_step, "averages": {
            str(d): m.state_dict() for d, m in self.averages.items()}}, path)


def reached_at(decay, start=10):
    """The first step at which an average's decay is ``decay`` and no longer the start-up's
    (1 + step) / (start + step) (Trainer.update_average's, start 10)."""
    step = math.ceil((start * decay - 1) / (1 - decay) - 1e-6)  # (1 + s) / (c + s) >= decay
    return step if (1 + step) / (start + step) >= decay else step + 1


def train_row(folder, s, corpus, split, ema, also_ema=(), start=10, callback=None):
    """Train (or go on training) one row; returns its last checkpoint's path (and writes
    ``averages.pt`` beside it when ``also_ema`` names other decays; ``callback``: the
    trainer's, called after each step, where ``also_ema`` names none)."""
    done = checkpoint_files(folder)
    payload = load_checkpoint(done[-1]) if done else None
    steps = s.get("max_steps")
    if payload and (payload["step"] >= steps if steps else
                    payload.get("train_seconds", 0) >= 60 * s["max_minutes"] - 1):
        return done[-1]                                       # trained: score it
    rate = {"learning_rate": s["learning_rate"]} if s["variant"] == "PreLN" else {}
    dls = DLStudio(use_gpu=True, batch_size=s["batch_size"], epochs=s["epochs"], seed=s["seed"],
                   **rate)                     # (FG's rate is its warm-up schedule's)
    vocab = Vocabulary.from_payload(payload) if payload else None   # a resumed row's own
    data = TranslationData(corpus, vocab, split=split, tokenizer=s["tokenizer"],
                           vocab_size=s["vocab_size"], shared_vocab=s["shared_vocab"])
    since = {k: s[k] for k in ("norm", "positions", "feed_forward", "kv_heads")}
    x = VARIANTS[s["variant"]](
        dl_studio=dls, data=data, embedding_size=s["embedding_size"],
        num_warmup_steps=s["num_warmup_steps"], lr_mul=s["lr_mul"], schedule=s["schedule"],
        dropout=s["dropout"], label_smoothing=s["label_smoothing"], tokenizer=s["tokenizer"],
        vocab_size=s["vocab_size"], shared_vocab=s["shared_vocab"], checkpoint_freq=1,
        full_width_heads=s["full_width_heads"],
        tie_embeddings=s["tie_embeddings"], feed_forward_size=s["feed_forward_size"], **since)
    enc = x.MasterEncoder(dls, x, s["num_encoder_layers"], s["num_atten_heads"])
    dec = x.MasterDecoderWithMasking(dls, x, s["num_decoder_layers"], s["num_atten_heads"])
    trainer = x.trainer(enc, dec, folder, max_minutes=None if steps else s["max_minutes"],
                        max_steps=steps, ema=ema,
                        resume=bool(done), overwrite=not done)
    others = OtherAverages(trainer.model, also_ema, start=start) if also_ema else None
    trainer.run(callback=others or callback)
    if others:
        others.finish(trainer)
        others.save(os.path.join(folder, "averages.pt"))
    return trainer.last_checkpoint


class StepClock:
    """A trainer's callback that notes when each step ended (``Trainer.run``)."""

    def __init__(self):
        self.ends = []

    def __call__(self, trainer):
        self.ends.append(time.perf_counter())
        return False                                     # never stops the run

    def median(self, skip=10):
        """The median seconds of a step, the first ``skip`` steps left out (warming up)."""
        took = sorted(b - a for a, b in zip(self.ends[skip:], self.ends[skip + 1:]))
        return took[len(took) // 2]


def time_rows(rows, settings, corpus, split, steps, minutes):
    """--time-steps: each row's median step time on this machine (``steps`` steps of it,
    trained afresh into a folder that is then deleted) against the first row's: a row's
    --max-steps on a faster machine is the first row's steps in ``minutes`` here divided by
    that ratio. Also the steps ``minutes`` would give at that speed alone (a real run spends
    some of its minutes on checkpoints and so trains fewer)."""
    first = None
    for row in rows:
        s = {**settings(row), "max_steps": steps}
        clock = StepClock()
        with tempfile.TemporaryDirectory() as folder:
            train_row(folder, s, corpus, split, None, callback=clock)
        took = clock.median()
        first = first or took
        print(f"{row}: {1000 * took:.1f} ms a step ({steps} steps, the median after the "
              f"first 10), {took / first:.2f} x {rows[0]}'s; {int(60 * minutes / took):,} "
              f"steps in {minutes:g} minutes at this speed alone", flush=True)


def score_row(path, dev, held_out):
    """BLEU of every decoding on the development split, raw and averaged weights (and, with
    ``averages.pt`` beside the checkpoint, each other decay's average, greedy and the
    recipe's beam 4 at alpha 1.0, as "ema<decay>"); held-out BLEU of greedy raw weights and
    of the development split's choice."""
    scores, models = {}, {}
    variant = VARIANTS[load_checkpoint(path).get("variant", "FG")]
    decodings = {"raw": DECODINGS, "average": DECODINGS}
    for weights in ("raw", "average"):
        xformer, models[weights], _ = variant.from_checkpoint(path, weights=weights)
    others = os.path.join(os.path.dirname(path), "averages.pt")
    if os.path.isfile(others):
        for decay, state in torch.load(others, weights_only=True)["averages"].items():
            models[f"ema{decay}"] = copy.deepcopy(models["raw"])
            models[f"ema{decay}"].load_state_dict(state)
            decodings[f"ema{decay}"] = [(1, 0.6), (4, 1.0)]
    for weights, model in models.items():
        for beam, alpha in decodings[weights]:
            t0 = time.monotonic()
            r = evaluate_bleu(model, xformer.vocab, dev, beam, show=0, length_penalty=alpha)
            scores[f"{weights} beam {beam} alpha {alpha}"] = {
                "bleu": r["bleu"], "seconds": time.monotonic() - t0}
    choice = max(scores, key=lambda k: scores[k]["bleu"])
    weights, _, beam, _, alpha = choice.split()
    held = {}
    for name, w, b, a in (("greedy raw", "raw", 1, 0.6), ("chosen", weights, int(beam),
                                                           float(alpha))):
        r = evaluate_bleu(models[w], xformer.vocab, held_out, b, show=0, length_penalty=a)
        held[name] = {"bleu": r["bleu"], "sacrebleu": r.get("sacrebleu"),
                      "translatable": r["translatable"], "sentences": r["sentences"]}
    return {"dev": scores, "dev_choice": choice, "held_out": held}


def decays(text):
    """An argparse type: comma-separated decays of moving averages, each between 0 and 1."""
    values = [positive_float(part) for part in text.split(",")]
    if any(not 0 < d < 1 for d in values):
        raise argparse.ArgumentTypeError(f"each decay is between 0 and 1, got {text}")
    return tuple(values)


def best_levers(results):
    """The single changes whose best development BLEU beats the recipe's by more than the
    two seeds of the recipe differ."""
    def dev(row):
        return max(v["bleu"] for v in results[row]["dev"].values())
    noise = abs(dev("baseline") - dev("seed1"))
    return [lever for lever in LEVERS if lever not in ("baseline", "seed1")
            and not lever.startswith("modern") and lever in results
            and dev(lever) - dev("baseline") > noise], noise


def needless(row, best):
    """Why a combined row need not train, or None: "best" made of no change is the baseline
    row again (best-10 still trains: the recipe at the shorter budget is a new figure)."""
    if row == "best" and not best:
        return ("best: no change beat the noise, so the best combination is today's recipe, "
                "the baseline row; it is not trained again")
    return None


def table(results):
    lines = ["| row | change from today's recipe | minutes | steps | dev BLEU, greedy raw | "
             "dev BLEU, best (its decoding) | held-out BLEU greedy raw | held-out BLEU, the "
             "choice (sacreBLEU) | translatable |", "|---" * 9 + "|"]
    for row, r in results.items():
        dev, held = r["dev"], r["held_out"]
        change = ", ".join(f"{k}={v}" for k, v in r["change"].items()) or "none"
        lines.append(
            f"| {row} | {change} | {r['minutes']:.1f} | {r['steps']} | "
            f"{dev['raw beam 1 alpha 0.6']['bleu']:.2f} | {dev[r['dev_choice']]['bleu']:.2f} "
            f"({r['dev_choice']}) | {held['greedy raw']['bleu']:.2f} | "
            f"{held['chosen']['bleu']:.2f} ({held['chosen']['sacrebleu']:.2f}) | "
            f"{held['chosen']['translatable']} / {held['chosen']['sentences']} |")
    return "\n".join(lines)


def averages_line(r):
    """The development BLEU of each average a row kept (--ema's and --also-ema's), greedy
    and beam 4 at alpha 1.0: one line, or "" for a row that kept only --ema's."""
    dev = r["dev"]
    others = sorted({k.split()[0] for k in dev if k.startswith("ema")})
    if not others:
        return ""
    said = []
    for weights in ["average", *others]:
        name = f"{weights} ({r.get('ema', '--ema')})" if weights == "average" else weights
        said.append(f"{name}: " + " / ".join(
            f"{dev[f'{weights} beam {b} alpha {a}']['bleu']:.2f}" for b, a in ((1, 0.6),
                                                                             (4, 1.0))))
    return (f"{r['row']}: development BLEU of its averages, greedy / beam 4 alpha 1.0: "
            + "; ".join(said))


def result_row(r):
    """A finished row as docs/results/sweep.json holds it (benchmarks/results_tables.py)."""
    dev, held = r["dev"], r["held_out"]
    return {"row": r["row"],
            "change": " ".join(f"--{k.replace('_', '-')} {v}" for k, v in r["change"].items())
            or "none",
            "minutes": round(r["minutes"]), "steps": r["steps"],
            "dev_greedy_raw": round(dev["raw beam 1 alpha 0.6"]["bleu"], 2),
            "dev_best": round(dev[r["dev_choice"]]["bleu"], 2), "dev_choice": r["dev_choice"],
            "held_out_greedy_raw": round(held["greedy raw"]["bleu"], 2),
            "held_out_chosen": round(held["chosen"]["bleu"], 2),
            "held_out_chosen_sacrebleu": None if held["chosen"]["sacrebleu"] is None
            else round(held["chosen"]["sacrebleu"], 2),
            "translatable": held["chosen"]["translatable"],
            "sentences": held["chosen"]["sentences"],
            **({"ema": r.get("ema"), "also_ema_start": r.get("also_ema_start"),
                "dev_averages": {k: round(v["bleu"], 2) for k, v in dev.items()
                                 if k.startswith(("average ", "ema"))}}
               if any(k.startswith("ema") for k in dev) else {})}


def main():
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", default=BUNDLED_ARCHIVE, type=existing_file)
    p.add_argument("--out", default="recipe_sweep", help="one folder per row, ROW.json when done")
    p.add_argument("--rows", default=",".join([*LEVERS, *COMBINED]),
                   help="which rows, in this order (default: all)")
    p.add_argument("--minutes", type=positive_float, default=30.0,
                   help="training time per row (default: %(default)s)")
    p.add_argument("--max-steps", type=positive_int, default=None,
                   help="train each row for this many steps instead of --minutes: the steps "
                        "another machine trains in --minutes (a GPU screening a 2-core CPU's "
                        "rows; the row's 'steps' in the CPU's result file)")
    p.add_argument("--time-steps", type=positive_int, default=None, metavar="N",
                   help="train each row N steps here, print its step time against the first "
                        "row's and stop (no scores): what --max-steps to give each row on "
                        "a faster machine")
    p.add_argument("--short-minutes", type=positive_float, default=10.0,
                   help="training time of best-10 (default: %(default)s)")
    p.add_argument("--dev-sentences", type=positive_int, default=1000,
                   help="distinct English sentences of the development split")
    p.add_argument("--ema", type=positive_float, default=0.998,
                   help="decay of the averaged weights every row keeps")
    p.add_argument("--also-ema", type=decays, default=(),
                   help="other decays of the average, kept beside --ema's in the same run and "
                        "scored on the development split (0.999,0.9995); a decay d counts "
                        "from step (START d - 1) / (1 - d) on (START: --also-ema-start; "
                        "0.999 at 10: 8,990), the average's start-up until then")
    p.add_argument("--also-ema-start", type=positive_float, default=10.0,
                   help="the --also-ema averages' start-up, d = min(decay, (1 + step) / "
                        "(START + step)): 10 is the trainer's; 2 reaches 0.999 at step 998, "
                        "its window about step / (START - 1) steps until then")
    p.add_argument("--embedding-size", type=positive_int, default=256)
    p.add_argument("--num-layers", type=positive_int, default=4)
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--table", action="store_true", help="print the finished rows and stop")
    p.add_argument("--results", metavar="FILE.json",
                   help="add each row, when it finishes, to a result file (docs/results/)")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")   # the trainer's progress
    if args.time_steps is not None and args.time_steps < 12:
        p.error(f"--time-steps {args.time_steps}: the median leaves out the first 10 steps "
                "(the warm-up of a run) and needs two more at least: give 12 or more")
    if args.also_ema_start <= 1:
        p.error(f"--also-ema-start {args.also_ema_start}: the start-up (1 + step) / (START + "
                "step) must be below 1, so START > 1 (10 is the trainer's)")
    rows = args.rows.split(",")
    unknown = [r for r in rows if r not in LEVERS and r not in COMBINED]
    if unknown:
        p.error(f"no row {unknown[0]!r}; the rows are {', '.join([*LEVERS, *COMBINED])}")
    if args.time_steps and any(row in COMBINED for row in rows):
        p.error(f"--time-steps times the rows of LEVERS; {', '.join(COMBINED)} are made of "
                "the rows that win, known only once they are scored")
    os.makedirs(args.out, exist_ok=True)

    def finished():
        found = {}
        for row in [*LEVERS, *COMBINED]:
            path = os.path.join(args.out, f"{row}.json")
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    found[row] = json.load(f)
        return found

    if args.table:
        print(table(finished()))
        return 0
    corpus = archive_or_usage(p, args.archive)
    train, held_out = split_pairs(corpus.pairs)                  # the usual held-out split
    distinct = len({en for en, _ in train})
    if args.dev_sentences >= distinct:
        p.error(f"--dev-sentences {args.dev_sentences}: the training split of {args.archive} "
                f"has {distinct} distinct English sentences, and the development split must "
                f"leave some to train on: give fewer (a tenth would be {distinct // 10})")
    train, dev = split_pairs(train, args.dev_sentences / distinct, seed=1)
    sizes = {"embedding_size": args.embedding_size, "num_layers": args.num_layers,
             "num_atten_heads": args.num_atten_heads}
    print(f"machine: {machine()}\n{args.archive}: {len(train)} training pairs, "
          f"{len({en for en, _ in dev})} development and {len({en for en, _ in held_out})} "
          f"held-out English sentences", flush=True)
    if args.time_steps:
        time_rows(rows, lambda row: settings_of(row, args.minutes, args.short_minutes, sizes),
                  corpus, (train, held_out), args.time_steps, args.minutes)
        return 0
    for row in rows:
        results = finished()
        if row in results:
            print(f"{row}: done ({os.path.join(args.out, row + '.json')})")
            continue
        best = None
        if row in COMBINED:
            missing = [r for r in LEVERS if r not in results and not r.startswith("modern")]
            if missing:
                print(f"{row}: needs the rows {', '.join(missing)} first", file=sys.stderr)
                return 1
            best, noise = best_levers(results)
            print(f"{row}: combines {', '.join(best) or 'nothing (no change beat the noise)'}"
                  f" (noise floor {noise:.2f} BLEU)")
            reason = needless(row, best)
            if reason:
                print(reason, flush=True)
                continue
        s = settings_of(row, args.minutes, args.short_minutes, sizes, best)
        if args.max_steps:
            s["max_steps"] = args.max_steps
        budget = (f"{args.max_steps:,} steps" if args.max_steps
                  else f"{s['max_minutes']:g} minutes")
        print(f"{row}: training for {budget}: {s}", flush=True)
        path = train_row(os.path.join(args.out, row), s, corpus, (train, held_out), args.ema,
                         args.also_ema, args.also_ema_start)
        payload = load_checkpoint(path)
        result = {"row": row, "change": ({k: True for k in best} if best is not None
                                         else LEVERS[row]),
                  "settings": s, "checkpoint": path, "steps": payload["step"],
                  "minutes": payload["train_seconds"] / 60, "machine": machine(),
                  "ema": args.ema, "also_ema_start": args.also_ema_start,
                  **score_row(path, dev, held_out)}
        with open(os.path.join(args.out, f"{row}.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        if args.results:
            record(args.results, result_row(result), as_typed("benchmarks/recipe_sweep.py",
                                                             sys.argv[1:]))
        print(table({row: result}), flush=True)
        line = averages_line(result)
        if line:
            print(line, flush=True)
    print("\n" + table(finished()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TrainingInterrupted as stopped:      # Ctrl-C: the row goes on next time
        print(f"{stopped}\nRun the same command again to go on.", file=sys.stderr)
        sys.exit(130)
