"""The checkpoint file: one self-describing file each, written atomically, read safely, and
the one place where its contents are built (`make_payload`) and checked (`check_fits`).

A checkpoint is a dict of plain data and tensors (so ``torch.load(weights_only=True)``
reads it and a crafted file cannot run code; no class is ever unpickled from it):

    format, variant ("FG" | "PreLN" | "GPT" | "visTransformer"),
    container_class ("module:Class", e.g. "DLStudio.Transformers:TransformerFG" or a
                     student's "homework_my_attention_head:TransformerFGWithTemperature"),
    container_args, shape_args, shape_defaults,         # the settings (containers.settings):
                                                        # all of them, those that shape the
                                                        # weights, those --resume compares
    run_id, training_config,                            # which run; what --resume checks
    epoch, step, epoch_complete, batches_done, optimizer, rng, train_losses,
    held_out_bleu | held_out_accuracy | held_out_perplexity,   # (step, epoch, score or None)
    average {decay, model}, best_use {weights, beam, length_penalty}   # (--ema only)
  translation:
    encoder_config, decoder_config,
    vocab_en, vocab_es, vocab_fingerprint,              # the model needs no archive
    tokenizers (BPE only: each language's merges),
    model {embeddings_generator_en, embeddings_generator_es, encoder, decoder}
  visTransformer:
    model (its state_dict, pixel statistics included), dataset (how to get its images back)
  GPT:
    model (its state_dict; a LoRA fine-tuning's: the weights that learn alone, with
    weights_kept "learnt"), tokenizer_state (the word list or the BPE merges)

The model describes itself (``model.description()``, from its settings' description,
DLStudio.containers.settings); this module never imports it.
"""

import glob
import hashlib
import json
import logging
import os
import re
import tempfile

import torch

from .shards import read_whole

log = logging.getLogger("DLStudio")

__all__ = ["CheckpointError", "FORMAT", "checkpoint_path", "checkpoint_files",
           "list_checkpoints", "find_checkpoint", "save_checkpoint", "load_checkpoint",
           "make_payload", "WEIGHTS", "best_use", "weights_of", "with_weights", "check_fits",
           "load_into", "save_final", "saved_model_paths", "MANIFEST", "mark_written"]

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
        if m and os.path.isfile(path):
            found.append(((int(m.group(1)) - (0.5 if m.group(2) else 0.0)), path))
    return [path for _, path in sorted(found)]


def _describe(files):
    names = [os.path.basename(p)[len("checkpoint_"):-len(".pt")] for p in files]
    return ", ".join(n.replace("_partial", " (partial)") for n in names)


def find_checkpoint(where, index=None, train_command="python3 seq2seq_with_transformerFG.py"):
    """The file a script's ``DIR N`` names. ``where`` is a checkpoints directory or one
    checkpoint file (then no index). N is an epoch index (its complete checkpoint, else the
    partial one written inside that epoch by --max-minutes or Ctrl-C) or "last" (the newest
    state, partial or not; the default). Raises CheckpointError saying what there is, and
    ``train_command`` when there is nothing."""
    if os.path.isfile(where):
        if index is not None:
            raise CheckpointError(f"{where} is one checkpoint file: give it without an index")
        return where
    if not os.path.isdir(where):
        raise CheckpointError(f"no checkpoint file or directory {where}: train first, e.g. "
                              f"{train_command}")
    files = checkpoint_files(where)
    if not files:
        raise CheckpointError(f"{where} holds no checkpoint yet")
    if index is None or str(index) == "last":
        return files[-1]
    try:
        n = int(index)
    except ValueError:
        raise CheckpointError(f"checkpoint index {index!r}: give an epoch number or 'last'") \
            from None
    for name in (f"checkpoint_{n}.pt", f"checkpoint_{n}_partial.pt"):
        if os.path.isfile(os.path.join(where, name)):
            return os.path.join(where, name)
    raise CheckpointError(f"no checkpoint {n} in {where}; it has {_describe(files)} "
                          "(or give 'last')")


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
    at any moment leaves either the old file or the complete new one under ``path``. Raises
    CheckpointError, naming the path, when it cannot be written (a full disk, a folder of
    that name, no permission)."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-" + os.path.basename(path))
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise CheckpointError(f"cannot write {path}: {e.strerror or e}. Nothing there was "
                                  "changed; free that path or choose another folder "
                                  "(--checkpoints-dir)") from e
        raise
    mark_written(path)                  # the file is in place: only now is it ours


