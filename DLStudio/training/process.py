"""The training process's own affairs beside the loop: Ctrl-C and SIGTERM finish the step
(`StopSignals`), progress lines go to a log that is not a terminal (`ProgressLines`), and the
random states a resumed run takes back (`rng_states`, `set_rng_states`)."""

import logging
import os
import signal
import threading

import torch

from .schedule import BudgetedOptim

__all__ = ["ProgressLines", "StopSignals", "rng_states", "set_rng_states", "terminal"]

log = logging.getLogger("DLStudio.training.trainer")


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


def terminal():
    """Whether the log (standard error) goes to a terminal, where the progress bar shows."""
    try:
        return os.isatty(2)
    except (OSError, ValueError):
        return False


def rng_states():
    """The random states that dropout and batch order draw from: CPU, and every GPU."""
    states = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    mps = getattr(torch, "mps", None)
    if mps is not None and torch.backends.mps.is_available():
        states["mps"] = mps.get_rng_state()
    return states


def set_rng_states(states):
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    if "mps" in states and torch.backends.mps.is_available():
        torch.mps.set_rng_state(states["mps"])


class StopSignals:
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
