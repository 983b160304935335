"""The training loop shared by every model: TransformerFG, TransformerPreLN, TransformerGPT,
visTransformer.

    for each batch:  zero_grad -> forward -> loss -> backward -> clip -> step -> log

`Trainer` is that loop, with checkpoints, resuming, Ctrl-C and the divergence check; the loss
is the model's own (``model.loss``: architecture.py). `TranslationTrainer` feeds it sentence
pairs, `LanguageModelTrainer` sentences and `ImageTrainer` images. A trainer receives the model, its
optimiser and (for translation) the vocabulary; it never calls back into the container:
``for_container`` / ``for_model`` read the container's settings once, when it is built.
Batches are tensors built once: every pair is turned into token ids before training, and
each batch is a set of rows cut to its longest sentence. Pairs of similar length are batched
together (length bucketing), so little time goes into padding.

Under torchrun (DLStudio.runtime.distributed) the same loop trains with DistributedDataParallel:
each rank takes its share of every global batch, the loss is normalised by the global
count of loss terms, and rank 0 alone writes checkpoints and logs.
"""

import copy
import hashlib
import json
import logging
import math
import os
import shutil
import signal
import threading
import time
import uuid

import torch
from tqdm.auto import tqdm

from ..data import pairs_fingerprint
from ..data.checkpoints import (
    CheckpointError,
    check_resumable,
    check_same_average,
    check_same_run,
    checkpoint_files,
    checkpoint_path,
    free_name,
    load_checkpoint,
    load_into,
    make_payload,
    mark_written,
    refuse_saved_model_of_theirs,
    save_checkpoint,
    save_final,
    weights_of,
    with_weights,
)
from ..data.images import random_crops_and_flips
from ..evaluation.decode_and_score import evaluate_bleu
from ..evaluation.generation import encode_sentences, perplexity
from ..model.tokens import padding_mask
from ..runtime.distributed import ONE_PROCESS
from ..runtime.precision import Precision
from .schedule import BudgetedOptim, RecentSpeed, budget_end, clip_gradient_norm

__all__ = ["Trainer", "TranslationTrainer", "ImageTrainer", "TrainingDiverged",
           "TrainingInterrupted", "encode_pairs", "bucketed_batches", "train_translation",
           "train_images", "LanguageModelTrainer", "train_language_model"]

log = logging.getLogger(__name__)


