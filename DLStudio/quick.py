"""``DLSTUDIO_QUICK=1``: every script at a size that runs in seconds, for trying a page's
commands as printed before spending the time they take at full size.

With the variable set, every script's flags are shrunk after they are read (a size, a number
of steps or minutes is at most `CAPS`' value; the sizes given stay when they are smaller)
and every training epoch stops after `BATCHES_PER_EPOCH` batches, so that a command that
trains for 40 epochs still writes checkpoint_39.pt, as the page's next command expects;
BLEU is scored on the first `HELD_OUT` held-out sentences, and a benchmark measures its
smallest case. A BPE vocabulary keeps its size: a smaller one cuts sentences into more
pieces, and the lengths a model reads would no longer be those of the full run. The numbers
a quick run prints (losses, BLEU, speeds) mean nothing: the model is tiny and has barely
trained. Unset (or anything but ``1``), nothing changes.
"""

import os

__all__ = ["quick", "shrink", "BATCHES_PER_EPOCH", "HELD_OUT", "CAPS"]

#: The batches of each epoch a quick run trains on.
BATCHES_PER_EPOCH = 2
#: The held-out sentences a quick run translates and scores.
HELD_OUT = 40

#: The largest value of each flag (by its name in the script's arguments) in a quick run.
CAPS = {
    # the model's sizes (an attention head of 8 numbers, one layer of each kind)
    "embedding_size": 16, "num_layers": 1, "num_encoder_layers": 1, "num_decoder_layers": 1,
    "num_atten_heads": 2, "kv_heads": 1, "feed_forward_size": 64, "qkv_size": 16,
    "width": 32, "layers": 1, "heads": 2, "ffn": 64, "vocab": 300,
    "batch_size": 32, "num_warmup_steps": 20, "warmup_steps": 20,
    # steps and minutes of training, measuring and generating
    "steps": 20, "max_steps": 20, "pretrain_steps": 10, "finetune_steps": 20,
    "minutes": 0.02, "max_minutes": 0.02, "pretrain_minutes": 0.01, "short_minutes": 0.02,
    "repeats": 1, "iters": 2, "batches": 1, "new": 4, "new_tokens": 4, "max_new_tokens": 5,
    "prompt": 4, "members": 2, "seeds": 1,
    # how much data is read, made or scored
    "pairs": 300, "num_train": 64, "num_test": 32, "images": 64, "shapes": 64,
    "per_class": 10, "sentences": 50,
    "dev_sentences": 50, "held_out": 50, "test_rows": 50, "texts": 50, "samples": 4,
}

#: A flag given in minutes or in steps (``--every``): at most a tenth of its run's budget.
PER_BUDGET = {"every": ("steps", "minutes")}


def quick():
    """Whether this run is a quick one (``DLSTUDIO_QUICK=1``)."""
    return os.environ.get("DLSTUDIO_QUICK") == "1"


def shrink(args):
    """``args`` (an argparse namespace) shrunk to `CAPS` in a quick run; as it was otherwise."""
    if not quick():
        return args
    for name, cap in CAPS.items():
        value = getattr(args, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > cap:
            setattr(args, name, type(value)(cap))
    heads, kv = getattr(args, "num_atten_heads", None), getattr(args, "kv_heads", None)
    if isinstance(heads, int) and isinstance(kv, int) and heads % kv:
        args.kv_heads = 1
    for name, budgets in PER_BUDGET.items():
        value = getattr(args, name, None)
        budget = next((getattr(args, b) for b in budgets
                       if isinstance(getattr(args, b, None), (int, float))), None)
        if isinstance(value, (int, float)) and budget and value > budget / 10:
            setattr(args, name, type(value)(budget / 10) or 1)
    return args
