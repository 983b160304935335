"""The optimiser of the FG Transformer: Adam driven by the warm-up of Vaswani et al. 2017.

`ScheduledOptim` is a nested class of every container (``TransformerFG.ScheduledOptim``),
written here because it is about training, not about the architecture; a subclass of a
container may override it like any other nested class.
"""

import torch

__all__ = ["ScheduledOptim", "BudgetedOptim", "adam", "clip_gradient_norm", "ADAM_DEFAULTS",
           "SCHEDULES"]

#: The learning-rate schedules a container's ``schedule`` setting names.
SCHEDULES = ("warmup", "budget")

#: Adam's settings in the lecture (DLStudio's optimizer_params).
ADAM_DEFAULTS = {"beta1": 0.9, "beta2": 0.98, "epsilon": 1e-9}


def adam(params, lr, optimizer_params):
    """Adam with DLStudio's ``optimizer_params`` ({"beta1", "beta2", "epsilon"}), as one fused
    kernel for all parameters where PyTorch has it (>= 2.4: the same maths, faster)."""
    p = optimizer_params
    kwargs = {"lr": lr, "betas": (p.get("beta1", 0.9), p.get("beta2", 0.98)),
              "eps": p.get("epsilon", 1e-9)}
    params = list(params)
    try:
        return torch.optim.Adam(params, fused=True, **kwargs)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, **kwargs)


def clip_gradient_norm(params, max_norm):
    """torch.nn.utils.clip_grad_norm_, with its one-call (foreach) kernels on the CPU too,
    where PyTorch would otherwise take each parameter's norm in a call of its own (our
    model has one W_Q, W_K, W_V per head: three times nn.Transformer's number of tensors).

    Returns: the total norm of the gradients before clipping (a 0-dim tensor).
    """
    params = [p for p in params if p.grad is not None]
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
    linearly to ``peak`` over ``n_warmup_steps``, then falls linearly to zero at
    ``total_steps``, the last step of the budget:

        lr(step) = peak * step / n_warmup_steps                       step <= n_warmup_steps
                 = peak * (total - step) / (total - n_warmup_steps)   after, 0 from total on

    A budget in steps fixes ``total_steps``; a budget in time is turned into steps by the
    trainer, which sets ``total_steps`` again as the run's speed becomes known (None: not
    yet known, the rate stays at its peak). A budget no longer than the warm-up warms up
    over its first half.
    """

    def __init__(self, optimizer, peak, n_warmup_steps, total_steps=None):
        super().__init__(optimizer, 1.0, 1, n_warmup_steps)
        self.peak, self.total_steps = peak, total_steps

    def lr_at(self, step):
        step, warm = max(step, 1), self.n_warmup_steps
        if self.total_steps is not None and warm >= self.total_steps:
            warm = self.total_steps // 2     # a budget shorter than the warm-up: half of it
        if step <= warm:
            return self.peak * step / warm
        if self.total_steps is None:
            return self.peak
        return self.peak * max(0, self.total_steps - step) / max(1, self.total_steps - warm)

    def state_dict(self):
        return {**super().state_dict(), "total_steps": self.total_steps}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.total_steps = state.get("total_steps")
