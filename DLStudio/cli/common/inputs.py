"""What the scripts' flags name, found and read: the archive (``--archive``, ``bundled``, the
clone's data/ folder, `resolve_archive`), the checkpoint and the rest of ``DIR [N] ...``,
the translation model with the weights and decoding it is used with (`load_translation`,
`take_best_use`), and a student's container class (``--model-class``, `subclass_of`)."""

import os
import sys

from ...checkpoints import (
    CheckpointError,
    ClassNotFound,
    best_use,
    find_checkpoint,
    import_class,
)
from ...data import BUNDLED_ARCHIVE, ArchiveError, load_archive
from ...evaluation.decode_and_score import LENGTH_PENALTY
from ...model.overrides import OverrideError
from ...runtime.distributed import launched_by_torchrun
from ...Transformers import TransformerBase
from .flags import DEFAULT_BEAM, DEFAULT_WEIGHTS
from .jobs import UserError, how_to_run

__all__ = ["CLONE_TOP", "missing_archive_message", "archive_named", "resolve_archive",
           "archive_or_usage", "take_best_use", "checkpoint_arguments", "checkpoint_and_rest",
           "load_translation", "load_checkpoint_or_exit", "subclass_of"]


def missing_archive_message(path):
    return (f"no archive at {path}.\n"
            "  - The lecture's archive en_es_xformer_8_90000.tar.gz goes in data/ at the top "
            "of the clone. Build it from spa.txt of spa-eng.zip "
            "(https://www.manythings.org/anki/), from the top of the clone:\n"
            "      python -m DLStudio.data build-archive spa.txt\n"
            f"  - or train on the bundled corpus: --archive bundled ({BUNDLED_ARCHIVE})")


#: The top of the clone this package runs from (None when it is installed): its data/ folder
#: is where the real archive goes, whichever folder a script is started from.
CLONE_TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
if not os.path.isdir(os.path.join(CLONE_TOP, "ExamplesTransformers")):
    CLONE_TOP = None


def archive_named(path):
    """``--archive``'s file: ``bundled`` names the bundled corpus, wherever this copy of the
    package keeps it; a relative path that is not there is looked for from the top of the
    clone too (``data/en_es_xformer_8_90000.tar.gz`` is then one file, whether a script
    starts from the clone's top or from ExamplesTransformers/)."""
    if path == "bundled":
        return BUNDLED_ARCHIVE
    if CLONE_TOP and not os.path.isabs(path) and not os.path.exists(path):
        at_top = os.path.join(CLONE_TOP, path)
        if os.path.exists(at_top):
            return at_top
    return path


def resolve_archive(path):
    """The archive file ``--archive`` names (`_archive_named`); if it is missing, a question
    at a terminal (train on the bundled corpus?), else UserError saying what to do."""
    path = archive_named(path)
    if os.path.isfile(path):
        return path
    if sys.stdin is not None and sys.stdin.isatty() and not launched_by_torchrun():
        print(missing_archive_message(path))
        answer = input("Use the bundled corpus instead? [y/N] ").strip().lower()
        if answer in ("y", "yes"):
            return BUNDLED_ARCHIVE
    raise UserError(missing_archive_message(path))


def archive_or_usage(parser, path, max_seq_length=10):
    """A benchmark's archive, or argparse's usage message saying what is wrong with it."""
    try:
        return load_archive(path, max_seq_length=max_seq_length)
    except (ArchiveError, FileNotFoundError) as e:
        parser.error(str(e))



