"""A run's bookkeeping around its checkpoints: which files on disk this framework wrote (so
that no run writes over a student's file: `written_here`, `refuse_theirs`, `free_name`,
the saved model's paths), and what ``--resume`` checks before it goes on from a checkpoint
(`check_resumable`, `check_same_run`, `check_same_average`)."""

import json
import logging
import os

from .files import FORMAT, CheckpointError, _manifest, _sha256, load_checkpoint, saved_model_paths

log = logging.getLogger("DLStudio")

__all__ = ["written_here", "refuse_theirs", "free_name", "refuse_saved_model_of_theirs",
           "RESUME_KEYS", "check_resumable", "check_same_run", "check_same_average"]


def written_here(path):
    """Is ``path`` a file this framework wrote, unchanged since? (The manifest says so, or,
    for a file from before manifests, it is a checkpoint of our format.)"""
    if not os.path.isfile(path):
        return False
    recorded = _manifest(path)[1].get(os.path.basename(path))
    if recorded is not None:
        return recorded == _sha256(path)
    try:
        return load_checkpoint(path).get("format") == FORMAT
    except CheckpointError:
        return False


def refuse_theirs(path, what):
    """Raise FileExistsError, saying what to do, when something we did not write is at
    ``path`` (``what`` names the setting that chose it)."""
    if os.path.lexists(path) and not written_here(path):
        raise FileExistsError(
            f"{path} holds a {'folder' if os.path.isdir(path) else 'file'} this framework did "
            f"not write, and {what} would write over it: move it away, or choose another "
            f"{what}. Nothing was trained or written.")


def free_name(path):
    """``path`` if nothing is there or we wrote what is; else the first free NAME-1.EXT,
    NAME-2.EXT, ... beside it (a picture or a list of the student's stays as it is)."""
    stem, ext = os.path.splitext(path)
    n = 0
    while os.path.lexists(path) and not written_here(path):
        n += 1
        path = f"{stem}-{n}{ext}"
    return path


def refuse_saved_model_of_theirs(path_saved_model):
    """Before training: refuse a ``path_saved_model`` that holds a file we did not write."""
    for path in saved_model_paths(path_saved_model):
        refuse_theirs(path, "path_saved_model")


#: What a checkpoint needs for --resume to go on from it (a model's final file, or one
#: written for a smaller download, may have left some out).
RESUME_KEYS = ("optimizer", "step", "epoch", "epoch_complete", "train_losses")


def check_resumable(payload, path="the checkpoint"):
    """Raise CheckpointError naming what ``--resume`` needs and the checkpoint lacks."""
    missing = [key for key in RESUME_KEYS if key not in payload]
    if missing:
        raise CheckpointError(
            f"cannot resume from {path}: it keeps no {' and no '.join(missing)} state (it "
            "holds weights to use, not a run to continue). Use it with the later scripts, or "
            "start a new run with --overwrite.")


def check_same_run(payload, ours, description, path="the checkpoint", previous="previous/"):
    """Raise ValueError naming what differs between a checkpoint's training configuration
    and ``ours`` (the trainer's). A setting newer than the checkpoint is compared at its
    default (``identity_defaults`` of the model's description), and precision, recorded
    since bf16 came, at fp32: a new setting never makes an old run unresumable."""
    theirs = payload.get("training_config")
    if theirs is None:
        log.warning("%s records no training configuration (an older checkpoint): "
                    "resuming without checking it", path)
        return
    older = json.loads(json.dumps(description.get("identity_defaults", {}), default=str))
    if "precision" not in theirs:
        log.warning("%s records no precision (written before it was recorded): it was "
                    "trained in fp32, the only precision there was", path)
    theirs = {"precision": "fp32", **{k: v for k, v in older.items() if k in ours}, **theirs}
    differ = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
    if differ:
        said = "; ".join(f"{k}: {theirs.get(k)} there, {ours.get(k)} now" for k in differ)
        raise ValueError(
            f"cannot resume from {path}: its run was trained differently ({said}). Resume "
            "with the same settings (only the number of epochs, time and step limits, the "
            "device and threads may change), or start a new run with --overwrite (the "
            f"old one moves to {previous}).")


def check_same_average(payload, ema, path="the checkpoint"):
    """Raise ValueError when the run's moving average of the weights (--ema) would change
    on --resume: another decay, or none where the checkpoint keeps one. A checkpoint
    without an average resumes with any (the average starts from its weights)."""
    theirs = (payload.get("average") or {}).get("decay")
    if theirs is not None and theirs != ema:
        raise ValueError(
            f"cannot resume from {path}: its run averaged its weights with another decay "
            f"(ema: {theirs} there, {ema} now). Resume with --ema {theirs}, or start a new "
            "run with --overwrite.")
