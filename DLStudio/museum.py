"""The bug museum: real Transformer mistakes, each one switched on by name on an otherwise
correct model, trained beside that model for the same budget to show what it costs.

Every exhibit is a subclass made through the homework contract (override one nested class
or one method of the container); nothing in ``Transformers.py`` knows about them. Several
are the mistakes of DLStudio 2.5.8 itself; students make the same ones in homework.

    python3 ExamplesTransformers/bug_museum.py --exhibit no_causal_mask
    python3 ExamplesTransformers/bug_museum.py --all --out museum/

Exhibits (``EXHIBITS``):
    untrained_embeddings  the word embeddings never reach the optimiser
    teacher_forcing       inference feeds the reference, not the model's own words
    training_sentences    "held-out" BLEU measured on training sentences
    no_causal_mask        the decoder sees the word it must predict
    no_padding_mask       attention reads the padding after each English sentence
    no_scaling            softmax(QK^T) without the 1/sqrt(s_qkv) of Vaswani et al. eq. 1
    no_warmup             post-LN at the warm-up's peak rate from the first step
    frozen_class_token    the visTransformer's class token never trains
"""

import math
import sys
import time
import warnings

import torch

from .data import BUNDLED_ARCHIVE
from .data.images import SHAPE_CLASSES
from .evaluation.decode_and_score import bleu_scores, evaluate_bleu, held_out_references
from .model.tokens import padding_mask
from .runtime.studio import DLStudio
from .Transformers import TransformerFG, visTransformer

__all__ = ["Correct", "CorrectViT", "EXHIBITS", "run_exhibit", "teacher_forced_bleu",
           "teacher_forced_translations"]


# ---------------------------------------------------------------------------------------
# The correct models, and how each is scored.
class Correct(TransformerFG):
    """TransformerFG as it should be; the translation exhibits are its subclasses."""

    def museum_score(self, model):
        """Held-out BLEU (greedy), as the test scripts measure it."""
        return evaluate_bleu(model, self.vocab, self.held_out_corpus)["bleu"]

    def honest_score(self, model):
        """The same model measured correctly, for an exhibit whose measure is the bug."""
        return None


def teacher_forced_translations(model, vocab, pairs):
    """'Translations' read off one decoder pass over each English sentence's first
    reference: at every position the model is handed the reference's previous words
    (teacher forcing, as in training), and its best guess for the next word is kept. It
    needs the answer, so it cannot translate anything new.

    Returns: {English sentence: predicted words}, the references {English: [words, ...]}.
    """
    refs = held_out_references(pairs)
    english = list(refs)
    device = next(model.parameters()).device
    src = vocab.encode(english, "en").to(device)                          # (B, T_src)
    tgt = vocab.encode([r[0] for r in refs.values()], "es").to(device)   # (B, T_tgt)
    model.eval()
    with torch.no_grad():
        guesses = model(src, tgt[:, :-1]).argmax(-1)                      # (B, T_tgt - 1)
    hyps = {en: vocab.words(torch.cat([tgt[i, :1], g]))
            for i, (en, g) in enumerate(zip(english, guesses))}
    return hyps, refs


def teacher_forced_bleu(model, vocab, pairs):
    """BLEU of `teacher_forced_translations`: what a decoder that never feeds its own
    predictions back reports."""
    hyps, refs = teacher_forced_translations(model, vocab, pairs)
    return bleu_scores([hyps[en] for en in refs], list(refs.values()))["bleu"]


# ---------------------------------------------------------------------------------------
# The exhibits: one subclass each.
class UntrainedEmbeddings(Correct):
    """DLStudio 2.5.8's translation model: its word embeddings are made outside the module
    the optimiser sees, so they stay random."""

    class EmbeddingsGenerator(Correct.EmbeddingsGenerator):
        def __init__(self, xformer, lang, embedding_size):
            super().__init__(xformer, lang, embedding_size)
            self.embedding.weight.requires_grad_(False)               # the bug


class TeacherForcing(Correct):
    """Decoding without feeding the model's own words back: each position is given the
    reference's previous word (what training does), also at test time."""

    def museum_score(self, model):
        return teacher_forced_bleu(model, self.vocab, self.held_out_corpus)

    honest_score = Correct.museum_score


