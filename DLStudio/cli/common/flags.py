"""The flags the scripts share, with their one default each: the lecture's configuration and
the measured recipes, argparse's parser (whose --help gives each default) and types, and the
groups of flags a training, translating or checkpoint-reading script adds."""

import argparse
import os

from ...checkpoints import WEIGHTS
from ...containers.settings import TranslationSettings
from ...model.switches import FEED_FORWARDS, NORMS, POSITIONS
from ...quick import shrink
from ...runtime.precision import PRECISIONS
from ...runtime.studio import DLStudio
from ...training.schedule import SCHEDULES
from .jobs import UserError

__all__ = ["LECTURE", "RECIPES", "Parser", "positive_int", "nonnegative_int", "positive_float",
           "nonnegative_float", "positive_ints", "existing_file", "add_run_arguments",
           "DEFAULT_BEAM", "DEFAULT_WEIGHTS", "add_beam_argument", "add_weights_argument",
           "add_decoding_precision", "add_stack_arguments", "add_checkpoint_arguments",
           "model_class_flag", "add_since_2017_arguments", "since_2017",
           "add_since_2023_arguments", "since_2023"]


#: The lecture's configuration: what the scripts do when run with no arguments.
#: The container's and DLStudio's own defaults are the lecture's: taken from where they are
#: written (the settings description, the configuration object), not written again here.
LECTURE = {"archive": "./data/en_es_xformer_8_90000.tar.gz", "num_layers": 4,
           "num_atten_heads": 4,
           **{name: TranslationSettings.default(name) for name in (
               "embedding_size", "num_warmup_steps", "max_seq_length", "lr_mul")},
           **{name: DLStudio.default(name) for name in ("batch_size", "epochs",
                                                          "learning_rate")}}

