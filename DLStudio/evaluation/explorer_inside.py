"""What the attention explorer shows beyond attention (evaluation/interpret.py, computed when
the page is written, or by its server for a typed sentence): the logit lens and every head
switched off.

    lens       rows: the residual stream before each layer and after the last, read by the
               output layer; columns: the positions; a cell: the likeliest token there and
               its probability
    ablation   for each kind of attention, layers x heads: with that head's output set to 0,
               the mean change of the log-probability of the output's tokens (negative: the
               head helped), at how many of the output's positions the likeliest token
               changes, and the first such position with the token that would come instead
"""

import torch

from . import interpret

__all__ = ["lens_table", "ablation_grid", "MAX_HEADS", "MAX_POSITIONS"]

#: A model with more layers x heads than this gets no ablation grid (one pass a head).
MAX_HEADS = 512
#: The lens shows at most this many positions (the last ones).
MAX_POSITIONS = 24


def lens_table(model, inputs, readable, stack=None, positions=None):
    """The logit lens of ``inputs`` (batch row 0): {"rows", "columns", "cells"}; a cell is
    [token, probability]. ``readable``: ids -> their texts; ``positions``: which columns (by
    default the last `MAX_POSITIONS`); their tokens label the columns (``columns`` given
    by the caller, the same length)."""
    lens = interpret.logit_lens(model, inputs, stack)[:, 0]                # (L + 1, T, V)
    T = lens.size(1)
    positions = list(range(max(0, T - MAX_POSITIONS), T)) if positions is None else positions
    probs = lens[:, positions].float().softmax(-1)                          # (L + 1, T', V)
    p, ids = probs.max(-1)
    rows = [f"before layer {i + 1}" for i in range(len(lens) - 1)] + ["after the last"]
    cells = [[[readable([i])[0], round(q, 4)] for i, q in zip(row_ids, row_p)]   # each alone
             for row_ids, row_p in zip(ids.tolist(), p.tolist())]
    return {"rows": rows, "positions": positions, "cells": cells}


def ablation_grid(model, inputs, targets, logits_of, readable, kinds):
    """Every head switched off in turn. ``targets``: (N,) the output's ids; ``logits_of``:
    the model's output -> the (N, V) logits that predicted them; ``kinds``: {kind: (stack,
    part)} ("decoder_self": ("decoder", "self_attention"), ...). Returns {kind: {"layers":
    [[{"delta", "changed", "first"} a head] a layer]}}, or {} for a model too large."""
    with torch.no_grad():
        base = logits_of(model.run_with_hooks(inputs)).float().log_softmax(-1)   # (N, V)
    rows = torch.arange(len(targets))
    grid = {}
    for kind, (stack, part) in kinds.items():
        parts = interpret.anatomy(model, stack)
        heads = getattr(parts.layers[0], part).num_atten_heads
        if len(parts.layers) * heads > MAX_HEADS:
            return {}
        layers = []
        for layer in range(len(parts.layers)):
            row = []
            for head in range(heads):
                with torch.no_grad():
                    out = logits_of(interpret.ablate(model, inputs, layer, head, part=part,
                                                     stack=stack)).float().log_softmax(-1)
                delta = (out[rows, targets] - base[rows, targets]).mean().item()
                moved = (out.argmax(-1) != base.argmax(-1)).nonzero().flatten().tolist()
                first = None if not moved else [moved[0], readable(
                    [int(out[moved[0]].argmax())])[0]]
                row.append({"delta": round(delta, 4), "changed": len(moved), "first": first})
            layers.append(row)
        grid[kind] = {"layers": layers}
    return grid
