"""Training for a wall-clock budget while measuring held-out BLEU: what
``benchmarks/bleu_vs_time.py`` and ``ExamplesTransformers/compare_fg_preln.py`` run."""

import time

from .evaluation import evaluate_bleu
from .training import Trainer

__all__ = ["budget_run"]


def budget_run(xformer, master_encoder, master_decoder, minutes, every, report=print):
    """Train for ``minutes`` of training time, scoring the held-out split (greedy) every
    ``every`` minutes; evaluation time is not counted as training time.

    Returns:
        list of rows: minutes, steps, epoch, loss (mean of the last 100 steps), bleu,
        sacrebleu, eval_seconds.
    """
    trainer = Trainer(xformer, master_encoder, master_decoder, checkpoints_dir=None)
    rows, clock = [], {"eval": 0.0, "start": time.monotonic(), "next": every}

    def evaluate(minutes_now):
        t0 = time.monotonic()
        result = evaluate_bleu(xformer, trainer.model, xformer.held_out_corpus, show=0)
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
        if minutes_now >= clock["next"] - 1e-9:
            evaluate(minutes_now)
            clock["next"] += every
        return minutes_now >= minutes

    trainer.run(callback=every_step)
    return rows