# ---------------------------------------------------------------------------------------
# What we wrote: a small manifest in each folder we write to, so that no run writes over a
# file it did not write (a student's own model or picture of the same name).
MANIFEST = ".dlstudio-written.json"


def _manifest(path):
    where = os.path.join(os.path.dirname(os.path.abspath(path)), MANIFEST)
    try:
        with open(where, encoding="utf-8") as f:
            found = json.load(f)
        return where, found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return where, {}


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def mark_written(path):
    """Record in the manifest beside ``path`` (``.dlstudio-written.json``) that this
    framework wrote the file there now (its name and SHA-256)."""
    where, written = _manifest(path)
    written[os.path.basename(path)] = _sha256(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(where), prefix=".tmp-manifest")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(written, f, indent=0, sort_keys=True)
    os.replace(tmp, where)


def load_checkpoint(path, map_location="cpu", shards=True):
    """Read a checkpoint with ``weights_only=True``; raise ``CheckpointError`` naming the
    file when it is missing, truncated, crafted or not one of ours. A sharded one (fine-tuned
    under FSDP: its weights in a folder of shards, shards.py) has its weights read whole
    (``shards`` False: the trainer's file alone; --resume reads the shards itself)."""
    if not os.path.isfile(path):
        folder = os.path.dirname(path) or "."
        have = checkpoint_files(folder) if os.path.isdir(folder) else []
        hint = f" Checkpoints there: {_describe(have)}." if have else ""
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
    if shards and payload.get("shards"):
        folder = os.path.join(os.path.dirname(path), str(payload["shards"]))
        try:
            whole = read_whole(folder)
        except Exception as e:
            raise CheckpointError(f"{path} keeps its weights in {folder}, which is not "
                                  f"readable: {type(e).__name__}: {str(e)[:200]}") from None
        payload["model"] = whole["model"]
    return upgraded(payload)


#: Settings renamed since a checkpoint was written: old name -> (new name, its value).
RENAMED = {"learned_positions": ("positions", lambda learned: "learned" if learned
                                 else "sinusoidal")}


def upgraded(payload):
    """A checkpoint's recorded settings under today's names (``RENAMED``), so that an older
    run loads, fits and resumes as it was trained (its file is not rewritten)."""
    for part in ("container_args", "training_config"):
        args = payload.get(part)
        for old, (new, value) in RENAMED.items():
            if isinstance(args, dict) and old in args:
                args.setdefault(new, value(args.pop(old)))
    return payload


# ---------------------------------------------------------------------------------------
# What goes into a checkpoint, and whether one fits a model.
def _weights(model):
    if hasattr(model, "parts"):     # translation: each part under its DLStudio name
        return {name: part.state_dict() for name, part in model.parts().items()}
    return model.state_dict()


#: The weights a checkpoint may hand out: as trained, or their moving average (--ema).
WEIGHTS = ("raw", "average")


def best_use(payload):
    """How the checkpoint's run says it is best used: {"weights", "beam", "length_penalty"}
    (a run with --ema: its averaged weights, and the decoding its recipe reported last),
    or {} (use it as the scripts do by default: raw weights, greedy)."""
    return dict(payload.get("best_use") or {})


def weights_of(model):
    """A model's weights as a checkpoint keeps them (translation: by DLStudio's part names)."""
    return _weights(model)


def with_weights(payload, which, path="the checkpoint"):
    """The checkpoint with the weights asked for as its model: "raw" (as trained),
    "average" (the exponential moving average that training with --ema keeps beside) or
    None (those of its `best_use`: the average where it keeps one)."""
    if which is None:
        which = best_use(payload).get("weights", "raw")
    if which not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, not {which!r}")
    if which == "raw":
        return payload
    if not payload.get("average"):
        raise CheckpointError(f"{path} keeps no averaged weights: its run trained without "
                              "--ema. Use --weights raw, or train with --ema.")
    return {**payload, "model": payload["average"]["model"]}


