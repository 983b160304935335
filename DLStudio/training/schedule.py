"""The optimiser of the FG Transformer: Adam driven by the warm-up of Vaswani et al. 2017.

`ScheduledOptim` is a nested class of every container (``TransformerFG.ScheduledOptim``),
written here because it is about training, not about the architecture; a subclass of a
container may override it like any other nested class.
"""

import torch

__all__ = ["ScheduledOptim", "BudgetedOptim", "RecentSpeed", "budget_end", "adam",
           "clip_gradient_norm", "ClippingAdam", "ADAM_DEFAULTS", "SCHEDULES", "COOLDOWN"]

#: The learning-rate schedules a container's ``schedule`` setting names: the lecture's
#: warm-up (pre-LN: a constant rate); "budget", down to zero over the whole budget;
#: "cooldown", constant, then down to zero over the budget's last `COOLDOWN` (a fifth).
SCHEDULES = ("warmup", "budget", "cooldown")

#: The part of a budget (after its warm-up) over which schedule="cooldown" brings the rate
#: down to zero: "warmup-stable-decay" (Hägele et al. 2024 found a fifth enough to match a
#: schedule that decays all along, at any length of run).
COOLDOWN = 0.2

#: Adam's settings in the lecture (DLStudio's optimizer_params).
ADAM_DEFAULTS = {"beta1": 0.9, "beta2": 0.98, "epsilon": 1e-9}


def adam(params, lr, optimizer_params):
    """Adam with DLStudio's ``optimizer_params`` ({"beta1", "beta2", "epsilon"}), as one fused
    kernel for all parameters where PyTorch has it (>= 2.4: the same maths, faster; then a
    `ClippingAdam`, which can also clip the gradients inside that kernel)."""
    p = optimizer_params
    kwargs = {"lr": lr, "betas": (p.get("beta1", 0.9), p.get("beta2", 0.98)),
              "eps": p.get("epsilon", 1e-9)}
    params = list(params)
    try:
        return ClippingAdam(params, fused=True, **kwargs)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, **kwargs)


class ClippingAdam(torch.optim.Adam):
    """PyTorch's fused Adam, which can take the clipping of the gradients into its step.

    Clipping multiplies every gradient by c = min(1, max_norm / (norm + 1e-6)), a pass over
    all of them (one call per parameter tensor on a CPU); the fused step reads every
    gradient anyway, and divides it by a ``grad_scale`` as it reads it (PyTorch's way of
    unscaling fp16 gradients). `clip_in_step` hands it 1 / c: the same clipping, in one
    pass fewer. (x / (1 / c) and x * c differ in the last bit, rounding only:
    tests/test_precision_and_fused.py.) Between `clip_in_step` and `step`, ``.grad`` still
    holds the gradients as computed, not yet clipped (code that reads them there, a hook or
    a print, sees those); the step writes the clipped ones into ``.grad``, so after it they
    are what clip_grad_norm_ leaves. Only a step whose every parameter group is fused can
    clip (`fused_step`): a state loaded from an unfused Adam is clipped by torch instead.
    """

    def fused_step(self):
        """Whether the next step runs the fused kernel (every group's ``fused``, which a
        loaded state dict sets per group, not ``defaults``)."""
        return all(group.get("fused") for group in self.param_groups)

    def clip_in_step(self, params, max_norm):
        """Measure the gradients' norm now, clip them in the next `step`. Returns the
        norm before clipping, as `clip_gradient_norm` does."""
        grads = [p.grad for p in params]
        norm = torch.nn.utils.get_total_norm(grads, foreach=True)
        self.grad_scale = torch.clamp((norm + 1e-6) / max_norm, min=1.0)
        return norm

    def step(self, closure=None):
        try:
            return super().step(closure)
        finally:
            self.__dict__.pop("grad_scale", None)       # for this step only

    def zero_grad(self, set_to_none=True):
        self.__dict__.pop("grad_scale", None)           # a step not taken: its clipping too
        super().zero_grad(set_to_none)


def clip_gradient_norm(params, max_norm, optimizer=None):
    """torch.nn.utils.clip_grad_norm_, with its one-call (foreach) kernels on the CPU too,
    where PyTorch would otherwise take each parameter's norm in a call of its own (our
    model has one W_Q, W_K, W_V per head: three times nn.Transformer's number of tensors).
    With ``optimizer`` (a ScheduledOptim, or the optimiser itself) built by `adam`, the
    gradients are clipped inside its next step instead (`ClippingAdam`).

    Returns: the total norm of the gradients before clipping (a 0-dim tensor).
    """
    params = [p for p in params if p.grad is not None]
    inner = getattr(optimizer, "optimizer", optimizer)
    if isinstance(inner, ClippingAdam) and inner.fused_step() \
            and hasattr(torch.nn.utils, "get_total_norm"):             # (torch >= 2.6)
        return inner.clip_in_step(params, max_norm)
    on_cpu = all(p.grad.device.type == "cpu" for p in params)
    return torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True if on_cpu else None)


