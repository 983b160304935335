"""How the weights lie in memory while a model generates one token at a time on a CPU.

At batch 1 each step multiplies one vector by every weight matrix, so a step is as fast
as the matrices stream from memory. A ``nn.Linear`` keeps W (out, in) row by row, and the
matrix-vector product PyTorch's CPU library computes from it streams more slowly than from
the same numbers kept column by column (W.t() contiguous, W itself then a view of the same
shape and values). Measured on an AMD EPYC, fp32 (benchmarks/bench_generate.py; the
figures are in docs/performance.md): the product with the output layer's matrix (V, M) took
13.6 ms row by row and 7.9 ms column by column; the feed-forward's widening matrices
(F, M) gained about 13%; square and narrowing ones (W_O, the feed-forward's last) nothing.

`read_by_columns` lays out the widening matrices (more outputs than inputs) column by column
for the duration of ``with`` and back afterwards (also after an error), one matrix at a time,
so that no second copy of the weights is held; a tied embedding is the same Parameter and is
moved once. Parameters keep their names, shapes, values and optimiser state: training never
sees the other layout.
"""

import contextlib

import torch
import torch.nn as nn

__all__ = ["read_by_columns", "worth_it"]


def worth_it(model, rows, steps):
    """Whether `read_by_columns` pays for ``rows`` sequences and ``steps`` tokens: a CPU, fp32
    weights, at most two rows (at 8 the products are matrix-matrix and gained nothing) and
    enough steps to repay moving the matrices twice (about a step's time each way)."""
    p = next(model.parameters(), None)
    return (p is not None and p.device.type == "cpu" and p.dtype == torch.float32
            and rows <= 2 and steps >= 8)


def _widening(model):
    """Each Linear weight of ``model`` with more outputs than inputs, once."""
    seen = {}
    for module in model.modules():
        w = getattr(module, "weight", None)
        if isinstance(module, nn.Linear) and isinstance(w, torch.Tensor) and w.dim() == 2 \
                and w.size(0) > w.size(1):
            seen.setdefault(id(w), w)
    return list(seen.values())


@contextlib.contextmanager
def read_by_columns(model, use=True):
    """``with read_by_columns(model):`` the widening Linear weights of ``model`` lie column
    by column (W.t() contiguous); afterwards row by row again. ``use`` False: nothing moves."""
    weights = _widening(model) if use else []
    moved = []
    try:
        with torch.inference_mode(False), torch.no_grad():      # (plain tensors, always)
            for w in weights:
                if w.is_contiguous():
                    w.data = w.data.t().contiguous().t()        # the same numbers, by column
                    moved.append(w)
        yield
    finally:
        with torch.inference_mode(False), torch.no_grad():
            for w in moved:
                w.data = w.data.contiguous()                    # row by row, as it was