class TrainingSentences(Correct):
    """DLStudio 2.5.8 scores translation on sentences it trained on."""

    def read_data(self, corpus=None, vocab=None):
        data = super().read_data(corpus, vocab)
        self.honest_held_out = data.held_out_pairs
        return data.with_split(data.training_pairs,
                               data.training_pairs[:len(data.held_out_pairs)])   # the bug

    def honest_score(self, model):
        return evaluate_bleu(model, self.vocab, self.honest_held_out)["bleu"]


class NoCausalMask(Correct):
    """The decoder's self-attention without the causal mask: position t sees word t + 1,
    the word it is asked to predict."""

    class MasterDecoderWithMasking(Correct.MasterDecoderWithMasking):
        def __init__(self, dls, xformer, num_basic_decoders=4, num_atten_heads=4,
                     masking=True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                super().__init__(dls, xformer, num_basic_decoders, num_atten_heads,
                                 masking=False)                       # the bug


class NoPaddingMask(Correct):
    """Attention reads the EOS padding after each English sentence as if it were words."""

    class EncoderDecoder(Correct.EncoderDecoder):
        def encode(self, src):
            nothing = torch.zeros_like(padding_mask(src))[:, None, None, :]   # the bug
            return self.encoder(self.embeddings_generator_en(src), nothing), nothing


class NoScaling(Correct):
    """Attention scores Q K^T not divided by sqrt(s_qkv): the softmax saturates."""

    class AttentionHead(Correct.AttentionHead):
        def forward(self, x, mask=None, memory=None):
            kv = x if memory is None else memory
            Q, K, V = self.WQ(x), self.WK(kv), self.WV(kv)                 # (B, T, s_qkv)
            scores = Q @ K.transpose(-2, -1)                  # the bug: no / sqrt(s_qkv)
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))           # (B, T_q, T_k)
            weights = scores.softmax(dim=-1)
            self.keep_weights(weights)
            return weights @ V                                             # (B, T_q, s_qkv)


class NoWarmup(Correct):
    """Post-LN trained at the warm-up schedule's peak rate from the first step."""

    class ScheduledOptim(Correct.ScheduledOptim):
        def lr_at(self, step):
            peak = self.lr_mul * self.d_model ** -0.5 * self.n_warmup_steps ** -0.5
            return peak                                               # the bug: no ramp


class CorrectViT(visTransformer):
    """The visTransformer as it should be."""


class FrozenClassToken(CorrectViT):
    """DLStudio 2.5.8's visTransformer: its class token is a tensor, not a parameter."""

    class PatchEmbeddingGenerator(CorrectViT.PatchEmbeddingGenerator):
        def __init__(self, vit, in_channels, patch_size, image_size, embedding_size):
            super().__init__(vit, in_channels, patch_size, image_size, embedding_size)
            self.class_token.requires_grad_(False)                    # the bug


#: name -> (the exhibit's class, what the bug does, why it can cost little here)
EXHIBITS = {
    "untrained_embeddings": (UntrainedEmbeddings, "word embeddings never trained", ""),
    "teacher_forcing": (TeacherForcing, "inference fed the reference words",
                        "on this easy corpus a trained model's errors rarely derail the rest of "
                        "its sentence, so the reference it is fed changes little (more early "
                        "in training); the bug still cannot translate a sentence with no "
                        "reference"),
    "training_sentences": (TrainingSentences, "BLEU measured on training sentences",
                           "the synthetic corpus's held-out sentences are made of the same "
                           "patterns as its training sentences, so the leak is small here"),
    "no_causal_mask": (NoCausalMask, "decoder sees the word it must predict", ""),
    "no_padding_mask": (NoPaddingMask, "attention reads the padding",
                        "sentences are short and padded with one token (EOS), which the model "
                        "learns to ignore; it costs more where lengths vary more"),
    "no_scaling": (NoScaling, "no 1/sqrt(s_qkv) before the softmax",
                   "with s_qkv = 16 the scores are only 4 times too large; the cost grows with "
                   "the head size"),
    "no_warmup": (NoWarmup, "post-LN at the peak rate from step 1",
                  "a 2-layer model at this rate trains fine, even faster: warm-up matters for "
                  "deep post-LN stacks (README: FG with and without warm-up)"),
    "frozen_class_token": (FrozenClassToken, "the class token never trains",
                           "the class token's position embedding is trained, and it can "
                           "stand in for the token"),
}