def make_payload(model, training_state):
    """The checkpoint of ``model`` (its ``description()`` and weights) with the trainer's
    ``training_state`` (epoch, step, optimizer, rng, losses, scores)."""
    return {"format": FORMAT, **model.description(), "model": _weights(model),
            **training_state}


def _plain(value):
    """Tuples and lists compare alike (a checkpoint keeps lists)."""
    return list(value) if isinstance(value, (tuple, list)) else value


def check_fits(payload, description, path="the checkpoint"):
    """Raise CheckpointError unless the checkpoint was built like the described model: the
    same variant, vocabularies, stacks and weight-shaping constructor arguments."""
    for key, what in (("variant", "variant"), ("vocab_fingerprint",
                      "vocabularies (another archive)"), ("encoder_config", "encoder_config"),
                      ("decoder_config", "decoder_config")):
        if key in description and payload.get(key) != description[key]:
            raise CheckpointError(f"{path} does not fit this model: its {what} is "
                                  f"{payload.get(key)}, this model's is {description[key]}")
    theirs, ours = payload.get("container_args", {}), description["container_args"]
    older = description.get("shape_defaults", {})   # a setting newer than the checkpoint
    for name in description["shape_args"]:
        if _plain(theirs.get(name, older.get(name))) != _plain(ours[name]):
            raise CheckpointError(f"{path} was trained with {name}={theirs.get(name)}, this "
                                  f"model has {name}={ours[name]}")


def load_into(model, checkpoint):
    """Copy a checkpoint's (path or dict) weights into ``model`` after `check_fits`.
    Returns the checkpoint's dict."""
    path, payload = ((checkpoint, load_checkpoint(checkpoint)) if isinstance(checkpoint, str)
                     else ("the checkpoint", checkpoint))
    check_fits(payload, model.description(), path)
    weights = payload["model"]
    learnt_only = payload.get("weights_kept") == "learnt"   # a LoRA run's: A, B, a head
    try:
        if hasattr(model, "parts"):
            for name, part in model.parts().items():
                part.load_state_dict(weights[name])
        else:
            missing, unexpected = model.load_state_dict(weights, strict=not learnt_only)
    except (RuntimeError, KeyError) as e:
        raise CheckpointError(f"{path}: its weights do not fit this model ("
                              f"{str(e).splitlines()[0][:300]}); was it written by another "
                              "class? See its container_class.") from None
    if learnt_only:
        learns = {n for n, p in model.named_parameters() if p.requires_grad}
        if unexpected or set(missing) & learns:
            raise CheckpointError(
                f"{path} keeps a LoRA fine-tuning's learnt weights alone (not "
                f"{', '.join(sorted(set(missing) & learns)[:2]) or 'these'}"
                f"{', nor a place for ' + sorted(unexpected)[0] if unexpected else ''}): "
                "resume it with finetune_lm.py --resume on the same model, or read what its "
                "--out wrote (the adapter, the merged folder)")
    return payload


def saved_model_paths(path_saved_model):
    """The files ``path_saved_model`` names: one path, or each of DLStudio's dict."""
    if isinstance(path_saved_model, str):
        return [path_saved_model]
    return list(path_saved_model.values())


def save_final(payload, path_saved_model):
    """Write the final model. One path: one checkpoint file. A dict of paths (DLStudio's
    ``encoder_FG``, ``decoder_FG``, ``embeddings_generator_en_FG``, ...): the complete
    checkpoint under the encoder's path, and each component's weights under its own."""
    if isinstance(path_saved_model, str):
        save_checkpoint(payload, path_saved_model)
    else:
        for key, path in path_saved_model.items():
            part = key.rsplit("_", 1)[0]          # "encoder_FG" -> "encoder"
            if part == "encoder":
                save_checkpoint(payload, path)
            elif isinstance(payload["model"], dict) and part in payload["model"]:
                save_checkpoint(payload["model"][part], path)
    log.info("final model written: %s", ", ".join(saved_model_paths(path_saved_model)))