def take_best_use(args, payload, path):
    """Fill the flags left unset (``--weights``, ``--beam``, ``--length-penalty``) from the
    checkpoint's best use, else the defaults; say on standard error what came from the
    checkpoint (standard output keeps one line per input)."""
    best, taken = best_use(payload), []
    if getattr(args, "weights", "") is None:
        args.weights = best.get("weights", DEFAULT_WEIGHTS)
        if "weights" in best:
            taken.append(f"its {'averaged' if args.weights == 'average' else 'raw'} weights")
    if getattr(args, "beam", "") is None:
        args.beam = best.get("beam", DEFAULT_BEAM)
        if "beam" in best:
            taken.append("greedy decoding" if args.beam == 1 else f"a beam of {args.beam}")
    if getattr(args, "length_penalty", "") is None:
        args.length_penalty = best.get("length_penalty", LENGTH_PENALTY)
        if "length_penalty" in best and args.beam > 1:
            taken[-1] += f" (length penalty {args.length_penalty})"
    if taken:
        print(f"{os.path.basename(path)}: {' and '.join(taken)}, as its run recorded it is best "
              "used (--weights raw --beam 1: the weights as trained, greedy)", file=sys.stderr)


def checkpoint_arguments(parser, args, sentence=False):
    """The checkpoint file (and sentence) that `add_checkpoint_arguments` read; no N means
    the newest ("last")."""
    more = list(args.more) if sentence else [m for m in [args.more] if m is not None]
    text = more.pop() if sentence else None
    extra = more[0 if os.path.isfile(args.checkpoint) else 1:]
    if any(m.endswith(".pt") and os.path.isfile(m) for m in extra):
        parser.error(f"{' '.join(extra)}: each checkpoint of an ensemble takes its own "
                     "--ensemble (--ensemble A.pt --ensemble B.pt)")
    if len(more) > (0 if os.path.isfile(args.checkpoint) else 1):
        parser.error(f"{args.checkpoint} is " + ("one checkpoint file: give no index" if
                     os.path.isfile(args.checkpoint) else "a directory: give one index N")
                     + f", not {' '.join(more)}")
    path = find_checkpoint(args.checkpoint, more[0] if more else None,
                           how_to_run("seq2seq_with_transformerFG"))
    return (path, text) if sentence else path


def hugging_face_folder(path):
    """Whether ``path`` is a Hugging Face model folder (its config.json), not ours."""
    return os.path.isfile(os.path.join(path, "config.json"))


def checkpoint_and_rest(args, train_script):
    """``DIR [N] [MORE ...]`` or ``FILE.pt [MORE ...]`` (``args.checkpoint``, ``args.more``)
    -> (the checkpoint file, MORE): N is taken only after a directory, when it is an epoch
    index or "last"."""
    more, index = list(args.more), None
    if os.path.isdir(args.checkpoint) and more and (more[0] == "last" or more[0].isdigit()):
        index = more.pop(0)
    return find_checkpoint(args.checkpoint, index, how_to_run(train_script)), more


def load_translation(path, archive=None, model_class=None, weights=None, args=None):
    """``(xformer, model)`` of a translation checkpoint, read once; ``archive``: score on
    that one (a name or a path) instead of the one it records; ``weights``: "raw",
    "average" or None (its best use). ``args``: the script's flags, which
    `take_best_use` completes from the checkpoint (its ``weights`` are then used)."""
    if args is not None:
        weights = args.weights
    xformer, model, payload = TransformerBase.from_checkpoint(
        path, archive=archive_named(archive) if archive else None, model_class=model_class,
        weights=weights)
    if args is not None:
        take_best_use(args, payload, path)
    return xformer, model


def load_checkpoint_or_exit(checkpoints_dir, index=None, archive=None, model_class=None,
                            weights=None):
    """``(xformer, model)`` from checkpoint N ("last" by default) of ``checkpoints_dir``, or
    from one checkpoint file (a student's container class: ``model_class``,
    "module:Class"); or a one-line message and exit code 1 (for scripts)."""
    try:
        return load_translation(find_checkpoint(checkpoints_dir, index), archive, model_class,
                                weights)
    except (UserError, ArchiveError, CheckpointError, FileNotFoundError, OverrideError,
            ClassNotFound) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def subclass_of(path, base):
    """The class named by ``--model-class``, which must be a subclass of ``base``."""
    cls = import_class(path)
    if not issubclass(cls, base):
        raise UserError(f"--model-class {path} is not a subclass of {base.__name__}")
    return cls
