"""Experiments the scripts share: training for a budget while measuring held-out BLEU
(``benchmarks/bleu_vs_time.py``, ``ExamplesTransformers/compare_fg_preln.py``), and training
a homework's container beside the unmodified one (``ExamplesTransformers/homework_*.py``)."""

import os
import time

import torch

from ..evaluation.decode_and_score import evaluate_bleu
from ..runtime.studio import DLStudio
from .common.results import machine_fields

__all__ = ["budget_run", "compare_containers", "format_comparison", "machine"]


def machine():
    """The processor (and GPU) a benchmark ran on, and torch's version and threads."""
    m = machine_fields()
    gpu = f", GPU {m['gpu']}" if m["gpu"] else ""
    return (f"{m['cpu']}, {m['cores']} cores{gpu}; torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads")


def budget_run(xformer, master_encoder, master_decoder, budget, every, report=print,
               unit="minutes", precision="fp32"):
    """Train for ``budget`` minutes of training time (``unit="minutes"``) or ``budget``
    optimiser steps (``unit="steps"``), scoring the held-out split (greedy) every ``every``
    units; evaluation time is not counted as training time. A budget in steps gives the
    same training to every run even when the machine is busy with something else.
    ``precision``: of training (see DLStudio.runtime.precision); evaluation runs in fp32.

    Returns:
        list of rows: minutes, steps, epoch, loss (mean of the last 100 steps), bleu,
        sacrebleu, eval_seconds, translatable (held-out sentences the vocabulary can read)
        and sentences.
    """
    if unit not in ("minutes", "steps"):
        raise ValueError(f"unit must be 'minutes' or 'steps', not {unit!r}")
    if budget <= 0 or every <= 0:
        raise ValueError(f"budget and every must be > 0 (got {budget}, {every})")
    trainer = xformer.trainer(master_encoder, master_decoder,
                                               precision=precision)
    rows, clock = [], {"eval": 0.0, "start": time.monotonic(), "next": every}

    def evaluate(minutes_now):
        t0 = time.monotonic()
        result = evaluate_bleu(trainer.model, xformer.vocab, xformer.held_out_corpus, show=0)
        trainer.model.train()
        spent = time.monotonic() - t0
        clock["eval"] += spent
        recent = trainer.train_losses[-100:] or [float("nan")]
        row = {"minutes": round(minutes_now, 2), "steps": trainer.step, "epoch": trainer.epoch,
               "loss": sum(recent) / len(recent), "bleu": result["bleu"],
               "sacrebleu": result.get("sacrebleu", float("nan")), "eval_seconds": spent,
               "translatable": result["translatable"], "sentences": result["sentences"]}
        rows.append(row)
        report(row)

    def every_step(trainer):
        minutes_now = (time.monotonic() - clock["start"] - clock["eval"]) / 60
        spent = minutes_now if unit == "minutes" else trainer.step
        done = spent >= budget
        if spent >= clock["next"] - 1e-9 or done:
            evaluate(minutes_now)
            clock["next"] += every
        return done

    trainer.run(callback=every_step)
    return rows


def compare_containers(classes, archive, out, *, epochs=3, batch_size=64, embedding_size=128,
                       num_layers=2, num_atten_heads=4, num_warmup_steps=400, seed=0,
                       max_steps=None, use_gpu=True, settings=None):
    """Train each container class the same way (same archive, split, seed, sizes, batches
    and number of steps) and measure it on the held-out split. Checkpoints go to
    ``out/<class name>/``. ``settings``: more keywords for every container (switches).

    Returns:
        one dict per class: name, parameters, seconds (of training), loss (mean of the last
        50 steps), bleu (held-out, greedy), checkpoints_dir, and the trained xformer,
        encoder and decoder.
    """
    rows = []
    for cls in classes:
        folder = os.path.join(out, cls.__name__)
        dls = DLStudio(use_gpu=use_gpu, batch_size=batch_size, epochs=epochs, seed=seed,
                       path_saved_model=os.path.join(folder, "saved_model.pt"))
        xformer = cls(dl_studio=dls, data_archive=archive, embedding_size=embedding_size,
                      num_warmup_steps=num_warmup_steps, **(settings or {}))
        encoder = xformer.MasterEncoder(dls, xformer, num_layers, num_atten_heads)
        decoder = xformer.MasterDecoderWithMasking(dls, xformer, num_layers, num_atten_heads)
        start = time.monotonic()
        trainer = xformer.run_code_for_training(dls, encoder, decoder, checkpoints_dir=folder,
                                                overwrite=True, max_steps=max_steps)
        seconds = time.monotonic() - start
        result = evaluate_bleu(trainer.model, xformer.vocab, xformer.held_out_corpus)
        recent = trainer.train_losses[-50:]
        rows.append({"name": cls.__name__, "seconds": seconds, "bleu": result["bleu"],
                     "parameters": sum(p.numel() for p in trainer.model.parameters()),
                     "loss": sum(recent) / len(recent), "checkpoints_dir": folder,
                     "xformer": xformer, "encoder": encoder, "decoder": decoder,
                     "steps": trainer.step, "last_epoch": trainer.last_epoch})
    return rows


