"""Training for a wall-clock budget while measuring held-out BLEU: what
``benchmarks/bleu_vs_time.py`` and ``ExamplesTransformers/compare_fg_preln.py`` run."""

import time

from .evaluation import evaluate_bleu
from .training import TranslationTrainer

__all__ = ["budget_run"]


def budget_run(xformer, master_encoder, master_decoder, budget, every, report=print,
               unit="minutes"):
    """Train for ``budget`` minutes of training time (``unit="minutes"``) or ``budget``
    optimiser steps (``unit="steps"``), scoring the held-out split (greedy) every ``every``
    units; evaluation time is not counted as training time. A budget in steps gives the
    same training to every run even when the machine is busy with something else.

    Returns:
        list of rows: minutes, steps, epoch, loss (mean of the last 100 steps), bleu,
        sacrebleu, eval_seconds.
    """
    if unit not in ("minutes", "steps"):
        raise ValueError(f"unit must be 'minutes' or 'steps', not {unit!r}")
    if budget <= 0 or every <= 0:
        raise ValueError(f"budget and every must be > 0 (got {budget}, {every})")
    trainer = TranslationTrainer.for_container(xformer, master_encoder, master_decoder)
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
               "sacrebleu": result.get("sacrebleu", float("nan")), "eval_seconds": spent}
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