def _duration(seconds):
    """12 s, 7 min 05 s, 1 h 02 min."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class ProgressLines:
    """A line in the log about every ``every`` seconds, for output that is not a terminal
    (nohup, a batch job, a captured notebook cell), where the progress bar is off: the step,
    the recent loss, the rate, the time since this run started and the time left (the
    nearest of the epochs, ``max_steps`` and ``max_minutes``, at this run's speed)."""

    def __init__(self, trainer, start, every):
        self.trainer, self.start, self.every = trainer, start, every
        self.last, self.first_step = start, trainer.step

    def after_step(self, total_steps):
        now = self.trainer.clock()
        if now - self.last < self.every:
            return
        self.last, t = now, self.trainer
        elapsed = now - self.start
        per_step = elapsed / max(t.step - self.first_step, 1)
        left = [(total_steps - t.step) * per_step]
        if t.max_steps:
            left.append((t.max_steps - t.step) * per_step)
        if t.max_minutes:                 # a budget's minutes count the earlier runs too
            budgeted = isinstance(t.optimizer, BudgetedOptim)
            left.append(60 * t.max_minutes - (t.seconds_trained() if budgeted else elapsed))
        recent = t.train_losses[-50:]
        log.info("step %d (epoch %d): loss %.4f (mean of the last %d steps), lr %.2e, "
                 "%s elapsed, about %s left", t.step, t.epoch + 1, sum(recent) / len(recent),
                 len(recent), t.current_lr(), _duration(elapsed), _duration(min(left)))


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message says where and what to try."""


def encode_pairs(vocab, pairs):
    """Token ids of all pairs, built once (``vocab``: a Vocabulary).

    Returns:
        src (N, max_seq_length), tgt (N, max_seq_length) LongTensors (EOS-padded), and the
        number of tokens of each sentence (SOS and EOS included) as two (N,) tensors.
    """
    src = vocab.encode([en for en, _ in pairs], "en")
    tgt = vocab.encode([es for _, es in pairs], "es")
    src_len = (~padding_mask(src)).sum(1)
    tgt_len = (~padding_mask(tgt)).sum(1)
    return src, tgt, src_len, tgt_len


def bucketed_batches(lengths, batch_size, generator, pool=50):
    """Index batches of sentences of similar length, in random order.

    The indices are shuffled, cut into pools of ``pool`` batches, each pool is sorted by
    length and cut into batches, and the batches are shuffled: random, yet each batch has
    little padding.
    """
    order = torch.randperm(len(lengths), generator=generator)
    batches = []
    for start in range(0, len(order), batch_size * pool):
        chunk = order[start:start + batch_size * pool]
        chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    perm = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in perm]


class ScoreMissing(ValueError):
    """The held-out score cannot be computed (``held_out_score`` says why): the checkpoint
    records it as missing, and training goes on."""


class TrainingInterrupted(RuntimeError):
    """Ctrl-C or SIGTERM during training: a checkpoint was written; the message says where
    and how to resume."""


class Trainer:
    """The one training loop, for every model of the package (d2l's design): translation
    (`TranslationTrainer`) and images (`ImageTrainer`) differ only in their batches, their
    loss and what goes into a checkpoint; the loop, the checkpoints, resuming, Ctrl-C and
    the divergence check are written once, here.

        for each batch:  zero_grad -> forward -> loss -> backward -> clip -> step -> log

    Args:
        model:            the nn.Module to train (moved to ``dls.device``); it describes
                          itself for checkpoints (``description()``, see DLStudio.data.checkpoints).
        optimizer:        its optimiser (``make_optimizer`` of the container: FG's warm-up).
        dls:              the DLStudio (batch_size, epochs, seed, device).
        checkpoints_dir:  where ``checkpoint_<epoch>.pt`` files go.
        checkpoint_freq, save_checkpoints: a checkpoint every ``checkpoint_freq`` epochs.
        max_minutes, max_steps: stop after this much training time, or after this many
                          optimiser steps in all (a checkpoint is written).
        clip_grad_norm:   clip the gradient norm to this value (None: no clipping).
        precision:        "fp32" (default), "bf16", "fp16" (CUDA) or "auto": the number
                          format of the forward pass (autocast; see DLStudio.runtime.precision).
        compile:          train through ``torch.compile`` of the model (the first steps of
                          each batch shape compile; see the README for what it gains).
        overwrite:        start a new run in a directory that holds another run's
                          checkpoints: they move to DIR/previous/ (with ``also_move``, the
                          saved model), replacing the run kept there before; a file this
                          framework did not write is never deleted.
        resume:           continue the run whose checkpoints are in checkpoints_dir, from its
                          newest (weights, optimiser and warm-up step, epoch, position in the
                          epoch, random states): the run ends where an uninterrupted one
                          would. Refused when the training configuration differs (see
                          ``training_config``; epochs, time and step limits, device and
                          threads may change).
        track_score:      score the held-out split at every checkpoint (BLEU, accuracy);
                          the scores go into the checkpoint and beside the loss in
                          train_loss.png.
        title:            the name on the loss plot.
        ema:              keep an exponential moving average of the weights with this decay
                          (``self.average``, a copy of the model), saved beside the weights
                          in each checkpoint (``"average"``) and continued on --resume;
                          the checkpoint then says it is best used with the average
                          (``"best_use"``), decoded as ``decoding`` says ({"beam",
                          "length_penalty"}: a recipe's; None: greedy).

    A subclass provides: ``num_examples``, ``batches(epoch, skip)`` (this rank's share of
    each global batch: see ``share``), ``data_fingerprint()`` and ``held_out_score()``
    (with its ``score_name`` and checkpoint key ``score_key``).

    Under torchrun (``dls.world``, see DLStudio.runtime.distributed) the model trains wrapped in
    DistributedDataParallel (``self.net``; ``self.model`` stays the plain module).
    """

    score_name, score_key = "score", "held_out_score"
    #: The clock of time limits and budgets (a test may give another).
    clock = staticmethod(time.monotonic)
    #: Seconds between the progress lines of a run whose output is not a terminal.
    progress_seconds = 60

    def __init__(self, model, optimizer, dls, checkpoints_dir=None, *, checkpoint_freq=5,
                 save_checkpoints=True, display_train_loss=False, max_minutes=None, max_steps=None,
                 clip_grad_norm=1.0, overwrite=False, resume=False, track_score=False,
                 title="Transformer", also_move=(), precision="fp32", compile=False,
                 ema=None, decoding=None):
        self.dls, self.device = dls, dls.device
        self.world = getattr(dls, "world", ONE_PROCESS)
        if self.world.distributed and dls.batch_size < self.world.size:
            raise ValueError(f"--batch-size {dls.batch_size} is the global batch, split across "
                             f"{self.world.size} processes: give at least {self.world.size}")
        self.model, self.optimizer = model.to(self.device), optimizer
        self.precision = Precision(precision, self.device)
        self.checkpoints_dir, self.title = checkpoints_dir, title
        self.checkpoint_freq, self.save_checkpoints = checkpoint_freq, save_checkpoints
        self.display_train_loss = display_train_loss
        self.max_minutes, self.clip_grad_norm = max_minutes, clip_grad_norm
        self.max_steps, self.compile = max_steps, compile
        self.skip_size = self.world.size      # the processes that counted batches_done
        self.step, self.epoch, self.batches_done, self.train_losses = 0, 0, 0, []
        self.last_epoch = None
        self.last_checkpoint = None
        self.track_score, self.score_history = track_score, []      # (step, epoch, score)
        self.score_missing = False             # warned once that the score cannot be had
        self.seconds_before, self.run_start = 0.0, None   # training time of earlier runs
        if ema is not None and not 0 < ema < 1:
            raise ValueError(f"--ema {ema}: the decay of the average is between 0 and 1 "
                             "(0.999: about the last 1,000 steps)")
        self.ema = ema                         # the moving average of the weights, kept beside
        self.average = copy.deepcopy(self.model).requires_grad_(False) if ema else None
        self.decoding = dict(decoding or {"beam": 1})
        if isinstance(optimizer, BudgetedOptim):
            if not (max_minutes or max_steps):
                raise ValueError("the budget schedule decays the rate to zero when the "
                                 "budget ends: give it one, --max-minutes or --max-steps "
                                 "(max_minutes= or max_steps=)")
            optimizer.fix_warmup(max_steps)     # a resumed run gets its own back
        self.run_id = self.world.on_main(lambda: uuid.uuid4().hex[:12])
        if self.world.rank:             # dropout differs between ranks, repeatably
            self.seed_this_rank()
        if resume:
            self.resume()
        elif save_checkpoints and checkpoints_dir:
            self.world.on_main(self.start_new_run, overwrite, also_move)
        self.net = model
        if self.world.distributed:
            from torch.nn.parallel import DistributedDataParallel
            self.net = DistributedDataParallel(
                model, device_ids=[self.device] if self.device.type == "cuda" else None)
        if compile:
            self.net = torch.compile(self.net)

    def seed_this_rank(self, step=0):
        """A rank other than 0 draws its own dropout masks, from the seed, its rank and the
        step it starts at."""
        torch.manual_seed((self.dls.seed or 0) * 1000003 + 7919 * self.world.rank + step)

    def start_new_run(self, overwrite, also_move):
        """Refuse a directory that holds another run's checkpoints, or (``overwrite``) move
        them to DIR/previous/."""
        existing = checkpoint_files(self.checkpoints_dir)
        if existing and not overwrite:
            raise FileExistsError(
                f"{self.checkpoints_dir} already holds checkpoints "
                f"({', '.join(os.path.basename(p) for p in existing)}) from another run. "
                "Continue it with --resume (resume=True), start a new run with "
                "--overwrite (overwrite=True: the old run's checkpoints move to "
                f"{os.path.join(self.checkpoints_dir, 'previous')}; nothing else is touched), "
                "or choose another directory.")
        if existing:           # the saved model goes too when it lies in the directory
            inside = [p for p in also_move if os.path.isfile(p) and os.path.dirname(
                os.path.abspath(p)) == os.path.abspath(self.checkpoints_dir)]
            self.move_previous_run(existing + inside)

    @classmethod
    def for_model(cls, model, checkpoints_dir=None, **options):
        """The trainer of a container that is itself the model (visTransformer,
        TransformerGPT): its optimiser, DLStudio and settings. Refused first, before any
        checkpoint moves, when its ``path_saved_model`` holds a file we did not write."""
        model.dl_studio.world.on_main(refuse_saved_model_of_theirs,
                                      model.dl_studio.path_saved_model)
        model.to(model.dl_studio.device)
        return cls(model, model.make_optimizer(model.parameters()), model.dl_studio,
                   checkpoints_dir, **_settings(model), **options)

    # -----------------------------------------------------------------------------------
    # What a subclass provides.
    num_examples = 0

    def batches(self, epoch, skip=0):
        raise NotImplementedError

    label_smoothing = 0.0

    def loss_and_count(self, *batch):
        """(the sum of the batch's losses, their number) on this rank's share: the model's
        own ``loss`` (architecture.py), its logits computed through ``self.net``."""
        return self.model.loss(*batch, label_smoothing=self.label_smoothing, run=self.net)

    def held_out_score(self):
        raise NotImplementedError

    def data_fingerprint(self):
        raise NotImplementedError

    def loss_on_batch(self, *batch):
        """The mean loss of a batch (one process)."""
        total, count = self.loss_and_count(*batch)
        return total / count

    def share(self, batches, skip=0):
        """This rank's share of each global batch of example indices (all of each in one
        process), less the first ``skip`` steps. Under torchrun a batch smaller than the
        number of ranks is left out, so that every rank takes the same number of steps.

        ``skip`` counts the steps of the run that wrote the checkpoint, on
        ``self.skip_size`` processes. Resumed on another number, those steps are found
        among the global batches (the ones it left out included), the rest is shared, and
        ``batches_done`` is counted again in this run's steps."""
        W, before = self.world.size, self.skip_size
        trained = [i for i, b in enumerate(batches) if len(b) >= before][:skip]
        start = trained[-1] + 1 if trained else 0          # the first global batch not trained
        kept = [i for i, b in enumerate(batches) if len(b) >= W]
        if before != W:
            self.batches_done, self.skip_size = sum(i < start for i in kept), W
        return [self.world.share(batches[i]) for i in kept if i >= start]

    def batches_per_epoch(self):
        n, b, W = self.num_examples, self.dls.batch_size, self.world.size
        return math.ceil(n / b) - (1 if 0 < n % b < W else 0)

    # -----------------------------------------------------------------------------------
    # What identifies a run: everything that changes the weights or the order of batches.
    def training_config(self):
        """The configuration a resumed run must share with its checkpoint: the model's
        class and the settings that identify a run (``identity_args``: not where its data
        lies, nor how often it saves; see DLStudio.training.settings),
        batch size, seed, learning rate, clipping, precision (it changes the arithmetic) and
        the training data's fingerprint. (--compile does not: a change is only reported.)"""
        description = self.model.description()
        args = description["container_args"]
        config = {name: args[name] for name in description["identity_args"]}
        config.update(container_class=description["container_class"],
                      encoder_config=description.get("encoder_config"),
                      decoder_config=description.get("decoder_config"),
                      batch_size=self.dls.batch_size, seed=self.dls.seed,
                      learning_rate=self.dls.learning_rate, clip_grad_norm=self.clip_grad_norm,
                      precision=self.precision.name, data=self.data_fingerprint())
        return json.loads(json.dumps(config, default=str))     # tuples read back as lists

    def check_same_run(self, path, payload):
        """Raise ValueError naming what differs between this run and a checkpoint's
        (DLStudio.data.checkpoints.check_same_run)."""
        check_same_run(payload, self.training_config(), self.model.description(), path,
                       os.path.join(self.checkpoints_dir, "previous"))

    def move_previous_run(self, paths):
        """--overwrite: the old run's files go to DIR/previous/, replacing the run kept there
        (only files of the names this framework writes are removed from it)."""
        previous = os.path.join(self.checkpoints_dir, "previous")
        if os.path.isdir(previous):
            names = {os.path.basename(p) for p in paths}
            for old in checkpoint_files(previous) + [os.path.join(previous, n) for n in names]:
                if os.path.isfile(old):
                    os.unlink(old)
        os.makedirs(previous, exist_ok=True)
        for path in paths:
            shutil.move(path, os.path.join(previous, os.path.basename(path)))
        log.info("the previous run's %d files moved to %s", len(paths), previous)

    # -----------------------------------------------------------------------------------
    def train_step(self, *batch):
        """zero_grad, forward, loss, backward, clip, step. A non-finite loss or gradient
        stops training before the weights are touched."""
        self.optimizer.zero_grad()
        with self.precision.autocast():                  # fp32 unless --precision says
            loss, value = self.batch_loss(*batch)
        if not math.isfinite(value):
            self.diverged(f"the loss became {value}")
        scaler = self.precision.scaler                   # fp16 only; else these are plain
        scaler.scale(loss).backward()
        if self.clip_grad_norm:
            scaler.unscale_(self.optimizer)
            norm = clip_gradient_norm(self.model.parameters(), self.clip_grad_norm)
            if not torch.isfinite(norm) and not self.precision.scales:
                self.diverged(f"the gradient norm became {norm.item()}")
        scaler.step(self.optimizer)
        scaler.update()
        self.step += 1
        if self.average is not None:
            self.update_average()
        return value

    @torch.no_grad()
    def update_average(self):
        """--ema: average <- d average + (1 - d) weights, with d = min(ema, (1 + step) /
        (10 + step)), so that the first steps' weights, far from the end, weigh little."""
        d = min(self.ema, (1 + self.step) / (10 + self.step))
        for mean, now in zip(self.average.parameters(), self.model.parameters()):
            mean.lerp_(now.detach(), 1 - d)

    def batch_loss(self, *batch):
        """The loss to differentiate, and its value (the global batch's mean loss).

        Under torchrun each rank's sum is divided by the global count of loss terms and
        multiplied by the number of ranks, which DDP's mean of gradients undoes: the result
        is the gradient of one process on the whole global batch."""
        total, count = self.loss_and_count(*batch)
        if not self.world.distributed:
            loss = total / count
            return loss, loss.item()
        sums = self.world.sum(torch.stack([total.detach().float(), torch.as_tensor(
            count, dtype=torch.float32, device=total.device)]))      # (loss sum, count)
        return total * (self.world.size / sums[1]), (sums[0] / sums[1]).item()

    def diverged(self, what):
        kept = (f"the last good checkpoint is {self.last_checkpoint}" if self.last_checkpoint
                else "no checkpoint had been written yet")
        raise TrainingDiverged(
            f"training diverged: {what} in epoch {self.epoch + 1}, step {self.step + 1}, learning "
            f"rate {self.current_lr():.3g}; nothing was saved over good weights ({kept}). "
            "Lower the peak learning rate (lr_mul with a warm-up, else learning_rate) or "
            "lengthen the warm-up (num_warmup_steps).")

    def seconds_trained(self):
        """Training time of the whole run: earlier runs' (checkpoints keep it) and this
        one's so far."""
        now = self.clock() - self.run_start if self.run_start is not None else 0.0
        return self.seconds_before + now

    def budget_end(self):
        """The last step of the budget schedule, as given now: the nearest of ``max_steps``,
        the end of the epochs and ``max_minutes`` at the recent speed (schedule.budget_end).
        Rank 0's reckoning: every rank takes it, so that all follow one schedule."""
        epochs_end = (self.step + (self.dls.epochs - self.epoch) * self.batches_per_epoch()
                      - self.batches_done)
        time_left = 60 * self.max_minutes - self.seconds_trained() if self.max_minutes else None
        end = budget_end(self.step, (self.max_steps, epochs_end), time_left, self.speed,
                         self.optimizer.total_steps)
        if self.world.distributed and self.max_minutes:      # a time budget: rank 0's clock
            mine = torch.tensor([float(end or 0) if self.world.is_main else 0.0],
                                device=self.device)
            end = int(self.world.sum(mine).item()) or None
        return end

    def current_lr(self):
        return self.optimizer.param_groups[0]["lr"]

    def epoch_generator(self, epoch):
        """Random numbers that depend only on the seed and the epoch, so that a resumed run
        sees the same batches as an uninterrupted one."""
        return torch.Generator().manual_seed((self.dls.seed or 0) * 1000003 + epoch)

    # -----------------------------------------------------------------------------------
    def run(self, callback=None):
        """Train up to ``dl_studio.epochs`` epochs (or ``max_minutes``, ``max_steps``);
        return the losses.

        ``callback(trainer)``, if given, is called after every step; returning True stops
        training there (a checkpoint is written, as when ``max_minutes`` runs out). Ctrl-C
        and SIGTERM finish the current step, write a checkpoint and raise
        ``TrainingInterrupted``.
        """
        self.model.train()
        start = self.clock()
        n_batches = self.batches_per_epoch()
        stop = None
        self.run_start = start
        budgeted = isinstance(self.optimizer, BudgetedOptim)
        self.speed = RecentSpeed()
        if budgeted:                      # the budget given now: a resumed run's too
            self.optimizer.total_steps = self.budget_end()
        to_a_log = self.world.is_main and not _terminal()
        progress = ProgressLines(self, start, self.progress_seconds) if to_a_log else None
        with _StopSignals(repeat_kills=not self.world.distributed) as signals:
            for epoch in range(self.epoch, self.dls.epochs):
                self.epoch = epoch
                bar = tqdm(self.batches(epoch, skip=self.batches_done), total=n_batches,
                           initial=self.batches_done, leave=False, mininterval=1.0,
                           desc=f"epoch {epoch + 1}/{self.dls.epochs}",
                           disable=not self.world.is_main or None)
                total, count = 0.0, 0
                for batch in bar:
                    loss = self.train_step(*batch)
                    self.batches_done += 1
                    self.train_losses.append(loss)
                    total, count = total + loss, count + 1
                    if self.step % 20 == 0:
                        bar.set_postfix(loss=f"{total / count:.3f}",
                                        lr=f"{self.current_lr():.2e}")
                    if progress:
                        progress.after_step(self.dls.epochs * n_batches)
                    # a budget counts the whole run's time, across resumes; without one,
                    # --max-minutes is this process's time (DLStudio's scripts' meaning)
                    spent = self.seconds_trained() if budgeted else self.clock() - start
                    if budgeted and self.max_minutes:        # a time budget: estimated again
                        self.speed.tick(self.clock())
                        self.optimizer.total_steps = self.budget_end()
                    early = ((self.max_minutes and spent > 60 * self.max_minutes)
                             or (self.max_steps and self.step >= self.max_steps)
                             or (budgeted and self.step >= (self.optimizer.total_steps
                                                            or math.inf))
                             or (callback is not None and callback(self)))
                    if self.world.distributed:                 # every rank stops at this step
                        signalled, early = self.world.any(
                            (signals.received, early), self.device)
                        signals.received = signals.received or ("SIGINT" if signalled else None)
                    if signals.received:
                        stop = "signal"
                    elif early:
                        stop = "early"
                    if stop:
                        break
                bar.close()
                complete = self.batches_done == n_batches
                self.last_epoch = epoch
                log.info("epoch %d/%d%s: mean loss %.4f, lr %.2e, %.0f s", epoch + 1,
                         self.dls.epochs, "" if complete else " (stopped inside it)",
                         total / max(count, 1), self.current_lr(), self.clock() - start)
                due = complete and ((epoch + 1) % self.checkpoint_freq == 0
                                    or epoch + 1 == self.dls.epochs)
                if self.save_checkpoints and self.checkpoints_dir and (due or stop):
                    self.save(epoch, complete)
                if complete:                       # the next run() starts with the next epoch
                    self.epoch, self.batches_done = epoch + 1, 0
                if stop:
                    break
        self.model.eval()
        if self.display_train_loss:
            self.world.on_main(self.plot_losses)
        if stop == "signal":
            raise TrainingInterrupted(
                f"training interrupted by {signals.received}; checkpoint written: "
                f"{self.last_checkpoint}. Continue with --resume (resume=True) and the same "
                "checkpoints directory.")
        return self.train_losses

    def run_and_save(self, callback=None):
        """`run`, then the final model to ``dl_studio.path_saved_model`` when that is one
        path (`for_model` refuses one that holds a file we did not write). Returns the
        trainer."""
        self.run(callback=callback)
        if isinstance(self.dls.path_saved_model, str):
            payload = self.payload(self.last_epoch, self.batches_done == 0)   # every rank's part
            self.world.on_main(save_checkpoint, payload, self.dls.path_saved_model)
        return self

    # -----------------------------------------------------------------------------------
    def payload(self, epoch, complete=True):
        """Everything a later script needs, in one dict (built by DLStudio.data.checkpoints)."""
        return make_payload(self.model, {
            "run_id": self.run_id, "training_config": self.training_config(),
            "epoch": epoch, "step": self.step, "epoch_complete": complete,
            "batches_done": self.batches_done, "optimizer": self.optimizer.state_dict(),
            "rng": _rng_states(), "rng_by_rank": self.world.gather(_rng_states()),
            "grad_scaler": self.precision.scaler.state_dict(), "compile": self.compile,
            "train_losses": list(self.train_losses), "train_seconds": self.seconds_trained(),
            "average": ({"decay": self.ema, "model": weights_of(self.average)}
                        if self.average is not None else None),
            "best_use": ({"weights": "average", **self.decoding}
                         if self.average is not None else None),
            self.score_key: [list(row) for row in self.score_history]})

    def save(self, epoch, complete=True):
        """Write checkpoint_<epoch>.pt (or checkpoint_<epoch>_partial.pt inside an epoch).
        Every rank calls it; rank 0 alone scores and writes, and the others wait for it (and
        raise its error, if it fails: no rank is left waiting)."""
        path = checkpoint_path(self.checkpoints_dir, epoch if complete else f"{epoch}_partial")
        payload = self.payload(epoch, complete)         # on every rank: it gathers their states
        self.world.on_main(self.write_checkpoint, payload, epoch, path)  # its error: everyone's
        self.last_checkpoint = path
        return path

    def write_checkpoint(self, payload, epoch, path):
        if self.track_score:
            try:
                score = self.held_out_score()
            except ScoreMissing as e:        # recorded as missing; the checkpoint is written
                if not self.score_missing:
                    log.warning("%s; the checkpoints record it as missing (None)", e)
                self.score_missing, score = True, ScoreMissing
            self.model.train()
            if score is not None:
                score = None if score is ScoreMissing else score
                self.score_history.append((self.step, epoch, score))
                if score is not None:
                    log.info("held-out %s at epoch %d: %.2f", self.score_name, epoch, score)
                payload[self.score_key].append(list(self.score_history[-1]))
        save_checkpoint(payload, path)
        log.info("checkpoint written: %s", path)

    def resume(self):
        """Continue this directory's run from its newest readable checkpoint (highest step);
        a damaged one is reported and passed over. Refused when the directory holds more
        than one run, or when this run's configuration differs from the checkpoint's.
        Under torchrun rank 0 reads it and hands it to the others."""
        path, payload = self.world.on_main(self.newest_checkpoint)
        check_resumable(payload, path)
        self.check_same_run(path, payload)
        check_same_average(payload, self.ema, path)
        if bool(payload.get("compile")) != bool(self.compile):
            log.warning("%s was trained %s --compile and resumes %s it: the same arithmetic, "
                        "only the speed differs", path,
                        *(("with", "without") if payload.get("compile") else ("without", "with")))
        load_into(self.model, payload)
        self.optimizer.load_state_dict(payload["optimizer"])
        if self.precision.scales and payload.get("grad_scaler"):
            self.precision.scaler.load_state_dict(payload["grad_scaler"])
        self.step, self.train_losses = payload["step"], list(payload["train_losses"])
        self.seconds_before = payload.get("train_seconds", 0.0)
        if self.average is not None:
            if payload.get("average"):
                load_into(self.average, with_weights(payload, "average", path))
            else:
                log.info("%s keeps no average (trained without --ema): the average starts "
                         "from its weights", path)
                self.average.load_state_dict(self.model.state_dict())
        self.score_history = [tuple(row) for row in payload.get(self.score_key, [])]
        if payload["epoch_complete"]:
            self.epoch, self.batches_done = payload["epoch"] + 1, 0
        else:
            self.epoch, self.batches_done = payload["epoch"], payload["batches_done"]
        by_rank = payload.get("rng_by_rank") or []
        self.skip_size = len(by_rank) or 1               # its steps were of that many ranks
        if len(by_rank) == self.world.size:
            _set_rng_states(by_rank[self.world.rank])
        elif self.world.is_main:
            _set_rng_states(payload["rng"])
        else:                                 # another number of ranks than the checkpoint's
            self.seed_this_rank(self.step)
        self.run_id = payload.get("run_id") or self.run_id
        self.last_checkpoint = path
        log.info("resuming from %s (epoch %d, step %d)", path, self.epoch + 1, self.step)
        return path

    def newest_checkpoint(self):
        """(path, payload) of this directory's newest readable checkpoint."""
        readable = []
        for path in checkpoint_files(self.checkpoints_dir):
            try:
                readable.append((path, load_checkpoint(path)))
            except CheckpointError as e:
                log.warning("skipping %s: %s", path, e)
        if not readable:
            raise FileNotFoundError(f"nothing to resume: no readable checkpoint in "
                                    f"{self.checkpoints_dir}")
        runs = {payload.get("run_id") for _, payload in readable}
        if len(runs) > 1:
            raise ValueError(f"{self.checkpoints_dir} holds checkpoints of {len(runs)} different "
                             "runs, so which to continue is not clear: keep one run's "
                             "checkpoints in a directory, or start a new run with --overwrite")
        return max(readable, key=lambda item: (item[1]["step"], item[1]["epoch"]))

    def plot_losses(self):
        """train_loss.png in the checkpoints folder (without one: beside the saved model,
        else in the current folder), or train_loss-1.png, ... where a picture we did not
        write has that name. Returns its path."""
        from matplotlib.figure import Figure
        saved = self.dls.path_saved_model
        folder = self.checkpoints_dir or (os.path.dirname(saved) if isinstance(saved, str)
                                          else "") or "."
        os.makedirs(folder, exist_ok=True)
        fig = Figure(figsize=(7, 4))
        ax = fig.add_subplot()
        losses = torch.tensor(self.train_losses)
        k = max(1, len(losses) // 200)
        smooth = losses[: len(losses) // k * k].view(-1, k).mean(1)
        ax.plot(torch.arange(len(smooth)) * k, smooth)
        ax.set_xlabel("training step")
        ax.set_ylabel("cross-entropy loss")
        ax.set_title(f"{self.title}: training loss")
        scored = [r for r in self.score_history if r[2] is not None]    # (missing: None)
        if scored:
            ax2 = ax.twinx()
            ax2.plot([r[0] for r in scored], [r[2] for r in scored], color="tab:red",
                     marker="o")
            ax2.set_ylabel(f"held-out {self.score_name}", color="tab:red")
        wanted = os.path.join(folder, "train_loss.png")
        path = free_name(wanted)
        if path != wanted:
            log.warning("%s is not a picture this framework wrote: it stays, and the loss "
                        "curve goes to %s", wanted, path)
        fig.savefig(path, dpi=100)
        mark_written(path)
        log.info("loss curve written: %s", path)
        return path


class TranslationTrainer(Trainer):
    """Trains an EncoderDecoder (TransformerFG or TransformerPreLN) on sentence pairs:
    teacher forcing, one decoder pass per batch, length-bucketed batches.

    Args:
        model, optimizer, dls, checkpoints_dir: as for `Trainer`.
        vocab: the Vocabulary (words -> ids).  pairs: the training pairs.
        held_out: the held-out pairs (scored with ``track_bleu``).
        label_smoothing: of the cross-entropy (Vaswani et al. 2017, sec. 5.4).
        The other options are those of `Trainer`. ``for_container`` builds it all from a
        container and its two stacks.
    """

    score_name, score_key = "BLEU", "held_out_bleu"

    def __init__(self, model, vocab, pairs, optimizer, dls, checkpoints_dir=None, *,
                 held_out=(), label_smoothing=0.0, track_bleu=False, **options):
        if not pairs:
            raise ValueError("the training split is empty: give the container an archive")
        self.vocab, self.held_out, self.label_smoothing = vocab, held_out, label_smoothing
        self.pairs = pairs
        self.src, self.tgt, self.src_len, self.tgt_len = encode_pairs(vocab, pairs)
        self.num_examples = len(self.src)
        super().__init__(model, optimizer, dls, checkpoints_dir, track_score=track_bleu,
                         **options)

    @classmethod
    def for_container(cls, xformer, master_encoder, master_decoder, checkpoints_dir=None,
                      **options):
        """The trainer of ``run_code_for_training``: the container's model (both embedding
        generators and these stacks), vocabulary, training split, optimiser and settings."""
        model = xformer.model_of(master_encoder, master_decoder)
        model.to(xformer.dl_studio.device)
        return cls(model, xformer.vocab, xformer.training_corpus,
                   xformer.make_optimizer(model.parameters()), xformer.dl_studio,
                   checkpoints_dir, held_out=xformer.held_out_corpus,
                   label_smoothing=xformer.label_smoothing, **_settings(xformer), **options)

    def batches(self, epoch, skip=0):
        """The epoch's batches of (src, tgt), each cut to its longest sentence; the first
        ``skip`` are left out."""
        lengths = torch.maximum(self.src_len, self.tgt_len)
        for idx in self.share(bucketed_batches(lengths, self.dls.batch_size,
                                               self.epoch_generator(epoch)), skip):
            T_src, T_tgt = int(self.src_len[idx].max()), int(self.tgt_len[idx].max())
            yield (self.src[idx, :T_src].to(self.device, non_blocking=True),
                   self.tgt[idx, :T_tgt].to(self.device, non_blocking=True))

    def data_fingerprint(self):
        """A hash of the training pairs, in order (another archive or split differs)."""
        return pairs_fingerprint(self.pairs)

    def held_out_score(self):
        if not self.held_out:
            return None
        return evaluate_bleu(self.model, self.vocab, self.held_out, show=0)["bleu"]


def _saved_paths(container):
    """Where the final model is written (one path or DLStudio's dict of paths)."""
    saved = container.dl_studio.path_saved_model
    return list(saved.values()) if isinstance(saved, dict) else [saved]


def _settings(container):
    """The Trainer options a container's constructor set."""
    return {"checkpoint_freq": container.checkpoint_freq,
            "save_checkpoints": container.save_checkpoints,
            "title": type(container).__name__, "also_move": _saved_paths(container)}


def train_translation(xformer, master_encoder, master_decoder, checkpoints_dir, **options):
    """``run_code_for_training``: train every parameter (both embedding generators
    included) on the training split, then write the final model to
    ``dl_studio.path_saved_model``. Returns the trainer."""
    xformer.dl_studio.world.on_main(refuse_saved_model_of_theirs,
                                    xformer.dl_studio.path_saved_model)
    trainer = TranslationTrainer.for_container(xformer, master_encoder, master_decoder,
                                               checkpoints_dir, **options)
    trainer.run()
    payload = trainer.payload(trainer.last_epoch, trainer.batches_done == 0)
    trainer.world.on_main(save_final, payload, xformer.dl_studio.path_saved_model)
    xformer.trained_model = trainer.model
    return trainer


class ImageTrainer(Trainer):
    """Trains a visTransformer on its training images: batches of images in random order
    (shifted and flipped when the model's ``augment`` is on), cross-entropy on the class.

    Args:
        vit: the visTransformer (with its data sets loaded); optimizer, dls,
        checkpoints_dir and the other options: as for `Trainer`. track_accuracy: score the
        test images at every checkpoint. ``for_model`` builds it from the model alone.
    """

    score_name, score_key = "accuracy", "held_out_accuracy"

    def __init__(self, vit, optimizer, dls, checkpoints_dir=None, *, track_accuracy=False,
                 **options):
        if vit.training_set is None:
            raise ValueError("no training images: call load_shapes_dataset() or "
                             "load_cifar_10_dataset() first")
        self.vit, self.label_smoothing = vit, vit.label_smoothing
        self.images, self.labels = vit.training_set.images, vit.training_set.labels
        self.num_examples = len(self.labels)
        super().__init__(vit, optimizer, dls, checkpoints_dir, track_score=track_accuracy,
                         **options)

    def batches(self, epoch, skip=0):
        """The epoch's batches of (images in [0, 1], labels); the first ``skip`` are left
        out (their random shifts are still drawn, so a resumed run matches)."""
        gen = self.epoch_generator(epoch)
        order = torch.randperm(self.num_examples, generator=gen)
        W = self.world.size
        for i, idx in enumerate(order.split(self.dls.batch_size)):
            images = self.images[idx].float().div_(255)                   # (B, C, H, W)
            if self.vit.augment:               # drawn for the global batch, on every rank
                images = random_crops_and_flips(images, gen)
            if i >= skip and len(idx) >= W:
                mine = self.world.share(torch.arange(len(idx)))
                yield (images[mine].to(self.device, non_blocking=True),
                       self.labels[idx[mine]].to(self.device, non_blocking=True))

    def data_fingerprint(self):
        """The data set's recipe (where CIFAR-10 lies may change) and the augmentation."""
        spec = {k: v for k, v in (self.vit.dataset_spec or {}).items() if k != "dataroot"}
        return {"dataset": spec, "images": len(self.labels), "augment": self.vit.augment}

    def held_out_score(self):
        if self.vit.test_set is None:
            return None
        predicted = self.vit.predict(self.vit.test_set.images)
        return 100.0 * (predicted == self.vit.test_set.labels).float().mean().item()


def train_images(vit, model=None, checkpoint_dir=None, checkpoints_dir=None, callback=None,
                 **options):
    """``run_code_for_training_visTransformer``: train on the training images (those of
    ``dls.load_cifar_10_dataset()`` when the model has none), a checkpoint every
    ``checkpoint_freq`` epochs, the final model to ``dl_studio.path_saved_model``."""
    if model is not None and model is not vit:
        raise ValueError("visTransformer trains itself: pass the same model, or none")
    if vit.training_set is None and getattr(vit.dl_studio, "image_datasets", None):
        vit.use_datasets(*vit.dl_studio.image_datasets,
                         {"name": "cifar10", "dataroot": os.path.abspath(vit.dl_studio.dataroot)})
    folder = checkpoints_dir or checkpoint_dir or "checkpoints_visTrans"
    return ImageTrainer.for_model(vit, folder, **options).run_and_save(callback)


class LanguageModelTrainer(Trainer):
    """Trains a TransformerGPT on its training sentences: at every position the next token
    (teacher forcing, one pass per batch, as the translation decoder is trained), loss on
    the real tokens up to each sentence's EOS, length-bucketed batches.

    Args: gpt (with its text, see vocabulary.read_text), optimizer, dls,
        checkpoints_dir and the options of `Trainer`; track_perplexity: score the held-out
        sentences at every checkpoint. ``for_model`` builds it from the model alone.
    """

    score_name, score_key = "perplexity", "held_out_perplexity"

    def __init__(self, gpt, optimizer, dls, checkpoints_dir=None, *, track_perplexity=False,
                 **options):
        if not gpt.training_sentences:
            raise ValueError("no training text: give TransformerGPT sentences=")
        self.gpt, self.label_smoothing = gpt, gpt.label_smoothing
        self.ids, _ = encode_sentences(gpt.vocab, gpt.training_sentences, gpt.max_seq_length)
        self.lengths = (~padding_mask(self.ids)).sum(1)
        self.num_examples = len(self.ids)
        super().__init__(gpt, optimizer, dls, checkpoints_dir, track_score=track_perplexity,
                         **options)

    def batches(self, epoch, skip=0):
        """The epoch's batches of sentences (B, T), each cut to its longest."""
        for idx in self.share(bucketed_batches(self.lengths, self.dls.batch_size,
                                               self.epoch_generator(epoch)), skip):
            T = int(self.lengths[idx].max())
            yield (self.ids[idx, :T].to(self.device, non_blocking=True),)

    def data_fingerprint(self):
        h = hashlib.sha256()
        for sentence in self.gpt.training_sentences:
            h.update(sentence.encode() + b"\n")
        return h.hexdigest()[:16]

    def held_out_score(self):
        if not self.gpt.held_out_sentences:
            return None
        try:
            return perplexity(self.gpt, self.gpt.held_out_sentences)["per_piece"]
        except ValueError as e:
            raise ScoreMissing(f"the held-out perplexity cannot be computed: {e} (a word-level "
                               "tokenizer knows only the training words: --tokenizer bpe "
                               "reads any)") from None


def train_language_model(gpt, checkpoints_dir="checkpoints_GPT", callback=None, **options):
    """``TransformerGPT.run_code_for_training``: train on the training sentences, a
    checkpoint every ``checkpoint_freq`` epochs (and at a step or time limit, Ctrl-C), the
    final model to ``dl_studio.path_saved_model`` when that is one path. Returns the trainer."""
    return LanguageModelTrainer.for_model(gpt, checkpoints_dir, **options).run_and_save(callback)


def _terminal():
    """Whether the log (standard error) goes to a terminal, where the progress bar shows."""
    try:
        return os.isatty(2)
    except (OSError, ValueError):
        return False


def _rng_states():
    """The random states that dropout and batch order draw from: CPU, and every GPU."""
    states = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    mps = getattr(torch, "mps", None)
    if mps is not None and torch.backends.mps.is_available():
        states["mps"] = mps.get_rng_state()
    return states


def _set_rng_states(states):
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    if "mps" in states and torch.backends.mps.is_available():
        torch.mps.set_rng_state(states["mps"])


class _StopSignals:
    """While training: Ctrl-C (SIGINT) and SIGTERM set a flag instead of killing the
    process mid-step; the previous handlers come back afterwards. Installed only in the
    main thread, and only for the duration of ``with``. Under torchrun a second signal is
    not the user's: a terminal's Ctrl-C reaches each process, and torchrun sends it on."""

    def __init__(self, repeat_kills=True):
        self.repeat_kills = repeat_kills

    def __enter__(self):
        self.received, self.previous = None, {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self.handle)
        return self

    def handle(self, signum, frame):
        if self.received:            # a second Ctrl-C: the user means it
            if self.repeat_kills:    # (not under torchrun, which passes the terminal's on)
                raise KeyboardInterrupt
            return
        self.received = signal.Signals(signum).name
        log.warning("%s received: finishing this step and writing a checkpoint ...",
                    self.received)

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False