class ScheduledOptim:
    """Adam with the warm-up schedule of Vaswani et al. 2017, eq. 3:

        lr(step) = lr_mul * d_model^-0.5 * min(step^-0.5, step * n_warmup_steps^-1.5)

    The rate rises linearly for ``n_warmup_steps`` steps, then decays as 1/sqrt(step).

    Args:
        optimizer: a torch optimiser (Adam).  lr_mul, d_model, n_warmup_steps: as above.
    """

    def __init__(self, optimizer, lr_mul, d_model, n_warmup_steps):
        self.optimizer, self.lr_mul = optimizer, lr_mul
        self.d_model, self.n_warmup_steps = d_model, n_warmup_steps
        self.n_steps = 0

    def lr_at(self, step):
        """The learning rate at optimiser step ``step`` (1-based): a pure function."""
        step = max(step, 1)
        return self.lr_mul * self.d_model ** -0.5 * min(step ** -0.5,
                                                        step * self.n_warmup_steps ** -1.5)

    def step(self):
        """Set the rate for the next step, then take it."""
        self.n_steps += 1
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr_at(self.n_steps)
        self.optimizer.step()

    step_and_update_lr = step   # DLStudio's name

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def state_dict(self):
        return {"optimizer": self.optimizer.state_dict(), "n_steps": self.n_steps}

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state["optimizer"])
        self.n_steps = state["n_steps"]


class BudgetedOptim(ScheduledOptim):
    """Adam for a known budget (Li et al. 2020, "Budgeted Training"): the rate rises
    linearly to ``peak`` over the warm-up, then falls linearly to zero at ``total_steps``,
    the last step of the budget:

        lr(step) = peak * step / warmup                       step <= warmup
                 = peak * (total - step) / (total - warmup)   after, 0 from total on

    With ``cooldown`` < 1 (schedule="cooldown") the rate stays at its peak and falls only
    over that part of the steps after the warm-up: from decay = total - cooldown * (total -
    warmup) on, peak * (total - step) / (total - decay). (cooldown=1: the line above.)

    The warm-up is fixed once, when the run starts (`fix_warmup`): ``n_warmup_steps``, or
    half of a step budget that is not longer than it; the state keeps it, so a resumed run
    warms up as it began. ``total_steps`` is the trainer's to set, at every step if it must
    (`budget_end`): the nearest of the step budget, the end of the epochs and the time
    budget at the recent speed (None: not yet known, the rate stays at its peak). A time
    budget that turns out shorter than the warm-up rises on the warm-up's line to its middle
    and falls at the same slope to zero at its end.
    """

    def __init__(self, optimizer, peak, n_warmup_steps, total_steps=None, cooldown=1.0):
        super().__init__(optimizer, 1.0, 1, n_warmup_steps)
        if not 0 < cooldown <= 1:
            raise ValueError(f"cooldown is the part of the budget the rate falls over, "
                             f"0 < cooldown <= 1; got {cooldown}")
        self.peak, self.total_steps, self.cooldown = peak, total_steps, cooldown
        self.fix_warmup(total_steps)

    def fix_warmup(self, max_steps=None):
        """The warm-up of this run: ``n_warmup_steps``, or half of ``max_steps`` when the
        warm-up would not be shorter than the budget."""
        warm = self.n_warmup_steps
        self.warmup = max_steps // 2 if max_steps and warm >= max_steps else warm

    def lr_at(self, step):
        step, warm, total = max(step, 1), self.warmup, self.total_steps
        if warm and total is not None and total <= warm:     # a time budget shorter than it
            return self.peak * max(0, min(step, total - step)) / warm
        if step <= warm:
            return self.peak * step / warm
        if total is None:
            return self.peak
        falls = max(1, self.cooldown * (total - warm))          # steps the rate falls over
        return self.peak * min(1.0, max(0, total - step) / falls)

    def state_dict(self):
        return {**super().state_dict(), "total_steps": self.total_steps,
                "warmup": self.warmup}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.total_steps = state.get("total_steps")
        if "warmup" in state:
            self.warmup = state["warmup"]
        else:                 # written before the warm-up was kept: as it was reckoned then
            self.fix_warmup(self.total_steps)


def budget_end(step, limits, time_left=None, speed=None, previous=None):
    """The last step of a budget: the nearest of ``limits`` (the step budget, the end of the
    epochs; None: no such limit) and, under a time budget of ``time_left`` seconds more, the
    steps that time holds at the recent ``speed`` (a `RecentSpeed`; before it has measured
    a step: the ``previous`` estimate)."""
    ends = list(limits)
    if time_left is not None:
        steps = speed.steps_in(time_left) if speed is not None else None
        ends.append(previous if steps is None else step + steps)
    ends = [end for end in ends if end is not None]
    return min(ends) if ends else None


class RecentSpeed:
    """The speed of training, in steps a second, over the last ``window`` steps. The first
    step of a run only starts the clock: it holds one-off costs (compiling, starting CUDA)
    that would make an early estimate of the budget's end far too short."""

    def __init__(self, window=500):
        self.durations, self.window, self.total, self.last = [], window, 0.0, None

    def tick(self, now):
        """A step ended at ``now`` (seconds)."""
        if self.last is not None:
            self.durations.append(now - self.last)
            self.total += self.durations[-1]
            if len(self.durations) > self.window:
                self.total -= self.durations.pop(0)
        self.last = now

    def steps_in(self, seconds):
        """How many steps ``seconds`` hold at this speed (None: no step measured yet)."""
        if not self.durations or self.total <= 0:
            return None
        return int(max(0.0, seconds) * len(self.durations) / self.total)
