"""Exercises: a student writes one part of the Transformer; its checks say what is wrong.

    dlstudio exercise                      the exercises, one a line
    dlstudio exercise NAME DIR             write the skeleton DIR/NAME.py (never over a file)
    dlstudio check NAME FILE [--train]     run NAME's checks on FILE (and train it)
    dlstudio check NAME --submissions DIR --csv FILE    grade a folder, one process a file

Each exercise is a module here (its checks, each named) with its skeleton in skeletons/; the
checking itself (loading a file, the reference switched off, messages) is in checking.py.
"""

import importlib
import os

__all__ = ["NAMES", "exercise", "skeleton_path"]

#: In the lecture's order.
NAMES = ("attention", "attention_head", "multi_head", "positional_encoding", "masks",
         "residual_blocks", "loss", "greedy_decoding", "beam_step", "bpe", "patch_embedding",
         "warmup_schedule", "masking", "rmsnorm", "rope", "swiglu", "grouped_query",
         "qk_norm", "sliding_window", "relative_positions", "t5_bias", "lora",
         "quantization", "activation_patching", "induction_heads")


def exercise(name):
    """The Exercise called ``name`` (ValueError naming the exercises if there is none)."""
    if name not in NAMES:
        import difflib
        near = difflib.get_close_matches(name, NAMES, n=1)
        raise ValueError(f"no exercise {name!r}" + (f" (did you mean {near[0]}?)" if near
                                                    else "") + f"; they are: {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{name}").EXERCISE


def skeleton_path(name):
    """The skeleton of exercise ``name``: the file `dlstudio exercise` copies."""
    return os.path.join(os.path.dirname(__file__), "skeletons", f"{name}.py")
