"""What every script shares, the one public module of the scripts' package: argparse types
and flags, the error wrapper (`run`), archive resolution, checkpoint arguments and messages.

Every script's function takes ``argv`` and returns an exit code; bad arguments give a usage
message (argparse), and expected failures (a missing archive, a bad checkpoint, an unknown
word) give one line that says what to do, never a traceback.
"""

import argparse
import contextlib
import logging
import os
import sys

from ..checkpoints import (
    WEIGHTS,
    CheckpointError,
    ClassNotFound,
    best_use,
    find_checkpoint,
    import_class,
)
from ..data import BUNDLED_ARCHIVE, ArchiveError, ImageDataError, load_archive
from ..model.overrides import OverrideError
from ..runtime.distributed import (
    DistributedError,
    launched_by_torchrun,
    lost_a_peer,
    rank_from_env,
)
from ..runtime.distributed import leave as leave_process_group
from ..runtime.precision import PRECISIONS
from ..training.schedule import SCHEDULES
from ..training.trainer import TrainingDiverged, TrainingInterrupted
from ..Transformers import TransformerBase

log = logging.getLogger("DLStudio")


#: The lecture's configuration: what the scripts do when run with no arguments.
LECTURE = {"archive": "./data/en_es_xformer_8_90000.tar.gz", "embedding_size": 256,
           "num_layers": 4, "num_atten_heads": 4, "batch_size": 50, "epochs": 40,
           "num_warmup_steps": 4000, "max_seq_length": 10, "learning_rate": 1e-5,
           "lr_mul": 1.0}

#: ``--recipe NAME`` of the translation training scripts: defaults for their flags (by
#: argparse name), which a flag given beside it still overrides. "today30" is the 30-minute
#: recipe of docs/results.md (the lecture's sizes, BPE pieces; PreLN at a constant 5e-4);
#: benchmarks/recipe_sweep.py measures each change from it. "fast30" adds what the sweep
#: found to help: averaged weights and a beam (no training change beat the seed-to-seed
#: difference; docs/results.md). ``also_score``: the held-out decodings printed after the
#: greedy one, as (weights, beam width, length penalty).
TODAY30 = {"archive": "./data/en_es_xformer_8_90000.tar.gz", "batch_size": 128,
           "num_warmup_steps": 1000, "lr_mul": 1.0, "learning_rate": 5e-4, "dropout": 0.1,
           "label_smoothing": 0.1, "tokenizer": "bpe", "vocab_size": 8000,
           "max_minutes": 30.0, "epochs": 10_000}
RECIPES = {
    "today30": {**TODAY30, "also_score": [("raw", 4, 0.6)]},
    # the averaged weights (decay 0.998), decoded by a beam of 4 with alpha 1.0: chosen on
    # the development split of benchmarks/recipe_sweep.py
    "fast30": {**TODAY30, "ema": 0.998,
               "also_score": [("average", 1, 0.6), ("average", 4, 1.0)]},
}


class UserError(Exception):
    """A failure the user can fix; printed as one line, exit code 1."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose ``--help`` gives each flag's default (a switch's, or a
    value's that is unset until given, goes without saying)."""

    def format_help(self):
        for action in self._actions:
            help = action.help or ""
            if (action.option_strings and help is not argparse.SUPPRESS
                    and not any(action.default is unset  # (0 == False: compared by identity)
                                for unset in (None, False, argparse.SUPPRESS))
                    and "%(default)" not in help):
                action.help = f"{help} (default: %(default)s)".lstrip()
        return super().format_help()