#: ``--recipe NAME`` of the translation training scripts: defaults for their flags (by
#: argparse name), which a flag given beside it still overrides. "today30" is the 30-minute
#: recipe of docs/results.md (the lecture's sizes, BPE pieces; PreLN at a constant 5e-4);
#: benchmarks/recipe_sweep.py measures each change from it. "fast30" adds what the sweep
#: found to help: averaged weights and a beam (no training change beat the seed-to-seed
#: difference; docs/results.md). ``also_score``: the held-out decodings printed after the
#: greedy one, as (weights, beam width, length penalty); ``variant``: the one script that
#: runs the recipe, where only one does.
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
    # today's parts in place of the 2017 model's (docs/since_2017.md): pre-LN at a constant
    # 1e-3 (twice today30's rate) and no dropout (benchmarks/recipe_sweep.py's modern30-nodrop
    # row: a budget this short shows each sentence a few times), RMSNorm, rotary positions,
    # SwiGLU, one key/value head for the four query heads; averaged and decoded as chosen on
    # the development split. A pre-LN recipe ("variant"): seq2seq_with_transformerPreLN.py's.
    # Label smoothing stays: without it (modern30-nols) 10 minutes scored higher, 30 lower.
    "modern30": {**TODAY30, "variant": "PreLN", "learning_rate": 1e-3, "dropout": 0.0,
                 "ema": 0.998,
                 "norm": "rmsnorm", "positions": "rope", "feed_forward": "swiglu",
                 "full_width_heads": True, "kv_heads": 1,
                 "also_score": [("average", 1, 0.6), ("average", 4, 1.0)]},
}


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose ``--help`` gives each flag's default (a switch's, or a
    value's that is unset until given, goes without saying), and which takes flags as
    written only: no abbreviation (``--member 2`` is not ``--members 2``)."""

    def __init__(self, *args, allow_abbrev=False, **kwargs):
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        """The flags as given, shrunk in a quick run (``DLSTUDIO_QUICK=1``: DLStudio/quick.py)."""
        parsed, rest = super().parse_known_args(args, namespace)
        return shrink(parsed), rest

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



def existing_file(text):
    """An argparse type: a file that exists (an archive, a checkpoint)."""
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"no file {text}")
    return text



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
                        "1/sqrt(step); PreLN keeps --learning-rate), budget (the same peak, "
                        "then down to zero when --max-minutes or --max-steps ends, counted "
                        "over the whole run, resumes included) or cooldown (the peak kept, "
                        "down to zero over the budget's last fifth)")
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



def add_since_2017_arguments(parser, feed_forward="relu", positions="sinusoidal",
                             full_width=False):
    """The changes since 2017 as switches of the same classes (model/since_2017.py):
    ``--norm``, ``--positions``, ``--feed-forward`` and ``--kv-heads`` (``feed_forward``,
    ``positions``: the model's defaults; ``full_width``: add ``--full-width-heads``, which
    ``--kv-heads`` needs, where the script has none)."""
    p = parser
    p.add_argument("--norm", choices=NORMS, default="layernorm",
                   help="rmsnorm: RMSNorm for every LayerNorm (Zhang and Sennrich 2019); "
                        "rmsnorm_plus_one: Gemma's, its gain 1 + g")
    p.add_argument("--positions", choices=POSITIONS, default=positions,
                   help="the position code: sinusoidal (2017), learned, rope (rotary: "
                        "queries and keys turned by position, Su et al. 2021), relative "
                        "(Transformer-XL's terms of the offset in each score) or alibi (a "
                        "per-head penalty by distance, Press et al. 2022)")
    p.add_argument("--feed-forward", choices=FEED_FORWARDS, default=feed_forward,
                   help="the feed-forward network: relu (2017), gelu (BERT, GPT), "
                        "swiglu (gated, Shazeer 2020; the same number of weights) or geglu "
                        "(GELU-gated, Gemma's)")
    p.add_argument("--kv-heads", type=positive_int, default=None, metavar="G",
                   help="grouped-query attention: G key/value heads shared by the query "
                        "heads in groups (1: multi-query; default: one per head); needs "
                        "--full-width-heads")
    if full_width:
        p.add_argument("--full-width-heads", action="store_true",
                       help="heads read all of M, then W^O (default: the lecture's slices)")


def since_2017(args, positions=True):
    """The container keywords of `add_since_2017_arguments`' flags, after checking that they
    fit the model's heads (``positions``: False where the model has no such setting)."""
    H, kv = args.num_atten_heads, args.kv_heads
    if kv is not None and (H % kv or (kv != H and not args.full_width_heads)):
        raise UserError(f"--kv-heads {kv} does not fit --num-atten-heads {H}: G must divide "
                        "H" if H % kv else f"--kv-heads {kv} needs --full-width-heads: a "
                        "sliced head computes its keys from its own slice of each word, so "
                        "heads cannot share them (model/since_2017.py, grouped_heads)")
    if args.positions == "rope" and (args.embedding_size // H) % 2:
        raise UserError(f"--positions rope turns pairs of numbers: a head's width "
                        f"(--embedding-size / --num-atten-heads = {args.embedding_size // H})"
                        " must be even")
    chosen = {"norm": args.norm, "feed_forward": args.feed_forward, "kv_heads": kv}
    return {**chosen, "positions": args.positions} if positions else chosen


def add_since_2023_arguments(parser):
    """The changes since 2023 a GPT takes as switches (model/since_2023.py): ``--qk-norm``,
    ``--qk-norm-all-heads``, ``--window``, ``--window-layers``, ``--window-rope-base``,
    ``--nope-layers``, ``--norm-placement``, ``--score-scale``."""
    p = parser
    p.add_argument("--qk-norm", action="store_true",
                   help="each head's queries and keys RMS-normalised before the scores "
                        "(Qwen3, Gemma 3)")
    p.add_argument("--qk-norm-all-heads", action="store_true",
                   help="the queries and keys normalised over all heads at once (OLMo 2)")
    p.add_argument("--window", type=positive_int, default=None, metavar="W",
                   help="a sliding window: each token sees the last W tokens only, itself "
                        "included (Mistral; default: all before it)")
    p.add_argument("--window-layers", type=layer_list, default=None, metavar="I,J",
                   help="with --window: only these layers (from 0) slide, the others see "
                        "every earlier token (Gemma 3: five of every six slide)")
    p.add_argument("--window-rope-base", type=positive_float, default=None, metavar="B",
                   help="with --window and --positions rope: the sliding layers' rotary base "
                        "(Gemma 3: 10000 there, 1000000 on its full layers)")
    p.add_argument("--nope-layers", type=layer_list, default=(), metavar="I,J",
                   help="layers (from 0) without rotary positions, with --positions rope "
                        "(SmolLM3's NoPE layers)")
    p.add_argument("--norm-placement", choices=("output", "sandwich"), default=None,
                   help="norms on the sublayers' outputs: output, x + Norm(F(x)) (OLMo 2); "
                        "sandwich, x + Norm(F(Norm(x))) (Gemma 2, 3); pre-LN layouts only")
    p.add_argument("--score-scale", type=positive_float, default=None, metavar="C",
                   help="the attention scores q.k times C instead of 1/sqrt(s_qkv) (Gemma: "
                        "query_pre_attn_scalar ** -0.5)")


def layer_list(text):
    """``--nope-layers 3,7``: layer indices, comma-separated (an empty string: none)."""
    try:
        layers = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"layer indices, comma-separated (as 3,7), not "
                                         f"{text!r}") from None
    if any(i < 0 for i in layers):
        raise argparse.ArgumentTypeError(f"layer indices count from 0, not {text!r}")
    return layers


