"""Pictures that show what the model does: attention maps, the positional encoding, the
warm-up schedule, a run's training loss, BLEU across checkpoints, training curves side by
side, and for the
visTransformer the confusion matrix, labelled test images and the class token's attention.

Every function writes a PNG with matplotlib's object-oriented API (no window, no global
state) and returns its path.
"""

import os

from matplotlib.figure import Figure

__all__ = ["plot_attention", "plot_positional_encoding", "plot_lr_schedule", "plot_loss",
           "plot_bleu_by_epoch", "plot_runs", "find_divergence", "plot_confusion_matrix",
           "plot_image_grid", "plot_class_token_attention"]


def _save(fig, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path


def plot_attention(maps, query_words, key_words, title, path):
    """A grid of attention maps: one row per layer, one column per head.

    Args:
        maps: list (one per layer) of (H, T_q, T_k) tensors of weights.
        query_words, key_words: axis labels (T_q and T_k words).
    """
    layers, heads = len(maps), maps[0].size(0)
    fig = Figure(figsize=(2.6 * heads + 1, 2.6 * layers + 0.6))
    axes = fig.subplots(layers, heads, squeeze=False)
    for i, layer in enumerate(maps):
        for h in range(heads):
            ax = axes[i][h]
            ax.imshow(layer[h].numpy(), vmin=0.0, vmax=1.0, cmap="viridis")
            ax.set_xticks(range(len(key_words)), key_words, rotation=90, fontsize=7)
            ax.set_yticks(range(len(query_words)), query_words, fontsize=7)
            ax.set_title(f"layer {i}, head {h}", fontsize=8)
    fig.suptitle(title)
    return _save(fig, path)


def plot_positional_encoding(pe, path, title="Sinusoidal positional encoding"):
    """The (positions x M) code as a heatmap, and the cosine similarity of positions."""
    fig = Figure(figsize=(12, 4.5))
    ax1, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
    im = ax1.imshow(pe.numpy(), aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    ax1.set_xlabel("embedding dimension (even: sin, odd: cos)")
    ax1.set_ylabel("position in the sentence")
    ax1.set_title(title)
    fig.colorbar(im, ax=ax1)
    unit = pe / pe.norm(dim=1, keepdim=True)
    im2 = ax2.imshow((unit @ unit.T).numpy(), cmap="viridis")
    ax2.set_xlabel("position")
    ax2.set_ylabel("position")
    ax2.set_title("cosine similarity of positions")
    fig.colorbar(im2, ax=ax2)
    return _save(fig, path)


def plot_lr_schedule(lr_at, steps, path, title):
    """The learning rate at every step, from a pure function ``lr_at(step)``."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    xs = list(range(1, steps + 1))
    ax.plot(xs, [lr_at(s) for s in xs])
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("learning rate")
    ax.set_title(title)
    return _save(fig, path)


def plot_loss(losses, scores, score_name, title, path):
    """A run's training loss (smoothed to at most 200 points) against steps, and its held-out
    score at each checkpoint (``scores``: (step, epoch, score or None: missing) rows)."""
    import torch
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    losses = torch.tensor(losses)
    k = max(1, len(losses) // 200)
    smooth = losses[: len(losses) // k * k].view(-1, k).mean(1)
    ax.plot(torch.arange(len(smooth)) * k, smooth)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_title(f"{title}: training loss")
    scored = [r for r in scores if r[2] is not None]
    if scored:
        ax2 = ax.twinx()
        ax2.plot([r[0] for r in scored], [r[2] for r in scored], color="tab:red", marker="o")
        ax2.set_ylabel(f"held-out {score_name}", color="tab:red")
    fig.savefig(path, dpi=100)
    return path


def find_divergence(bleus, collapse=0.25, min_peak=5.0):
    """Index of the first score that fell below ``collapse`` times the best score before
    it, once that best score had reached ``min_peak``; None when the run never collapsed."""
    best = float("-inf")
    for i, b in enumerate(bleus):
        if best >= min_peak and b < collapse * best:
            return i
        best = max(best, b)
    return None


def plot_bleu_by_epoch(epochs, bleus, path, title, diverged_at=None):
    """Held-out BLEU against the epoch of each checkpoint, with a divergence marked."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    ax.plot(epochs, bleus, marker="o")
    if diverged_at is not None:
        ax.axvline(epochs[diverged_at], color="red", linestyle="--")
        ax.annotate("diverged", (epochs[diverged_at], bleus[diverged_at]), color="red")
    ax.set_xlabel("epoch of the checkpoint (0-based)")
    ax.set_ylabel("held-out BLEU (NLTK)")
    ax.set_title(title)
    return _save(fig, path)


def plot_runs(runs, path, title):
    """Loss and held-out BLEU against steps and against minutes, one line per run.

    Args:
        runs: dict name -> list of rows with "steps", "minutes", "loss", "bleu".
    """
    fig = Figure(figsize=(12, 8))
    axes = fig.subplots(2, 2)
    for name, rows in runs.items():
        for col, x in enumerate(("steps", "minutes")):
            xs = [r[x] for r in rows]
            axes[0][col].plot(xs, [r["loss"] for r in rows], marker=".", label=name)
            axes[1][col].plot(xs, [r["bleu"] for r in rows], marker="o", label=name)
    for row, y in enumerate(("training loss", "held-out BLEU")):
        for col, x in enumerate(("optimiser steps", "minutes of training")):
            axes[row][col].set_xlabel(x)
            axes[row][col].set_ylabel(y)
            axes[row][col].legend()
    fig.suptitle(title)
    return _save(fig, path)



def plot_confusion_matrix(matrix, classes, path, title):
    """(K, K) counts, rows true class, columns predicted, shown as row fractions."""
    K = len(classes)
    fractions = matrix.float() / matrix.sum(1, keepdim=True).clamp_min(1)
    fig = Figure(figsize=(1.0 + 0.7 * K, 0.8 + 0.7 * K))
    ax = fig.add_subplot()
    ax.imshow(fractions.numpy(), vmin=0.0, vmax=1.0, cmap="Blues")
    for i in range(K):
        for j in range(K):
            ax.text(j, i, str(int(matrix[i, j])), ha="center", va="center", fontsize=7,
                    color="white" if fractions[i, j] > 0.5 else "black")
    ax.set_xticks(range(K), classes, rotation=45, ha="right")
    ax.set_yticks(range(K), classes)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def plot_image_grid(images, true, predicted, classes, path, title, columns=8):
    """Images (N, C, H, W) uint8 with their true and predicted labels (red when wrong)."""
    n = len(images)
    rows = (n + columns - 1) // columns
    fig = Figure(figsize=(1.6 * columns, 1.8 * rows + 0.4))
    for i in range(n):
        ax = fig.add_subplot(rows, columns, i + 1)
        ax.imshow(images[i].permute(1, 2, 0).numpy())
        ok = int(true[i]) == int(predicted[i])
        ax.set_title(f"{classes[int(predicted[i])]}\n(true {classes[int(true[i])]})",
                     fontsize=7, color="black" if ok else "red")
        ax.axis("off")
    fig.suptitle(title)
    return _save(fig, path)


def plot_class_token_attention(images, maps, grid, path, title, class_token=True):
    """Where the class token looks: for each image, its picture and, for every layer, the
    class token's attention over the patches (mean over heads). Without a class token
    (sequence pooling over convolutions' tokens), the attention each token receives (mean
    over heads and queries).

    Args:
        images: (N, C, H, W) uint8.  maps: list (one per layer) of (N, H, T, T), T = 1 + N_p
            with a class token, N_p without.  grid: (rows, columns) of the image's tokens.
    """
    n, layers = len(images), len(maps)
    fig = Figure(figsize=(1.8 * (layers + 1), 1.8 * n + 0.4))
    axes = fig.subplots(n, layers + 1, squeeze=False)
    for i in range(n):
        axes[i][0].imshow(images[i].permute(1, 2, 0).numpy())
        axes[i][0].set_title("image", fontsize=7)
        for k, layer in enumerate(maps):
            weights = (layer[i, :, 0, 1:].mean(0) if class_token else
                       layer[i].mean((0, 1))).reshape(grid)                 # (rows, columns)
            axes[i][k + 1].imshow(weights.numpy(), cmap="magma")
            axes[i][k + 1].set_title(f"layer {k}", fontsize=7)
        for ax in axes[i]:
            ax.axis("off")
    fig.suptitle(title)
    return _save(fig, path)