# ---------------------------------------------------------------------------------------
# Training the correct model and an exhibit for the same budget.
SIZES = {"embedding_size": 64, "num_layers": 2, "num_atten_heads": 4, "batch_size": 64,
         "num_warmup_steps": 400, "num_images": 4000}


def _translation_run(cls, steps, seed, archive, device, sizes):
    dls = DLStudio(use_gpu=device != "cpu", batch_size=sizes["batch_size"], epochs=1000,
                   seed=seed)
    x = cls(dl_studio=dls, data_archive=archive, embedding_size=sizes["embedding_size"],
            num_warmup_steps=sizes["num_warmup_steps"])
    enc = x.MasterEncoder(dls, x, sizes["num_layers"], sizes["num_atten_heads"])
    dec = x.MasterDecoderWithMasking(dls, x, sizes["num_layers"], sizes["num_atten_heads"])
    trainer = x.trainer(enc, dec, max_steps=steps)
    trainer.run()
    return (trainer.train_losses, x.museum_score(trainer.model),
            x.honest_score(trainer.model))


def _image_run(cls, steps, seed, device, sizes):
    dls = DLStudio(use_gpu=device != "cpu", batch_size=sizes["batch_size"], epochs=1000,
                   seed=seed, learning_rate=1e-3)
    vit = cls(dl_studio=dls, patch_size=(8, 8), embedding_size=sizes["embedding_size"],
              num_basic_encoders=sizes["num_layers"], num_atten_heads=sizes["num_atten_heads"],
              classes=SHAPE_CLASSES)
    vit.load_shapes_dataset(sizes["num_images"], 1000, seed=seed)
    trainer = vit.trainer(None, max_steps=steps)
    trainer.run()
    accuracy = (vit.predict(vit.test_set.images).cpu() == vit.test_set.labels).float().mean()
    return trainer.train_losses, 100 * float(accuracy), None


_DONE = {}


def run_exhibit(name, steps=600, seed=0, archive=BUNDLED_ARCHIVE, device="cpu", sizes=None):
    """Train the correct model and exhibit ``name`` with the same seed, sizes, batches and
    number of steps; score both (held-out BLEU, or test accuracy for the image exhibit).

    Returns:
        dict: name, what, metric, steps, correct / exhibit (scores), correct_loss /
        exhibit_loss (mean of the last 50 steps), losses (both curves), honest (the
        exhibit model's score measured correctly, where its own measure is the bug), note,
        seconds.
    """
    if name not in EXHIBITS:
        raise ValueError(f"no exhibit {name!r}; the exhibits: {', '.join(EXHIBITS)}")
    cls, what, note = EXHIBITS[name]
    sizes = {**SIZES, **(sizes or {})}
    start = time.monotonic()
    images = issubclass(cls, visTransformer)
    metric = "test accuracy %" if images else "held-out BLEU"

    def train(c):
        key = (c, steps, seed, archive, device, tuple(sorted(sizes.items())))
        if key not in _DONE:        # once per process: the correct model serves every exhibit
            _DONE[key] = (_image_run(c, steps, seed, device, sizes) if images else
                          _translation_run(c, steps, seed, archive, device, sizes))
        return _DONE[key]

    runs = [train(CorrectViT if images else Correct), train(cls)]

    def tail(losses):
        recent = [v for v in losses[-50:] if math.isfinite(v)]
        return sum(recent) / len(recent) if recent else float("nan")

    return {"name": name, "what": what, "metric": metric, "steps": steps,
            "correct": runs[0][1], "exhibit": runs[1][1], "honest": runs[1][2],
            "correct_loss": tail(runs[0][0]), "exhibit_loss": tail(runs[1][0]),
            "losses": (runs[0][0], runs[1][0]), "note": note,
            "seconds": time.monotonic() - start}