def _number(convert, minimum, strict):
    """An argparse type: a number (int or float) >= minimum (> minimum when strict)."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if strict else '>='} {minimum}, got {value}")
        return value
    return parse


positive_int = _number(int, 1, strict=False)
positive_float = _number(float, 0.0, strict=True)
nonnegative_float = _number(float, 0.0, strict=False)
nonnegative_int = _number(int, 0, strict=False)


def positive_ints(text):
    """An argparse type: a comma-separated list of positive integers ("1000,3000")."""
    return [positive_int(part) for part in text.split(",")]



def archive_or_usage(parser, path, max_seq_length=10):
    """A benchmark's archive, or argparse's usage message saying what is wrong with it."""
    try:
        return load_archive(path, max_seq_length=max_seq_length)
    except (ArchiveError, FileNotFoundError) as e:
        parser.error(str(e))



def existing_file(text):
    """An argparse type: a file that exists (an archive, a checkpoint)."""
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"no file {text}")
    return text



def run_job(fn, argv):
    """Run a script's job: its expected failures print one line (exit 1). Under torchrun
    only rank 0 prints and logs; another rank prints its errors only, marked with its rank."""
    rank = rank_from_env()
    logging.basicConfig(level=logging.WARNING if rank else logging.INFO, format="%(message)s")
    try:
        with open(os.devnull, "w") as quiet, \
                contextlib.redirect_stdout(quiet if rank else sys.stdout):
            return fn(argv)
    except (UserError, ArchiveError, ImageDataError, CheckpointError, FileNotFoundError,
            FileExistsError, TrainingDiverged, TrainingInterrupted, OverrideError, ClassNotFound,
            DistributedError, ValueError) as e:
        if not getattr(e, "from_rank_0", False):     # else rank 0 has said it
            print(f"error{f' (rank {rank})' if rank else ''}: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        if not lost_a_peer(e):
            raise
        print(f"error (rank {rank}): stopped: the connection to another process of this "
              "run broke (when that process failed, its own message says why)",
              file=sys.stderr)
        return 1
    finally:
        leave_process_group()



#: "dlstudio" (or "python -m DLStudio") while `main` runs a script's job, for the commands
#: that the job prints.
launcher = None


def how_to_run(script):
    """The command that runs ``script`` (its name, without .py) the way this process was
    started: ``python3 script.py`` from ExamplesTransformers/, ``dlstudio script`` or
    ``python -m DLStudio.examples.script`` in an installed copy."""
    if launcher:
        return f"{launcher} {script}"
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name.startswith("DLStudio.examples."):
        return f"python -m DLStudio.examples.{script}"
    return f"python3 {script}.py"



# ---------------------------------------------------------------------------------------
def missing_archive_message(path):
    return (f"no archive at {path}.\n"
            "  - The lecture's archive en_es_xformer_8_90000.tar.gz goes in data/ at the top "
            "of the clone. Build it from spa.txt of spa-eng.zip "
            "(https://www.manythings.org/anki/), from the top of the clone:\n"
            "      python -m DLStudio.data build-archive spa.txt\n"
            f"  - or train on the bundled corpus: --archive bundled ({BUNDLED_ARCHIVE})")


#: The top of the clone this package runs from (None when it is installed): its data/ folder
#: is where the real archive goes, whichever folder a script is started from.
CLONE_TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def add_run_arguments(parser, checkpoints_dir, score, what):
    """The flags every training script shares: where checkpoints go and how often, when to
    stop, --overwrite / --resume, --track-<score> (``what``: the score), --seed, --cpu."""
    p = parser
    p.add_argument("--checkpoint-freq", type=positive_int, default=5)
    p.add_argument("--checkpoints-dir", default=checkpoints_dir)
    p.add_argument("--max-minutes", type=positive_float, default=None,
                   help="stop after this much training (a checkpoint is written)")
    p.add_argument("--max-steps", type=positive_int, default=None,
                   help="stop after this many optimiser steps (a checkpoint is written)")
    p.add_argument("--overwrite", action="store_true",
                   help="start a new run in a directory that holds one: the old run's "
                        "checkpoints move to DIR/previous/")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --checkpoints-dir from its newest checkpoint "
                        "(refused if a setting that changes training differs)")
    p.add_argument("--ema", type=positive_float, nargs="?", const=0.999, default=None,
                   metavar="DECAY", help="also keep an exponential moving average of the "
                                         "weights (DECAY 0.999 when not given), saved beside "
                                         "them in each checkpoint: --weights average uses it")
    p.add_argument("--schedule", choices=SCHEDULES, default="warmup",
                   help="the learning rate: warmup (the lecture's: FG warms up, then decays as "
                        "1/sqrt(step); PreLN keeps --learning-rate) or budget (the same peak, "
                        "then down to zero when --max-minutes or --max-steps ends, counted "
                        "over the whole run, resumes included)")
    p.add_argument(f"--track-{score}", action="store_true",
                   help=f"{what} at every checkpoint (plotted with the loss)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true", help="do not use a GPU even when present")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="number format of the forward pass: fp32, bf16 (autocast), fp16 "
                        "(CUDA, with a gradient scaler), auto (bf16 where the hardware has "
                        "it). See docs/performance.md.")
    p.add_argument("--compile", action="store_true",
                   help="train through torch.compile (compiles during the first steps; see "
                        "docs/performance.md for whether it pays on your machine)")


#: How the scripts translate unless told otherwise, in one place: every script that
#: translates or scores, and the attention explorer, take it from here. A checkpoint that
#: records its best use (a run with --ema: its averaged weights and its recipe's decoding,
#: checkpoints.best_use) is used so instead; `take_best_use` decides, and says so.
DEFAULT_BEAM = 1
DEFAULT_WEIGHTS = "raw"


def add_beam_argument(parser, help="beam width (1: greedy decoding)"):
    """``--beam`` and ``--length-penalty``: the decoding of every script that translates,
    with one default each (the checkpoint's best use first: `take_best_use`)."""
    parser.add_argument("--beam", type=positive_int, default=None,
                        help=f"{help} (default: the checkpoint's best use, which a recipe's run "
                             f"records; else {DEFAULT_BEAM})")
    parser.add_argument("--length-penalty", type=nonnegative_float, default=None,
                        metavar="ALPHA",
                        help="beam search ranks hypotheses by log p / length^ALPHA (0: no "
                             "penalty, 1: the mean per word; default: the checkpoint's best "
                             "use, else 0.6)")


def add_weights_argument(parser):
    """``--weights raw|average``: the checkpoint's weights as trained, or their moving
    average (kept when training had --ema)."""
    parser.add_argument("--weights", choices=WEIGHTS, default=None,
                        help="raw: as trained; average: their moving average (the run "
                             "trained with --ema; default: average where the checkpoint "
                             f"keeps one, else {DEFAULT_WEIGHTS})")


def take_best_use(args, payload, path):
    """Fill the flags left unset (``--weights``, ``--beam``, ``--length-penalty``) from the
    checkpoint's best use, else the defaults; say on standard error what came from the
    checkpoint (standard output keeps one line per input)."""
    from ..evaluation.decode_and_score import LENGTH_PENALTY  # (imported when asked)
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


def add_decoding_precision(parser):
    """``--precision`` of translation (greedy or beam decoding)."""
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="number format of decoding: fp32, bf16 (autocast), fp16 (CUDA), "
                             "auto (bf16 where the hardware has it). See "
                             "docs/performance.md.")