def since_2023(args):
    """The container keywords of `add_since_2023_arguments`' flags, checked against the
    model's layers and positions."""
    for flag, layers in (("--nope-layers", args.nope_layers),
                         ("--window-layers", args.window_layers or ())):
        outside = [i for i in layers if i >= args.num_layers]
        if outside:
            raise UserError(f"{flag} {','.join(map(str, outside))}: the model has "
                            f"{args.num_layers} layers (0 to {args.num_layers - 1})")
    for flag, given, needs in (("--nope-layers", args.nope_layers, args.positions == "rope"),
                               ("--window-rope-base", args.window_rope_base,
                                args.positions == "rope" and args.window),
                               ("--window-layers", args.window_layers is not None,
                                args.window)):
        if given and not needs:
            raise UserError(f"{flag} needs --window W" if flag == "--window-layers" else
                            f"{flag} changes rotary positions: it needs --positions rope"
                            + (" and --window W" if "window" in flag else ""))
    if args.norm_placement and args.layout != "PreLN":
        raise UserError(f"--norm-placement {args.norm_placement} adds norms to the pre-LN "
                        "layout: it needs --layout PreLN")
    if args.qk_norm and args.qk_norm_all_heads:
        raise UserError("--qk-norm normalises each head, --qk-norm-all-heads all heads at "
                        "once: give one of them")
    return {"qk_norm": "all_heads" if args.qk_norm_all_heads else args.qk_norm,
            "window": args.window, "nope_layers": args.nope_layers,
            "window_layers": args.window_layers, "window_rope_base": args.window_rope_base,
            "norm_placement": args.norm_placement, "score_scale": args.score_scale}


def add_checkpoint_arguments(parser, sentence=False, folder=False):
    """``DIR [N]`` or ``FILE.pt`` (then, with ``sentence``, the English sentence): N is an
    epoch index, whose checkpoint may be a partial one, or "last" (the default); ``folder``:
    a Hugging Face translation folder too (OPUS-MT), with no N."""
    parser.add_argument("checkpoint", metavar="DIR|FILE" + ("|FOLDER" if folder else ""),
                        help="a checkpoints directory, or one checkpoint file (.pt)" + (
                            "; or a Hugging Face translation model's folder (OPUS-MT: "
                            "docs/real_translation.md), given no N" if folder else ""))
    parser.add_argument("more", nargs="+" if sentence else "?", metavar=(
        "N SENTENCE" if sentence else "N"), help=("N: an epoch index or 'last' (not with a "
                                                  "FILE)" + ("; SENTENCE: English, or - to "
                                                             "read lines from standard input"
                                                             if sentence else "")))


def model_class_flag(parser, what,
                     example="homework_my_attention_head:TransformerFGWithTemperature"):
    """``--model-class MODULE:CLASS``; ``example``: one of the family the script trains."""
    parser.add_argument("--model-class", metavar="MODULE:CLASS",
                        help=f"{what}, e.g. {example} (its module importable from the "
                             "current folder), or FILE.py:CLASS")
