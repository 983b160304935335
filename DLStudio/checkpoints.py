"""Checkpoints: one self-describing file each, written atomically, read safely.

A checkpoint is a dict of plain data and tensors (so ``torch.load(weights_only=True)``
reads it and a crafted file cannot run code):

    format, variant ("FG" | "PreLN" | "visTransformer"), epoch, step, epoch_complete,
    container_args,                                     # everything needed to rebuild
    optimizer, rng, train_losses, held_out_bleu | held_out_accuracy,
  translation:
    encoder_config, decoder_config,
    vocab_en, vocab_es, vocab_fingerprint,              # the model needs no archive
    model {embeddings_generator_en, embeddings_generator_es, encoder, decoder}
  visTransformer:
    model (its state_dict, pixel statistics included), dataset (how to get its images back)
"""

import glob
import os
import re
import tempfile

import torch

__all__ = ["CheckpointError", "FORMAT", "checkpoint_path", "checkpoint_files",
           "list_checkpoints",
           "save_checkpoint", "load_checkpoint"]

FORMAT = "dlstudio-transformers-checkpoint-v1"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used, with the file name and the reason."""


def checkpoint_path(checkpoints_dir, index):
    """``DIR/checkpoint_<index>.pt``: index is the 0-based epoch at whose end it was written."""
    return os.path.join(checkpoints_dir, f"checkpoint_{index}.pt")


def checkpoint_files(checkpoints_dir):
    """Every checkpoint file in a directory, oldest training state first (by epoch; a
    partial checkpoint, written inside an epoch, after the complete one before it)."""
    found = []
    for path in glob.glob(os.path.join(checkpoints_dir, "checkpoint_*.pt")):
        m = re.fullmatch(r"checkpoint_(\d+)(_partial)?\.pt", os.path.basename(path))
        if m:
            found.append(((int(m.group(1)) - (0.5 if m.group(2) else 0.0)), path))
    return [path for _, path in sorted(found)]


def list_checkpoints(checkpoints_dir):
    """The indices of the checkpoints in a directory, in increasing order."""
    found = []
    for path in glob.glob(os.path.join(checkpoints_dir, "checkpoint_*.pt")):
        m = re.fullmatch(r"checkpoint_(\d+)\.pt", os.path.basename(path))
        if m:
            found.append(int(m.group(1)))
    return sorted(found)


def save_checkpoint(payload, path):
    """Write ``payload`` to ``path`` through a temporary file and a rename, so that a crash
    at any moment leaves either the old file or the complete new one under ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-" + os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path, map_location="cpu"):
    """Read a checkpoint with ``weights_only=True``; raise ``CheckpointError`` naming the
    file when it is missing, truncated, crafted or not one of ours."""
    if not os.path.isfile(path):
        folder = os.path.dirname(path) or "."
        have = list_checkpoints(folder) if os.path.isdir(folder) else []
        hint = f" Checkpoints there: {have}." if have else ""
        raise CheckpointError(f"no checkpoint at {path}.{hint}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:
        raise CheckpointError(f"{path} is not a readable checkpoint (truncated, corrupted or "
                              f"not written by this framework): {type(e).__name__}: "
                              f"{str(e)[:200]}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a checkpoint of this framework "
                              f"(expected format {FORMAT!r})")
    return payload