def add_stack_arguments(parser, defaults, layers):
    """A one-stack model's sizes (visTransformer, GPT): embedding, layers, heads, layout."""
    p, d = parser, defaults
    p.add_argument("--embedding-size", type=positive_int, default=d["embedding_size"])
    p.add_argument("--num-layers", type=positive_int, default=d["num_layers"], help=layers)
    p.add_argument("--num-atten-heads", type=positive_int, default=d["num_atten_heads"])
    p.add_argument("--layout", choices=("PreLN", "FG"), default="PreLN",
                   help="where LayerNorm sits: PreLN (no warm-up needed) or FG (post-LN)")
    p.add_argument("--num-warmup-steps", type=nonnegative_int, default=0,
                   help="FG layout: warm-up steps (0: Adam at --learning-rate)")



# ---------------------------------------------------------------------------------------
def add_checkpoint_arguments(parser, sentence=False):
    """``DIR [N]`` or ``FILE.pt`` (then, with ``sentence``, the English sentence): N is an
    epoch index, whose checkpoint may be a partial one, or "last" (the default)."""
    parser.add_argument("checkpoint", metavar="DIR|FILE",
                        help="a checkpoints directory, or one checkpoint file (.pt)")
    parser.add_argument("more", nargs="+" if sentence else "?", metavar=(
        "N SENTENCE" if sentence else "N"), help=("N: an epoch index or 'last' (not with a "
                                                  "FILE)" + ("; SENTENCE: English, or - to "
                                                             "read lines from standard input"
                                                             if sentence else "")))


def checkpoint_arguments(parser, args, sentence=False):
    """The checkpoint file (and sentence) that `add_checkpoint_arguments` read; no N means
    the newest ("last")."""
    more = list(args.more) if sentence else [m for m in [args.more] if m is not None]
    text = more.pop() if sentence else None
    if len(more) > (0 if os.path.isfile(args.checkpoint) else 1):
        parser.error(f"{args.checkpoint} is " + ("one checkpoint file: give no index" if
                     os.path.isfile(args.checkpoint) else "a directory: give one index N")
                     + f", not {' '.join(more)}")
    path = find_checkpoint(args.checkpoint, more[0] if more else None,
                           how_to_run("seq2seq_with_transformerFG"))
    return (path, text) if sentence else path


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


def say_how_to_test(script, trainer, model_class=None):
    """The end of a run: the exact command that tests the model it ended with."""
    if trainer.last_checkpoint:
        flag = f" --model-class {model_class}" if model_class else ""
        print(f"\nTest the model this run ended with:\n  {how_to_run(script)} "
              f"{trainer.last_checkpoint}{flag}")


def model_class_flag(parser, what):
    parser.add_argument("--model-class", metavar="MODULE:CLASS",
                        help=f"{what}, e.g. homework_my_attention_head:"
                             "TransformerFGWithTemperature (its module must be importable "
                             "from the current folder)")


def subclass_of(path, base):
    """The class named by ``--model-class``, which must be a subclass of ``base``."""
    cls = import_class(path)
    if not issubclass(cls, base):
        raise UserError(f"--model-class {path} is not a subclass of {base.__name__}")
    return cls