# ---------------------------------------------------------------------------------------
# The script: ExamplesTransformers/bug_museum.py.
def format_rows(rows):
    """A Markdown table of `run_exhibit` results."""
    lines = ["| exhibit | the bug | measure | correct | with the bug | bug, measured honestly "
             "| training loss, correct / bug |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        honest = "" if r["honest"] is None else f"{r['honest']:.2f}"
        lines.append(f"| {r['name']} | {r['what']} | {r['metric']} | {r['correct']:.2f} | "
                     f"{r['exhibit']:.2f} | {honest} | {r['correct_loss']:.3f} / "
                     f"{r['exhibit_loss']:.3f} |")
    return "\n".join(lines)


def plot_losses(rows, path):
    """One panel per exhibit: the correct model's training loss and the exhibit's."""
    from matplotlib.figure import Figure
    columns = min(4, len(rows))
    fig = Figure(figsize=(4 * columns, 3 * math.ceil(len(rows) / columns)))
    for i, r in enumerate(rows):
        ax = fig.add_subplot(math.ceil(len(rows) / columns), columns, i + 1)
        for losses, label in zip(r["losses"], ("correct", "with the bug")):
            ax.plot(range(1, len(losses) + 1), losses, label=label, linewidth=0.8)
        ax.set_title(f"{r['name']}: {r['metric']} {r['correct']:.1f} vs {r['exhibit']:.1f}",
                     fontsize=8)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel("training loss", fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    """``bug_museum.py --exhibit NAME`` or ``--all``: train, score, compare."""
    import os

    from .cli.common import Parser, positive_int, resolve_archive, run_job

    def run(argv):
        p = Parser(
            description="Train a correct model and one with a real Transformer bug for the "
                        "same budget on the bundled corpus, and show what the bug costs.",
            epilog="exhibits: " + "; ".join(f"{n}: {w}" for n, (_, w, _) in EXHIBITS.items()))
        which = p.add_mutually_exclusive_group(required=True)
        which.add_argument("--exhibit", choices=list(EXHIBITS))
        which.add_argument("--all", action="store_true", help="every exhibit: a table "
                           "(museum.md) and a figure of the loss curves (museum.png)")
        p.add_argument("--steps", type=positive_int, default=600,
                       help="optimiser steps for each model (default: %(default)s)")
        p.add_argument("--archive", default=BUNDLED_ARCHIVE)
        p.add_argument("--embedding-size", type=positive_int, default=SIZES["embedding_size"])
        p.add_argument("--num-layers", type=positive_int, default=SIZES["num_layers"])
        p.add_argument("--out", default="museum", help="folder for the table and figure")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--cpu", action="store_true")
        p.add_argument("--results", default="", metavar="FILE",
                       help="add each exhibit's figures to this result file "
                            "(docs/results/museum.json makes docs/museum.md's table)")
        args = p.parse_args(argv)
        device = "cpu" if args.cpu or not torch.cuda.is_available() else "cuda"
        sizes = {"embedding_size": args.embedding_size, "num_layers": args.num_layers}
        rows = []
        for name in (EXHIBITS if args.all else [args.exhibit]):
            row = run_exhibit(name, args.steps, args.seed, resolve_archive(args.archive),
                              device, sizes)
            rows.append(row)
            if args.results:
                from .cli.common.results import as_typed, record
                record(args.results, {k: row[k] for k in (
                    "name", "what", "metric", "steps", "correct", "exhibit", "honest",
                    "correct_loss", "exhibit_loss")} | {"seed": args.seed, **sizes},
                    as_typed("ExamplesTransformers/bug_museum.py", argv or sys.argv[1:]))
            honest = "" if row["honest"] is None else \
                f" (the same model measured honestly: {row['honest']:.2f})"
            print(f"{name}: {row['what']}. {row['metric']} {row['correct']:.2f} correct, "
                  f"{row['exhibit']:.2f} with the bug{honest}; training loss "
                  f"{row['correct_loss']:.3f} / {row['exhibit_loss']:.3f}"
                  + (f". Note: {row['note']}" if row["note"] else ""))
        os.makedirs(args.out, exist_ok=True)
        table = format_rows(rows)
        with open(os.path.join(args.out, "museum.md"), "w", encoding="utf-8") as f:
            f.write(table + "\n")
        plot_losses(rows, os.path.join(args.out, "museum.png"))
        print("\n" + table)
        print(f"\nwrote {args.out}/museum.md and {args.out}/museum.png")
        return 0
    return run_job(run, argv)
