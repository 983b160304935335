"""The training loop shared by every model: TransformerFG, TransformerPreLN, TransformerGPT,
visTransformer.

    for each batch:  zero_grad -> forward -> loss -> backward -> clip -> step -> log

`Trainer` is that loop, with checkpoints, resuming and what identifies a run, Ctrl-C and the
divergence check; the loss is the model's own (``model.loss``: architecture.py). Its kinds
(DLStudio.training.kinds) feed it sentence pairs, images or sentences. A trainer receives
a model, its optimiser, its data and its settings; it never reads a container
(DLStudio.containers.wiring builds one from a container).

Under torchrun (DLStudio.runtime.distributed) the same loop trains with DistributedDataParallel:
each rank takes its share of every global batch, the loss is normalised by the global
count of loss terms, and rank 0 alone writes checkpoints and logs.
"""

import copy
import itertools
import json
import logging
import math
import os
import shutil
import time
import uuid

import torch
from tqdm.auto import tqdm

from ..checkpoints import (
    CheckpointError,
    check_fits,
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
    save_checkpoint,
    weights_of,
    with_weights,
)
from ..checkpoints.shards import shards_folder
from ..quick import BATCHES_PER_EPOCH, quick
from ..runtime.distributed import ONE_PROCESS
from ..runtime.precision import Precision
from . import sharded
from .process import ProgressLines, StopSignals, rng_states, set_rng_states, terminal
from .schedule import BudgetedOptim, RecentSpeed, budget_end, clip_gradient_norm

