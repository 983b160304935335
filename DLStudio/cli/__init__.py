"""The scripts' package: what the example scripts do, one module per job, over one public
module of what they share. Each script in ExamplesTransformers/ is a few lines that call one
of these functions; `dlstudio` (``main``) runs any of them by name.

    common                shared by all: the flags, how a job runs and fails, what the
                          flags name (archives, checkpoints, the model to translate with)
    translation           train, test a checkpoint, translate, homework, the demo
    vision                the visTransformer's training and checkpoint test
    gpt                   the GPT: training, prompts, the pre-training experiment
    checkpoint_pictures   a checkpoint's BLEU by epoch, its attention maps
    lecture_pictures      the warm-up, the position code, FG beside PreLN
    experiments           runs that compare designs (the bug museum is DLStudio.museum)
    explore, exercises    the attention explorer; exercises, checks and grading
    dispatcher            the `dlstudio` command
"""

from .common import (
    LECTURE,
    add_checkpoint_arguments,
    add_decoding_precision,
    add_run_arguments,
    add_stack_arguments,
    archive_or_usage,
    checkpoint_arguments,
    existing_file,
    how_to_run,
    load_checkpoint_or_exit,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
)
from .dispatcher import COMMANDS, copy_examples, main
from .translation import (
    HOMEWORK,
    demo_main,
    homework_main,
    test_checkpoint_main,
    train_main,
    translate_main,
)
from .vision import VIT_DEFAULTS, vit_test_checkpoint_main, vit_train_main

__all__ = ["train_main", "test_checkpoint_main", "translate_main", "load_checkpoint_or_exit",
           "positive_int", "positive_float", "nonnegative_float", "nonnegative_int",
           "existing_file", "archive_or_usage", "add_checkpoint_arguments", "add_run_arguments",
           "add_stack_arguments", "add_decoding_precision", "checkpoint_arguments",
           "vit_train_main", "vit_test_checkpoint_main", "homework_main", "LECTURE",
           "VIT_DEFAULTS", "HOMEWORK", "demo_main", "how_to_run", "COMMANDS", "copy_examples",
           "main"]
