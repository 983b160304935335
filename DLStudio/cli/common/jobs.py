"""How a script's job runs: its expected failures are one line and exit status 1, never a
traceback (`run_job`, `UserError`); under torchrun only rank 0 speaks; and the commands a
job prints are the ones that run on this machine (`how_to_run`, `say_how_to_test`)."""

import contextlib
import logging
import os
import shlex
import sys

from ...checkpoints import CheckpointError, ClassNotFound
from ...data import ArchiveError, ImageDataError
from ...model.overrides import OverrideError
from ...runtime.distributed import DistributedError, lost_a_peer, rank_from_env
from ...runtime.distributed import leave as leave_process_group
from ...training.trainer import TrainingDiverged, TrainingInterrupted

__all__ = ["UserError", "run_job", "how_to_run", "python_command", "say_how_to_test", "log"]

log = logging.getLogger("DLStudio")


class UserError(Exception):
    """A failure the user can fix; printed as one line, exit code 1."""


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
    """The command that runs ``script`` (its name, without .py) from where this process was
    started, the way it was started: ``python3 ExamplesTransformers/script.py`` from the
    clone's top (``python3 script.py`` from ExamplesTransformers/), ``dlstudio script`` or
    ``python -m DLStudio.examples.script`` in an installed copy. The interpreter is
    ``python3``, or this virtual environment's own where it is not activated (``make demo``
    runs ``.venv/bin/python``), so that the command runs as printed."""
    if launcher:
        return f"{launcher} {script}"
    python = python_command()
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name.startswith("DLStudio.examples."):
        return f"{python} -m DLStudio.examples.{script}"
    here = os.path.dirname(os.path.abspath(sys.argv[0] or os.curdir))
    return f"{python} {_shown(os.path.join(here, script + '.py'))}"


def python_command():
    """The interpreter as the commands a job prints name it: ``python3``, or this virtual
    environment's own where it is not activated."""
    return _shown(sys.executable) if _unactivated_venv() else "python3"


def _unactivated_venv():
    if sys.prefix == sys.base_prefix:
        return False
    active = os.environ.get("VIRTUAL_ENV")
    return not active or os.path.realpath(active) != os.path.realpath(sys.prefix)


def _shown(path):
    """``path`` as the user types it here: relative to the working folder when it lies
    under it, else whole; quoted for the shell where it must be."""
    try:
        relative = os.path.relpath(path)
    except ValueError:                                # (Windows: another drive)
        relative = path
    shown = relative if not relative.startswith(os.pardir) else os.path.abspath(path)
    return shlex.quote(shown) if os.sep == "/" else shown


def say_how_to_test(script, trainer, model_class=None):
    """The end of a run: the exact command that tests the model it ended with."""
    if trainer.last_checkpoint:
        flag = f" --model-class {model_class}" if model_class else ""
        print(f"\nTest the model this run ended with:\n  {how_to_run(script)} "
              f"{trainer.last_checkpoint}{flag}")