def format_comparison(rows):
    """The rows of `compare_containers` as a table, the first row as the baseline."""
    lines = [f"{'model':<34}{'parameters':>12}{'steps':>8}{'train s':>9}{'loss':>8}"
             f"{'BLEU':>8}{'vs first':>10}"]
    for row in rows:
        lines.append(f"{row['name']:<34}{row['parameters']:>12,}{row['steps']:>8}"
                     f"{row['seconds']:>9.1f}{row['loss']:>8.3f}{row['bleu']:>8.2f}"
                     f"{row['bleu'] - rows[0]['bleu']:>+10.2f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Pre-training, then fine-tuning (Radford et al. 2018), with scarce translation pairs.
def scarce_labels(corpus, num_pairs, seed=0, held_out_fraction=0.05, split_seed=0):
    """The lecture's scarce-labels case from one archive: the usual held-out split, then
    ``num_pairs`` of the training pairs as labelled data and the other training pairs'
    sentences as unlabelled text (never a held-out sentence or reference).

    Returns: (labelled pairs, held-out pairs, unlabelled English, unlabelled Spanish)
    """
    import random

    from ..data import split_pairs
    train, held_out = split_pairs(corpus.pairs, held_out_fraction, split_seed)
    order = list(range(len(train)))
    random.Random(seed).shuffle(order)
    labelled = [train[i] for i in sorted(order[:num_pairs])]
    rest = [train[i] for i in sorted(order[num_pairs:])]
    held_en, held_es = {en for en, _ in held_out}, {es for _, es in held_out}
    return (labelled, held_out, [en for en, _ in rest if en not in held_en],
            [es for _, es in rest if es not in held_es])


def _timed_training(trainer, steps):
    """Train ``steps`` optimiser steps; return the minutes they took."""
    start = time.monotonic()
    trainer.max_steps = trainer.step + steps
    trainer.run()
    return (time.monotonic() - start) / 60


def pretrain_gpt(xformer, sentences, lang, steps, num_layers, num_atten_heads, seed=0):
    """A GPT of the translation model's sizes, layout and tokenizer for ``lang``, trained
    ``steps`` steps on ``sentences``. Returns (payload for init_from_gpt, minutes,
    held-out perplexity dict)."""
    from ..checkpoints import make_payload
    from ..Transformers import TransformerGPT
    dls = DLStudio(use_gpu=xformer.dl_studio.device.type != "cpu", seed=seed, epochs=10_000,
                   batch_size=xformer.dl_studio.batch_size,
                   learning_rate=xformer.dl_studio.learning_rate)
    gpt = TransformerGPT(dl_studio=dls, sentences=sentences, lang=lang, archive_text=True,
                         vocab=xformer.vocab.tokenizers[lang],
                         embedding_size=xformer.embedding_size,
                         num_basic_decoders=num_layers, num_atten_heads=num_atten_heads,
                         layout="PreLN" if xformer.norm_first else "FG",
                         num_warmup_steps=xformer.num_warmup_steps, lr_mul=xformer.lr_mul,
                         dropout=xformer.dropout, save_checkpoints=False)
    trainer = gpt.trainer()
    minutes = _timed_training(trainer, steps)
    return make_payload(gpt, {}), minutes, gpt.perplexity()


def pretraining_run(make_container, run, steps, pretrain_steps, text, sizes, report=print,
                    counted=True):
    """One run of the experiment: "a" from scratch, "b" the decoder from a GPT pre-trained
    on the unlabelled Spanish, "c" the encoder too, from a GPT on the unlabelled English
    (the pre-training steps shared between the two). Every run trains ``steps`` optimiser
    steps in all, pre-training included; ``counted=False``: pre-training is outside the
    budget (a pre-trained model is reused in practice), and every run fine-tunes ``steps``.

    Returns: a row (run, steps, minutes, BLEU, sacreBLEU, translatable, perplexities).
    """
    from ..containers.pretrained import init_from_gpt
    xformer, encoder, decoder = make_container()
    sides = {"a": [], "b": ["decoder"], "c": ["decoder", "encoder"]}[run]
    row = {"run": run, "pretrain_steps": 0, "pretrain_minutes": 0.0}
    for side in sides:
        lang = "es" if side == "decoder" else "en"
        n = pretrain_steps // len(sides)
        payload, minutes, ppl = pretrain_gpt(xformer, text[lang], lang, n, *sizes)
        init_from_gpt(xformer, decoder if side == "decoder" else encoder, payload, side)
        row.update({f"ppl_{lang}": ppl["per_piece"], f"ppl_word_{lang}": ppl["per_word"]})
        row["pretrain_steps"] += n
        row["pretrain_minutes"] += minutes
    trainer = xformer.trainer(encoder, decoder)
    finetune = steps - row["pretrain_steps"] if counted else steps
    row.update(finetune_steps=finetune, finetune_minutes=_timed_training(trainer, finetune))
    result = evaluate_bleu(trainer.model, xformer.vocab, xformer.held_out_corpus, show=0)
    row.update(bleu=result["bleu"], sacrebleu=result.get("sacrebleu", float("nan")),
               translatable=result["translatable"], sentences=result["sentences"])
    report(row)
    return row