__all__ = ["Trainer", "TrainingDiverged", "TrainingInterrupted", "ScoreMissing"]

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message says where and what to try."""


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
                          itself for checkpoints (``description()``, see DLStudio.checkpoints).
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
        label_smoothing:  of the cross-entropy (Vaswani et al. 2017, sec. 5.4).

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
                 ema=None, decoding=None, label_smoothing=0.0, fsdp=False):
        self.dls, self.device, self.label_smoothing = dls, dls.device, label_smoothing
        self.world = getattr(dls, "world", ONE_PROCESS)
        if self.world.distributed and dls.batch_size < self.world.size:
            raise ValueError(f"--batch-size {dls.batch_size} is the global batch, split across "
                             f"{self.world.size} processes: give at least {self.world.size}")
        self.model, self.optimizer = model.to(self.device), optimizer
        self.fsdp = bool(fsdp) and self.world.distributed    # shards (training/sharded.py)
        if self.fsdp:
            if ema or track_score or compile:
                raise ValueError("under FSDP (--fsdp) a run keeps no average (--ema), scores "
                                 "no checkpoint on rank 0 alone and is not compiled: leave "
                                 "those out")
            sharded.shard(model, optimizer, model.master_decoder.basic_decoder_arr)
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
        self.net = model                      # (FSDP: the model itself, sharded in place)
        if self.world.distributed and not self.fsdp:
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
    # -----------------------------------------------------------------------------------
    # What a subclass provides.
    num_examples = 0

    def batches(self, epoch, skip=0):
        raise NotImplementedError

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

    def share_with_batch(self, batches, skip=0):
        """(the global batch, this rank's positions in it) for each share `share` gives: for
        what is drawn per global batch (BERT's masks), so that several processes draw what
        one process draws."""
        parts = self.share(batches, skip)                # (a suffix of the kept batches)
        whole = [b for b in batches if len(b) >= self.world.size]
        return [(b, self.world.share(torch.arange(len(b))))
                for b in (whole[len(whole) - len(parts):] if parts else [])]

    def batches_per_epoch(self):
        n, b, W = self.num_examples, self.dls.batch_size, self.world.size
        return math.ceil(n / b) - (1 if 0 < n % b < W else 0)

    # -----------------------------------------------------------------------------------
    # What identifies a run: everything that changes the weights or the order of batches.
    def training_config(self):
        """The configuration a resumed run must share with its checkpoint: the model's
        class and the settings that identify a run (``identity_args``: not where its data
        lies, nor how often it saves; see DLStudio.containers.settings),
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
        (DLStudio.checkpoints.check_same_run)."""
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
            inside = None if self.precision.scales else self.optimizer    # (fp16: the scaler's)
            norm = clip_gradient_norm(self.model.parameters(), self.clip_grad_norm, inside)
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

    def warn_of_an_endless_warm_up(self, n_batches):
        """Say so when FG's warm-up is longer than the whole run: the rate never reaches its
        peak (``--num-warmup-steps`` is counted in steps, the run in epochs)."""
        warm_up = getattr(self.optimizer, "n_warmup_steps", 0)
        if not warm_up or isinstance(self.optimizer, BudgetedOptim) or not self.world.is_main:
            return
        steps = self.step + (self.dls.epochs - self.epoch) * n_batches - self.batches_done
        if self.max_steps:
            steps = min(steps, self.max_steps)
        if steps < warm_up:
            log.warning("note: the warm-up is %d steps and this run %d: the learning rate "
                        "rises all the way and never reaches its peak (a shorter "
                        "--num-warmup-steps, or more --epochs)", warm_up, steps)

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
        if quick():                       # DLSTUDIO_QUICK=1: a few batches an epoch
            n_batches = min(n_batches, BATCHES_PER_EPOCH)
        stop = None
        self.run_start = start
        budgeted = isinstance(self.optimizer, BudgetedOptim)
        self.speed = RecentSpeed()
        if budgeted:                      # the budget given now: a resumed run's too
            self.optimizer.total_steps = self.budget_end()
        self.warn_of_an_endless_warm_up(n_batches)
        to_a_log = self.world.is_main and not terminal()
        progress = ProgressLines(self, start, self.progress_seconds) if to_a_log else None
        with StopSignals(repeat_kills=not self.world.distributed) as signals:
            for epoch in range(self.epoch, self.dls.epochs):
                self.epoch = epoch
                batches = self.batches(epoch, skip=self.batches_done)
                if quick():
                    batches = itertools.islice(batches, max(0, n_batches - self.batches_done))
                bar = tqdm(batches, total=n_batches,
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
                    # read once: the handler may set it at any moment, also between the
                    # ranks' agreement and this rank's decision (which then went apart: one
                    # rank saving, the other in the next step's all-reduce, both waiting)
                    received = signals.received
                    if self.world.distributed:                 # every rank stops at this step
                        signalled, early = self.world.any((received, early), self.device)
                        received = (received or "SIGINT") if signalled else None
                    if received:                    # (a later signal: the next step's turn)
                        signals.received, stop = received, "signal"
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
        path (containers.wiring refuses one that holds a file we did not write). Returns the
        trainer."""
        self.run(callback=callback)
        if isinstance(self.dls.path_saved_model, str):
            payload = self.payload(self.last_epoch, self.batches_done == 0)   # every rank's part
            self.world.on_main(save_checkpoint, payload, self.dls.path_saved_model)
        return self

    # -----------------------------------------------------------------------------------
    def payload(self, epoch, complete=True):
        """Everything a later script needs, in one dict (built by DLStudio.checkpoints)."""
        return make_payload(self.model, {
            "run_id": self.run_id, "training_config": self.training_config(),
            "epoch": epoch, "step": self.step, "epoch_complete": complete,
            "batches_done": self.batches_done,
            "optimizer": None if self.fsdp else self.optimizer.state_dict(),   # (its shards)
            "rng": rng_states(), "rng_by_rank": self.world.gather(rng_states()),
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
        if self.fsdp:            # every rank writes its shards first; the file names them
            folder = shards_folder(path)
            sharded.save_shards(self.model, self.optimizer, folder,
                                learnt_only=payload.get("weights_kept") == "learnt")
            payload["model"], payload["shards"] = {}, os.path.basename(folder)
        self.world.on_main(self.write_checkpoint, payload, epoch, path)  # its error: everyone's
        self.last_checkpoint = path
        return path

    def write_checkpoint(self, payload, epoch, path):
        if self.track_score:
            score, missing = None, False
            try:
                score = self.held_out_score()          # None: nothing to score
            except ScoreMissing as e:        # recorded as missing; the checkpoint is written
                if not self.score_missing:
                    log.warning("%s; the checkpoints record it as missing (None)", e)
                self.score_missing = missing = True
            self.model.train()
            if score is not None:
                log.info("held-out %s at epoch %d: %.2f", self.score_name, epoch, score)
            if score is not None or missing:
                self.score_history.append((self.step, epoch, score))
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
        if payload.get("shards"):          # fine-tuned under FSDP: each rank reads its shards
            check_fits(payload, self.model.description(), path)
            sharded.load_shards(self.model, self.optimizer,
                                os.path.join(os.path.dirname(path), payload["shards"]))
        else:
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
            set_rng_states(by_rank[self.world.rank])
        elif self.world.is_main:
            set_rng_states(payload["rng"])
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
                readable.append((path, load_checkpoint(path, shards=False)))
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
        from ..evaluation.visualize import plot_loss
        saved = self.dls.path_saved_model
        folder = self.checkpoints_dir or (os.path.dirname(saved) if isinstance(saved, str)
                                          else "") or "."
        os.makedirs(folder, exist_ok=True)
        wanted = os.path.join(folder, "train_loss.png")
        path = free_name(wanted)
        if path != wanted:
            log.warning("%s is not a picture this framework wrote: it stays, and the loss "
                        "curve goes to %s", wanted, path)
        plot_loss(self.train_losses, self.score_history, self.score_name, self.title, path)
        mark_written(path)
        log.info("loss curve written: %s", path)
        return path
