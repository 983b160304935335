"""What every script shares, the one public module of the scripts' package: the flags
(``flags``), how a job runs and fails (``jobs``: one line, never a traceback) and what the
flags name, found and read (``inputs``: archives, checkpoints, the model to translate with).

Every script's function takes ``argv`` and returns an exit code; bad arguments give a usage
message (argparse), and expected failures (a missing archive, a bad checkpoint, an unknown
word) give one line that says what to do, never a traceback.
"""

from . import jobs  # noqa: F401  (its launcher is set by the dispatcher)
from .flags import (
    DEFAULT_BEAM,
    DEFAULT_WEIGHTS,
    LECTURE,
    RECIPES,
    Parser,
    add_beam_argument,
    add_checkpoint_arguments,
    add_decoding_precision,
    add_run_arguments,
    add_since_2017_arguments,
    add_since_2023_arguments,
    add_stack_arguments,
    add_weights_argument,
    existing_file,
    model_class_flag,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    positive_ints,
    since_2017,
    since_2023,
)
from .inputs import (
    CLONE_TOP,
    archive_named,
    archive_or_usage,
    checkpoint_and_rest,
    checkpoint_arguments,
    hugging_face_folder,
    load_checkpoint_or_exit,
    load_translation,
    missing_archive_message,
    resolve_archive,
    subclass_of,
    take_best_use,
)
from .jobs import (
    UserError,
    how_to_run,
    log,
    python_command,
    run_job,
    say_how_to_test,
)

__all__ = ["LECTURE", "RECIPES", "Parser", "positive_int", "nonnegative_int", "positive_float",
           "nonnegative_float", "positive_ints", "existing_file", "add_run_arguments",
           "DEFAULT_BEAM", "DEFAULT_WEIGHTS", "add_beam_argument", "add_weights_argument",
           "add_decoding_precision", "add_stack_arguments", "add_checkpoint_arguments",
           "model_class_flag", "UserError", "run_job", "how_to_run", "python_command",
           "say_how_to_test", "log",
           "CLONE_TOP", "missing_archive_message", "archive_named", "resolve_archive",
           "archive_or_usage", "take_best_use", "checkpoint_arguments", "checkpoint_and_rest",
           "hugging_face_folder",
           "load_translation", "load_checkpoint_or_exit", "subclass_of",
           "add_since_2017_arguments", "since_2017", "add_since_2023_arguments", "since_2023"]
