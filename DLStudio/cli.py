"""What the example scripts do, written once: argument parsing, training, checkpoint tests,
translation. Each script in ExamplesTransformers/ is a few lines that call one of these.

Every function takes ``argv`` and returns an exit code; bad arguments give a usage message
(argparse), and expected failures (a missing archive, a bad checkpoint, an unknown word)
give one line that says what to do, never a traceback.
"""

import argparse
import contextlib
import difflib
import importlib
import logging
import os
import runpy
import shutil
import sys

from .checkpoints import CheckpointError, find_checkpoint, init_from_gpt, load_checkpoint
from .datasets import BUNDLED_ARCHIVE, ArchiveError, ImageDataError, load_archive, load_corpus
from .distributed import (
    DistributedError,
    launched_by_torchrun,
    lost_a_peer,
    rank_from_env,
    single_process_only,
)
from .distributed import leave as leave_process_group
from .DLStudio import DLStudio
from .install_check import ADVICE as KAK_ADVICE
from .install_check import shares_files_with_kak
from .overrides import OverrideError, import_class
from .precision import PRECISIONS
from .training import TrainingDiverged, TrainingInterrupted
from .Transformers import TransformerBase, TransformerFG, TransformerPreLN

__all__ = ["train_main", "test_checkpoint_main", "translate_main", "load_checkpoint_or_exit",
           "positive_int", "positive_float", "nonnegative_float", "nonnegative_int",
           "existing_file", "archive_or_usage", "add_checkpoint_arguments", "add_run_arguments",
           "add_stack_arguments", "add_decoding_precision",
           "checkpoint_arguments",
           "vit_train_main", "vit_test_checkpoint_main", "homework_main", "LECTURE",
           "VIT_DEFAULTS", "HOMEWORK", "demo_main", "how_to_run", "COMMANDS", "copy_examples",
           "main"]

log = logging.getLogger("DLStudio")

#: The lecture's configuration: what the scripts do when run with no arguments.
LECTURE = {"archive": "./data/en_es_xformer_8_90000.tar.gz", "embedding_size": 256,
           "num_layers": 4, "num_atten_heads": 4, "batch_size": 50, "epochs": 40,
           "num_warmup_steps": 4000, "max_seq_length": 10, "learning_rate": 1e-5,
           "lr_mul": 1.0}

_VARIANTS = {"FG": TransformerFG, "PreLN": TransformerPreLN}


class UserError(Exception):
    """A failure the user can fix; printed as one line, exit code 1."""


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


def _run(fn, argv):
    """Run a script's job: its expected failures print one line (exit 1). Under torchrun
    only rank 0 prints and logs; another rank prints its errors only, marked with its rank."""
    rank = rank_from_env()
    logging.basicConfig(level=logging.WARNING if rank else logging.INFO, format="%(message)s")
    try:
        with open(os.devnull, "w") as quiet, \
                contextlib.redirect_stdout(quiet if rank else sys.stdout):
            return fn(argv)
    except (UserError, ArchiveError, ImageDataError, CheckpointError, FileNotFoundError,
            FileExistsError, TrainingDiverged, TrainingInterrupted, OverrideError,
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
_launcher = None


def how_to_run(script):
    """The command that runs ``script`` (its name, without .py) the way this process was
    started: ``python3 script.py`` from ExamplesTransformers/, ``dlstudio script`` or
    ``python -m DLStudio.examples.script`` in an installed copy."""
    if _launcher:
        return f"{_launcher} {script}"
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name.startswith("DLStudio.examples."):
        return f"python -m DLStudio.examples.{script}"
    return f"python3 {script}.py"


# ---------------------------------------------------------------------------------------
def _missing_archive_message(path):
    return (f"no archive at {path}.\n"
            "  - The lecture's archive en_es_xformer_8_90000.tar.gz comes with DLStudio's data "
            "(put it in ./data/), or build one from Tatoeba's spa-eng file:\n"
            "      python -m DLStudio.datasets build-archive spa.txt -o "
            "data/en_es_xformer_8_90000.tar.gz\n"
            f"  - or train on the bundled corpus: --archive bundled ({BUNDLED_ARCHIVE})")


def _archive_named(path):
    """``--archive``'s file: ``bundled`` names the bundled corpus, wherever this copy of the
    package keeps it."""
    return BUNDLED_ARCHIVE if path == "bundled" else path


def _resolve_archive(path):
    """The archive file ``--archive`` names (`_archive_named`); if it is missing, a question
    at a terminal (train on the bundled corpus?), else UserError saying what to do."""
    path = _archive_named(path)
    if os.path.isfile(path):
        return path
    if sys.stdin is not None and sys.stdin.isatty() and not launched_by_torchrun():
        print(_missing_archive_message(path))
        answer = input("Use the bundled corpus instead? [y/N] ").strip().lower()
        if answer in ("y", "yes"):
            return BUNDLED_ARCHIVE
    raise UserError(_missing_archive_message(path))


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
    p.add_argument(f"--track-{score}", action="store_true",
                   help=f"{what} at every checkpoint (plotted with the loss)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true", help="do not use a GPU even when present")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="number format of the forward pass: fp32, bf16 (autocast), fp16 "
                        "(CUDA, with a gradient scaler), auto (bf16 where the hardware has "
                        "it). See the README's measurements.")
    p.add_argument("--compile", action="store_true",
                   help="train through torch.compile (compiles during the first steps; see "
                        "the README for whether it pays on your machine)")


def add_decoding_precision(parser):
    """``--precision`` of translation (greedy or beam decoding)."""
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="number format of decoding: fp32, bf16 (autocast), fp16 (CUDA), "
                             "auto (bf16 where the hardware has it). See the README's "
                             "measurements.")


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


def training_parser(variant):
    p = argparse.ArgumentParser(
        description=f"Train Transformer{variant} for English-to-Spanish translation. With no "
                    "arguments: the lecture's configuration.")
    L = LECTURE
    data = p.add_mutually_exclusive_group()
    data.add_argument("--archive", default=L["archive"],
                      help="DLStudio archive (default: %(default)s; 'bundled': the corpus "
                           "that comes with the package)")
    data.add_argument("--pairs", metavar="FILE.tsv", type=existing_file,
                      help="your own sentence pairs instead of an archive: one "
                           "'English<TAB>Spanish' line each (Tatoeba/Anki files as they are), "
                           "curated as build-archive does")
    p.add_argument("--max-words", type=positive_int, default=None,
                   help="--pairs: keep pairs of at most this many words a side (default: "
                        "--max-seq-length minus 2)")
    p.add_argument("--epochs", type=positive_int, default=L["epochs"])
    p.add_argument("--batch-size", type=positive_int, default=L["batch_size"])
    p.add_argument("--embedding-size", type=positive_int, default=L["embedding_size"])
    p.add_argument("--num-layers", type=positive_int, default=L["num_layers"],
                   help="basic encoders and basic decoders (each)")
    p.add_argument("--num-atten-heads", type=positive_int, default=L["num_atten_heads"])
    p.add_argument("--max-seq-length", type=positive_int, default=L["max_seq_length"],
                   help="tokens per sentence, SOS and EOS included (with BPE: pieces; it "
                        "grows to fit the longest training sentence)")
    p.add_argument("--tokenizer", choices=("word", "bpe"), default="word",
                   help="word: DLStudio's word vocabularies; bpe: byte-level subword pieces "
                        "learnt from the training split (any English sentence translates)")
    p.add_argument("--vocab-size", type=positive_int, default=8000,
                   help="BPE: pieces per language (default: %(default)s)")
    p.add_argument("--vocab-from", choices=("archive", "training"), default="archive",
                   help="word level: the archive's vocabularies (DLStudio's) or the words of "
                        "the training split only")
    p.add_argument("--num-warmup-steps", type=positive_int, default=L["num_warmup_steps"],
                   help="FG's warm-up")
    p.add_argument("--lr-mul", type=positive_float, default=L["lr_mul"],
                   help="FG: scales the warm-up schedule")
    p.add_argument("--learning-rate", type=positive_float, default=L["learning_rate"],
                   help="PreLN: Adam's constant rate")
    p.add_argument("--dropout", type=nonnegative_float, default=0.0)
    p.add_argument("--label-smoothing", type=nonnegative_float, default=0.0)
    add_run_arguments(p, f"checkpoints_with_masking_{variant}", "bleu",
                      "BLEU on the held-out split")
    p.add_argument("--full-width-heads", action="store_true",
                   help="heads read the whole embedding, with an output projection W^O")
    p.add_argument("--tie-embeddings", action="store_true",
                   help="the output layer shares the Spanish embedding matrix")
    p.add_argument("--learned-positions", action="store_true",
                   help="trained position vectors instead of sinusoids")
    p.add_argument("--init-decoder-from", nargs="+", metavar=("DIR", "N"),
                   help="start the decoder from a GPT checkpoint (train_gpt.py; N: an "
                        "epoch or 'last', the default): its Spanish tokenizer, embeddings, "
                        "self-attention and feed-forward layers, output layer")
    p.add_argument("--init-encoder-from", nargs="+", metavar=("DIR", "N"),
                   help="start the encoder from a GPT checkpoint trained on English")
    p.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation")
    _model_class_flag(p, f"train this subclass of Transformer{variant} (homework)")
    return p


def _longest(vocab):
    n = getattr(vocab, "longest_training_sentence", None)
    return "" if n is None or vocab.kind == "word" else \
        f" (the longest training sentence is {n}; twice that, for words never seen)"


def _gpt_checkpoints(args):
    """``--init-decoder-from`` / ``--init-encoder-from DIR [N]``: side -> (path, payload)."""
    found = {}
    for side, given in (("decoder", args.init_decoder_from),
                        ("encoder", args.init_encoder_from)):
        if given:
            if len(given) > 2:
                raise UserError(f"--init-{side}-from takes DIR and at most one N, not "
                                f"{' '.join(given)}")
            path = find_checkpoint(given[0], given[1] if len(given) > 1 else None,
                                   how_to_run("train_gpt"))
            found[side] = (path, load_checkpoint(path))
    return found


def _data_for_gpts(gpts, archive, args, pairs_options=None):
    """When a GPT starts a stack: the corpus, read once as the container reads it, its
    pairs file's settings, and the translation vocabulary: the GPT's tokenizer for its
    language (its embeddings are of those tokens), the other language's as --tokenizer
    says, learnt from the training split the container makes. Without a GPT: (None,
    pairs_options, None), and the container reads the data itself."""
    if not gpts:
        return None, pairs_options, None
    from .datasets import split_pairs
    from .vocabulary import build_vocabulary, read_corpus, tokenizer_from_state
    given = {}
    for side, (path, payload) in gpts.items():
        if payload.get("variant") != "GPT":
            raise UserError(f"{path} holds a {payload.get('variant')} model, not a GPT "
                            "(train one with train_gpt.py)")
        given["es" if side == "decoder" else "en"] = tokenizer_from_state(
            payload["tokenizer_state"])
    corpus, pairs_options = read_corpus(archive, args.max_seq_length, args.tokenizer,
                                        pairs_options)
    vocab = build_vocabulary(corpus, split_pairs(corpus.pairs)[0], args.tokenizer,
                             args.vocab_size, args.vocab_from, args.max_seq_length, given)
    return corpus, pairs_options, vocab


def _say_how_to_test(script, trainer, model_class=None):
    """The end of a run: the exact command that tests the model it ended with."""
    if trainer.last_checkpoint:
        flag = f" --model-class {model_class}" if model_class else ""
        print(f"\nTest the model this run ended with:\n  {how_to_run(script)} "
              f"{trainer.last_checkpoint}{flag}")


def _model_class_flag(parser, what):
    parser.add_argument("--model-class", metavar="MODULE:CLASS",
                        help=f"{what}, e.g. homework_my_attention_head:"
                             "TransformerFGWithTemperature (its module must be importable "
                             "from the current folder)")


def _subclass_of(path, base):
    """The class named by ``--model-class``, which must be a subclass of ``base``."""
    cls = import_class(path)
    if not issubclass(cls, base):
        raise UserError(f"--model-class {path} is not a subclass of {base.__name__}")
    return cls


def train_main(variant, argv=None):
    """``seq2seq_with_transformer{FG,PreLN}.py``: train, checkpoint, evaluate."""
    def run(argv):
        args = training_parser(variant).parse_args(argv)
        if args.max_words and not args.pairs:
            raise UserError("--max-words goes with --pairs (an archive is curated already)")
        archive = args.pairs or _resolve_archive(args.archive)
        pairs_options = None
        if args.pairs:
            pairs_options = {"max_words": args.max_words or args.max_seq_length - 2}
        cls = _VARIANTS[variant]
        if args.model_class:
            cls = _subclass_of(args.model_class, cls)
        dls = DLStudio(dataroot=os.path.dirname(archive) or ".",
                       path_saved_model=os.path.join(args.checkpoints_dir, f"saved_{variant}.pt"),
                       learning_rate=args.learning_rate, batch_size=args.batch_size,
                       epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
        gpts = _gpt_checkpoints(args)
        corpus, pairs_options, vocab = _data_for_gpts(gpts, archive, args, pairs_options)
        xformer = cls(dl_studio=dls, data_archive=archive, corpus=corpus,
                      max_seq_length=args.max_seq_length,
                      embedding_size=args.embedding_size, num_warmup_steps=args.num_warmup_steps,
                      lr_mul=args.lr_mul, checkpoint_freq=args.checkpoint_freq,
                      dropout=args.dropout, label_smoothing=args.label_smoothing,
                      full_width_heads=args.full_width_heads,
                      tie_embeddings=args.tie_embeddings,
                      learned_positions=args.learned_positions, tokenizer=args.tokenizer,
                      vocab_size=args.vocab_size if args.tokenizer == "bpe" else None,
                      vocab_from=args.vocab_from, pairs_options=pairs_options, vocab=vocab)
        encoder = cls.MasterEncoder(dls, xformer, num_basic_encoders=args.num_layers,
                                    num_atten_heads=args.num_atten_heads)
        decoder = cls.MasterDecoderWithMasking(dls, xformer, num_basic_decoders=args.num_layers,
                                               num_atten_heads=args.num_atten_heads)
        for side, (path, payload) in gpts.items():
            stack = decoder if side == "decoder" else encoder
            n = init_from_gpt(xformer, stack, payload, side)
            print(f"the {side} starts from the GPT {path}: {n:,} of its numbers copied")
        n_params = sum(p.numel() for p in xformer.EncoderDecoder(xformer, encoder, decoder)
                       .parameters())
        print(f"{cls.__name__} on {archive}: {len(xformer.training_corpus)} training "
              f"pairs, {len(xformer.held_out_corpus)} held out; vocabularies "
              f"{xformer.vocab_en_size} / {xformer.vocab_es_size} "
              f"{'words' if args.tokenizer == 'word' else 'BPE pieces'}; max_seq_length "
              f"{xformer.max_seq_length} {xformer.vocab.unit}{_longest(xformer.vocab)}; "
              f"{n_params:,} parameters; "
              f"device {dls.device}")
        trainer = xformer.run_code_for_training(
            dls, encoder, decoder, display_train_loss=True, checkpoints_dir=args.checkpoints_dir,
            max_minutes=args.max_minutes, max_steps=args.max_steps, overwrite=args.overwrite,
            resume=args.resume, track_bleu=args.track_bleu,
            precision=args.precision, compile=args.compile)
        if not dls.world.is_main:           # torchrun: rank 0 evaluates
            return 0
        if not args.no_eval:
            xformer.run_code_for_evaluating(encoder, decoder, show=10,
                                            result_file=os.path.join(args.checkpoints_dir,
                                                                     "held_out_translations.txt"))
        _say_how_to_test(f"test_checkpoint{variant}", trainer, args.model_class)
        return 0
    return _run(run, argv)


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


def _load(path, archive=None, model_class=None):
    corpus = None
    if archive:     # a pairs file is curated again with the settings the checkpoint keeps
        options = load_checkpoint(path).get("container_args", {}).get("pairs_options")
        corpus = load_corpus(_archive_named(archive), pairs_options=options)
    return TransformerBase.from_checkpoint(path, corpus=corpus, model_class=model_class)


def load_checkpoint_or_exit(checkpoints_dir, index=None, archive=None, model_class=None):
    """``(xformer, model)`` from checkpoint N ("last" by default) of ``checkpoints_dir``, or
    from one checkpoint file (a student's container class: ``model_class``,
    "module:Class"); or a one-line message and exit code 1 (for scripts)."""
    try:
        return _load(find_checkpoint(checkpoints_dir, index), archive, model_class)
    except (UserError, ArchiveError, CheckpointError, FileNotFoundError, OverrideError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def test_checkpoint_main(variant, argv=None):
    """``test_checkpoint{FG,PreLN}.py DIR N`` (or ``DIR last``, ``FILE.pt``): held-out
    translations and BLEU."""
    def run(argv):
        p = argparse.ArgumentParser(description="Translate held-out sentences with a "
                                                "checkpoint and score it with BLEU.")
        add_checkpoint_arguments(p)
        p.add_argument("--archive", help="the archive (or --pairs file) it was trained on, "
                                         "if it has moved")
        p.add_argument("--beam", type=positive_int, default=1, help="beam width (1: greedy)")
        p.add_argument("--show", type=int, default=20, help="translations to print")
        p.add_argument("--result-file", help="write every held-out translation here")
        add_decoding_precision(p)
        _model_class_flag(p, "the container class the checkpoint was trained with, when it "
                             "is a subclass of your own")
        args = p.parse_args(argv)
        path = checkpoint_arguments(p, args)
        xformer, model = _load(path, args.archive, args.model_class)
        if variant and xformer.variant != variant:
            log.warning("note: this is a Transformer%s checkpoint", xformer.variant)
        if not xformer.held_out_corpus:
            raise UserError("the archive this checkpoint was trained on is not where it was: "
                            "give it with --archive")
        print(f"Transformer{xformer.variant} checkpoint {path} "
              f"({len(xformer.held_out_corpus)} held-out pairs, beam {args.beam}):\n")
        xformer.run_code_for_evaluating(model.encoder, model.decoder,
                                        result_file=args.result_file, beam_width=args.beam,
                                        checkpoint=None, show=args.show, model=model,
                                        precision=args.precision)
        return 0
    return _run(run, argv)


def translate_main(argv=None):
    """``translate_sentence.py DIR N "sentence"`` (or ``FILE.pt "sentence"``; ``-`` reads
    standard input)."""
    def run(argv):
        p = argparse.ArgumentParser(description="Translate English with any checkpoint.")
        add_checkpoint_arguments(p, sentence=True)
        p.add_argument("--beam", type=positive_int, default=1)
        add_decoding_precision(p)
        _model_class_flag(p, "the container class the checkpoint was trained with, when it "
                             "is a subclass of your own")
        args = p.parse_args(argv)
        path, sentence = checkpoint_arguments(p, args, sentence=True)
        xformer, model = _load(path, model_class=args.model_class)
        if sentence != "-":
            print(xformer.translate(model, [sentence], args.beam, args.precision)[0])
            return 0
        lines = [line.rstrip("\n") for line in sys.stdin]
        status, prepared = 0, []
        for line in lines:      # check every line first; a bad one gets its message
            try:
                prepared.append(xformer.vocab.prepare(line) if line.strip() else None)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                prepared.append(None)
                status = 1
        todo = [words for words in prepared if words]
        done = iter(xformer.translate(model, todo, args.beam, args.precision)) if todo \
            else iter(())
        for words in prepared:  # one translation per input line, in order
            print(next(done) if words else "")
        return status
    return _run(run, argv)


# ---------------------------------------------------------------------------------------
# Homework: a subclass that changes one nested class, trained beside the unmodified model.
#: The homework scripts' sizes: small enough for a few minutes on a laptop CPU.
HOMEWORK = {"epochs": 3, "batch_size": 64, "embedding_size": 128, "num_layers": 2,
            "num_atten_heads": 4, "num_warmup_steps": 400}


def homework_main(homework_class, argv=None, report=None):
    """``homework_*.py``: train the standard container and ``homework_class`` the same way
    on the same data, print what each measured, then ``report(row)`` of the homework's.
    (``homework_class`` subclasses TransformerFG or TransformerPreLN.)"""
    from .experiments import compare_containers, format_comparison
    from .overrides import class_path

    def run(argv):
        single_process_only(f"homework script for {homework_class.__name__}")
        h = HOMEWORK
        p = argparse.ArgumentParser(description=f"Train {homework_class.__name__} beside "
                                                "the unmodified model and compare them.")
        p.add_argument("--archive", default=BUNDLED_ARCHIVE)
        p.add_argument("--epochs", type=positive_int, default=h["epochs"])
        p.add_argument("--max-steps", type=positive_int, default=None)
        for name in ("batch_size", "embedding_size", "num_layers", "num_atten_heads",
                     "num_warmup_steps"):
            p.add_argument("--" + name.replace("_", "-"), type=positive_int, default=h[name])
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--out", default="homework_run", help="folder for the checkpoints")
        p.add_argument("--cpu", action="store_true")
        args = p.parse_args(argv)
        base = TransformerPreLN if issubclass(homework_class, TransformerPreLN) else TransformerFG
        settings = {k: v for k, v in vars(args).items() if k not in ("archive", "out", "cpu")}
        rows = compare_containers([base, homework_class], _resolve_archive(args.archive),
                                  args.out, use_gpu=not args.cpu, **settings)
        print(f"\nThe same data, seed, sizes and {rows[0]['steps']} steps for each; held-out "
              "BLEU with greedy decoding:\n" + format_comparison(rows))
        if report:
            report(rows[1])
        if args.max_steps is None:         # whole epochs: checkpoint_<last epoch>.pt exists
            print(f"\nScore its checkpoint again (or translate_sentence with the same "
                  f"flag):\n  {how_to_run(f'test_checkpoint{base.variant}')} "
                  f"{rows[1]['checkpoints_dir']} {rows[1]['last_epoch']} "
                  f"--model-class {class_path(homework_class)}")
        return 0
    return _run(run, argv)


# ---------------------------------------------------------------------------------------
# The visTransformer's scripts.
#: The default image classifier: reaches 90% on the shapes' test images in minutes on a CPU.
VIT_DEFAULTS = {"patch_size": 8, "embedding_size": 64, "num_layers": 4, "num_atten_heads": 4,
                "batch_size": 64, "epochs": 10, "learning_rate": 1e-3, "num_train": 50_000,
                "num_test": 2_000}


def vit_parser():
    d = VIT_DEFAULTS
    p = argparse.ArgumentParser(
        description="Train a visTransformer to classify images: our own shapes (default, no "
                    "download), CIFAR-10, or your own pictures (--image-folder).")
    p.add_argument("--dataset", choices=("shapes", "cifar10"), default="shapes")
    p.add_argument("--image-folder", metavar="DIR",
                   help="your own pictures instead: one sub-folder per class (or DIR/train "
                        "and DIR/test with those sub-folders), resized to --image-size")
    p.add_argument("--image-size", type=positive_int, default=32,
                   help="--image-folder: pictures are resized to this many pixels a side")
    p.add_argument("--test-fraction", type=positive_float, default=0.2,
                   help="--image-folder without train/ and test/: the share of each class held "
                        "out for testing")
    p.add_argument("--dataroot", default="./data/CIFAR-10/",
                   help="CIFAR-10: the folder that holds (or gets) cifar-10-batches-py")
    p.add_argument("--download", action="store_true", help="CIFAR-10: download it first")
    p.add_argument("--num-train", type=positive_int, default=d["num_train"],
                   help="shapes: training images to generate")
    p.add_argument("--num-test", type=positive_int, default=d["num_test"],
                   help="shapes: test images to generate")
    p.add_argument("--patch-size", type=positive_int, default=d["patch_size"])
    add_stack_arguments(p, d, "basic encoders")
    p.add_argument("--epochs", type=positive_int, default=d["epochs"])
    p.add_argument("--batch-size", type=positive_int, default=d["batch_size"])
    p.add_argument("--learning-rate", type=positive_float, default=d["learning_rate"])
    p.add_argument("--dropout", type=nonnegative_float, default=0.0)
    p.add_argument("--label-smoothing", type=nonnegative_float, default=0.0)
    p.add_argument("--augment", action="store_true", help="random shifts and flips")
    add_run_arguments(p, "checkpoints_visTrans", "accuracy", "test accuracy")
    return p


def _load_images(vit, dataset, args):
    if dataset == "shapes":
        vit.load_shapes_dataset(args.num_train, args.num_test, seed=args.seed)
    else:
        vit.load_cifar_10_dataset(download=args.download)


def vit_train_main(argv=None):
    """``image_recog_with_visTransformer.py``: train, checkpoint, evaluate."""
    from .datasets.images import CIFAR10_CLASSES, SHAPE_CLASSES, folder_classes
    from .Transformers import visTransformer

    def run(argv):
        args = vit_parser().parse_args(argv)
        classes = SHAPE_CLASSES if args.dataset == "shapes" else CIFAR10_CLASSES
        if args.image_folder:
            classes = folder_classes(args.image_folder)
        elif args.image_size != 32:
            raise UserError("--image-size goes with --image-folder (shapes and CIFAR-10 are 32x32)")
        size = (args.image_size, args.image_size)
        dls = DLStudio(dataroot=args.dataroot, image_size=size, classes=classes,
                       path_saved_model=os.path.join(args.checkpoints_dir, "saved_vit.pt"),
                       learning_rate=args.learning_rate, batch_size=args.batch_size,
                       epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
        vit = visTransformer(dl_studio=dls, patch_size=(args.patch_size, args.patch_size),
                             embedding_size=args.embedding_size,
                             num_basic_encoders=args.num_layers,
                             num_atten_heads=args.num_atten_heads, layout=args.layout,
                             num_warmup_steps=args.num_warmup_steps, dropout=args.dropout,
                             label_smoothing=args.label_smoothing, augment=args.augment,
                             checkpoint_freq=args.checkpoint_freq)
        if args.image_folder:
            if not 0 < args.test_fraction < 1:
                raise UserError(f"--test-fraction must lie between 0 and 1, not "
                                f"{args.test_fraction}")
            vit.load_image_folder(args.image_folder, args.test_fraction, seed=args.seed)
        else:
            _load_images(vit, args.dataset, args)
        n_params = sum(p.numel() for p in vit.parameters())
        print(f"visTransformer ({args.layout}) on {vit.training_set.name}: "
              f"{len(vit.training_set)} training and {len(vit.test_set)} test images, "
              f"{vit.max_seq_length - 1} patches of {args.patch_size}x{args.patch_size}; "
              f"{n_params:,} parameters; device {dls.device}")
        trainer = vit.run_code_for_training_visTransformer(
            dls, vit, display_train_loss=True, checkpoints_dir=args.checkpoints_dir,
            max_minutes=args.max_minutes, max_steps=args.max_steps, overwrite=args.overwrite,
            resume=args.resume, track_accuracy=args.track_accuracy,
            precision=args.precision, compile=args.compile)
        if not dls.world.is_main:           # torchrun: rank 0 evaluates
            return 0
        vit.run_code_for_evaluating_visTransformer(
            confusion_png=os.path.join(args.checkpoints_dir, "confusion_matrix.png"))
        print(f"wrote {args.checkpoints_dir}/confusion_matrix.png and train_loss.png")
        _say_how_to_test("test_checkpoint_for_visTransformer", trainer)
        return 0
    return _run(run, argv)


def vit_test_checkpoint_main(argv=None):
    """``test_checkpoint_for_visTransformer.py DIR N``: accuracy, confusion matrix, a grid
    of labelled test images and the class token's attention."""
    from .Transformers import visTransformer
    from .visualize import plot_class_token_attention, plot_image_grid

    def run(argv):
        p = argparse.ArgumentParser(description="Score a visTransformer checkpoint on its "
                                                "test images and show what it sees.")
        add_checkpoint_arguments(p)
        p.add_argument("--dataroot", help="CIFAR-10 or --image-folder: where it is now, if it "
                                          "has moved")
        p.add_argument("--images", type=positive_int, default=16,
                       help="test images in the grid (and a quarter of them, at most 6, in "
                            "the attention picture)")
        p.add_argument("--out", help="folder for the pictures (default: the checkpoints')")
        _model_class_flag(p, "the visTransformer subclass the checkpoint was trained with")
        args = p.parse_args(argv)
        path = checkpoint_arguments(p, args)
        label = os.path.basename(path)[len("checkpoint_"):-len(".pt")]     # "9", "9_partial"
        vit, payload = visTransformer.from_checkpoint(path, model_class=args.model_class)
        spec = dict(payload.get("dataset") or {})
        if args.dataroot:
            spec["dataroot"] = args.dataroot
        vit.load_dataset_of(spec)
        out = args.out or os.path.dirname(path)
        print(f"visTransformer checkpoint {path} (epoch "
              f"{payload['epoch'] + 1}, step {payload['step']}):")
        result = vit.run_code_for_evaluating_visTransformer(
            confusion_png=os.path.join(out, f"confusion_matrix_{label}.png"))
        test = vit.test_set
        n = min(args.images, len(test))
        predicted = vit.predict(test.images[:n])
        grid = plot_image_grid(test.images[:n], test.labels[:n], predicted, vit.classes,
                               os.path.join(out, f"test_images_{label}.png"),
                               f"checkpoint {label}: predicted (true)")
        k = max(1, min(6, n // 4))
        device = next(vit.parameters()).device
        maps = [m.cpu() for m in vit.attention_maps(test.images[:k].float().div(255)
                                                    .to(device))]
        H, W = vit.image_size
        P_h, P_w = vit.patch_size
        attention = plot_class_token_attention(
            test.images[:k], maps, (H // P_h, W // P_w),
            os.path.join(out, f"class_token_attention_{label}.png"),
            "where the class token looks (mean over heads)")
        print(f"accuracy {result['accuracy']:.2f}%; wrote {grid}, {attention} and the "
              "confusion matrix")
        return 0
    return _run(run, argv)


# ---------------------------------------------------------------------------------------
# make demo: a few minutes of training on the bundled corpus, then translation and BLEU.
DEMO_SENTENCES = ["I will visit my grandmother tomorrow.", "Did the boys eat the red apples?",
                  "She is not tired today.", "We went to the beach last week."]


def demo_main(argv=None):
    """``demo.py`` (``make demo``): train TransformerFG on the bundled corpus, score it on the
    held-out split and translate sentences of our own."""
    import time

    from .checkpoints import checkpoint_path, list_checkpoints

    p = argparse.ArgumentParser(description="Train TransformerFG on the bundled corpus for a "
                                            "few minutes, then translate sentences it has "
                                            "never seen and score them with BLEU.")
    p.add_argument("--epochs", type=positive_int, default=10)
    p.add_argument("--out", default="demo_run")
    p.add_argument("--archive", default=BUNDLED_ARCHIVE)
    p.add_argument("--embedding-size", type=positive_int, default=128)
    p.add_argument("--num-layers", type=positive_int, default=2)
    args = p.parse_args(argv)
    ckpt_dir = os.path.join(args.out, "checkpoints_FG")
    start = time.time()
    print(f"== Training TransformerFG on the bundled corpus ({args.archive})")
    status = train_main("FG", ["--archive", args.archive, "--epochs", str(args.epochs),
                               "--embedding-size", str(args.embedding_size),
                               "--num-layers", str(args.num_layers),
                               "--batch-size", "64", "--num-warmup-steps", "400",
                               "--checkpoints-dir", ckpt_dir, "--overwrite", "--no-eval"])
    if status:
        return status
    last = list_checkpoints(ckpt_dir)[-1]
    print(f"\n== Training took {time.time() - start:.0f} s. Checkpoints: "
          f"{list_checkpoints(ckpt_dir)}; loss curve: {ckpt_dir}/train_loss.png")
    print(f"\n== {how_to_run('test_checkpointFG')} {ckpt_dir} {last}")
    status = test_checkpoint_main("FG", [ckpt_dir, str(last), "--show", "12"])
    if status:
        return status
    print(f"\n== Sentences of our own ({how_to_run('translate_sentence')} {ckpt_dir} {last} "
          '"..."):')
    xformer, model = TransformerBase.from_checkpoint(checkpoint_path(ckpt_dir, last))
    for english in DEMO_SENTENCES:
        try:
            spanish = xformer.translate(model, [english])[0]
        except ValueError as e:      # another archive may not know every word of ours
            spanish = f"(not translated: {e})"
        print(f"  {english:40s} -> {spanish}")
    print(f"\n== Demo finished in {time.time() - start:.0f} s")
    return 0


# ---------------------------------------------------------------------------------------
# One command for every script: `dlstudio SCRIPT ARGS` (or `python -m DLStudio SCRIPT ARGS`)
# runs what `python3 SCRIPT.py ARGS` runs in ExamplesTransformers/: the same function.
def _job(module, function, *args):
    """A script's job: ``DLStudio.<module>.<function>(*args, argv)``, imported when it runs."""
    def job(argv):
        return getattr(importlib.import_module(f"DLStudio.{module}"), function)(*args, argv)
    return job


def _example(script):
    """A script that is its own lesson (a homework's subclass): run the module
    ``DLStudio.examples.<script>`` as ``__main__``."""
    def job(argv):          # `main` has put argv in sys.argv, where the module reads it
        try:
            runpy.run_module(f"DLStudio.examples.{script}", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return 0
    return job


#: script (its name in ExamplesTransformers/, without .py) -> (its job, what it does).
COMMANDS = {
    "demo": (_job("cli", "demo_main"), "train FG on the bundled corpus, translate, score"),
    "seq2seq_with_transformerFG": (_job("cli", "train_main", "FG"),
                                   "train TransformerFG (post-LN, warm-up) to translate"),
    "seq2seq_with_transformerPreLN": (_job("cli", "train_main", "PreLN"),
                                      "train TransformerPreLN (pre-LN) to translate"),
    "test_checkpointFG": (_job("cli", "test_checkpoint_main", "FG"),
                          "translate the held-out split with a checkpoint; BLEU"),
    "test_checkpointPreLN": (_job("cli", "test_checkpoint_main", "PreLN"),
                             "the same for a PreLN checkpoint"),
    "translate_sentence": (_job("cli", "translate_main"), "translate your own English"),
    "score_checkpoints": (_job("cli_show", "score_checkpoints_main"),
                          "BLEU of every checkpoint in a folder; divergence flagged"),
    "show_attention": (_job("cli_show", "show_attention_main"),
                       "attention maps of every layer and head for one sentence"),
    "show_positional_encoding": (_job("cli_show", "show_positional_encoding_main"),
                                 "the sinusoidal position code as a picture"),
    "show_lr_schedule": (_job("cli_show", "show_lr_schedule_main"),
                         "FG's warm-up schedule as a picture"),
    "compare_fg_preln": (_job("cli_show", "compare_fg_preln_main"),
                         "FG, FG without warm-up and PreLN for the same budget"),
    "image_recog_with_visTransformer": (_job("cli", "vit_train_main"),
                                        "train a visTransformer to classify images"),
    "test_checkpoint_for_visTransformer": (_job("cli", "vit_test_checkpoint_main"),
                                           "accuracy, confusion matrix, attention of a "
                                           "visTransformer checkpoint"),
    "train_gpt": (_job("cli_gpt", "gpt_train_main"), "train TransformerGPT, a language model"),
    "interact_with_prompts": (_job("cli_gpt", "prompts_main"),
                              "continue your prompts with a GPT checkpoint"),
    "pretraining_experiment": (_job("cli_gpt", "pretraining_main"),
                               "pre-train a GPT, then fine-tune a translator"),
    "bug_museum": (_job("museum", "main"), "real Transformer bugs trained beside the "
                                           "correct model"),
    "homework_my_attention_head": (_example("homework_my_attention_head"),
                                   "homework: a head with a learned temperature"),
    "homework_gated_feedforward": (_example("homework_gated_feedforward"),
                                   "homework: a gated (GEGLU) feed-forward block"),
    "homework_concat_positions": (_example("homework_concat_positions"),
                                  "homework: the position code concatenated"),
}


def _usage(prog):
    width = max(map(len, COMMANDS)) + 2
    return "\n".join(
        [f"usage: {prog} SCRIPT [ARGS]   (SCRIPT [ARGS] as in python3 SCRIPT.py ARGS)", "",
         "The example scripts of DLStudio Transformers, from an installed copy:", ""]
        + [f"  {name:<{width}}{what}" for name, (_, what) in COMMANDS.items()]
        + ["", f"  {'examples DIR':<{width}}copy the example scripts to DIR, to read and change",
           "", f"{prog} SCRIPT --help lists a script's flags. Each script is also a module: "
               "python -m DLStudio.examples.SCRIPT ARGS"])


def copy_examples(folder):
    """Copy the example scripts and their README into ``folder`` (a new folder, or one that
    holds none of them: nothing is overwritten). Returns the names copied."""
    from . import examples
    sources = {}
    for where in examples.__path__:
        for name in sorted(os.listdir(where)):
            if (name.endswith(".py") and name != "__init__.py") or name == "README.md":
                sources.setdefault(name, os.path.join(where, name))
    if not sources:
        raise UserError("this copy of DLStudio has no example scripts (a clone keeps them in "
                        "ExamplesTransformers/)")
    clash = sorted(n for n in sources if os.path.exists(os.path.join(folder, n)))
    if clash:
        raise UserError(f"{folder} already holds {', '.join(clash)}: give a new folder "
                        "(nothing was copied)")
    os.makedirs(folder, exist_ok=True)
    for name, source in sources.items():
        shutil.copyfile(source, os.path.join(folder, name))
    return sorted(sources)


def main(argv=None, prog="dlstudio"):
    """``dlstudio SCRIPT ARGS``: run an example script's job; ``dlstudio`` lists them."""
    global _launcher
    argv = sys.argv[1:] if argv is None else list(argv)
    shared = shares_files_with_kak(os.path.dirname(os.path.abspath(__file__)))
    if shared:
        print(f"error: {shared}. {KAK_ADVICE}.", file=sys.stderr)
        return 1
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage(prog))
        return 0 if argv else 2
    name = argv[0][:-3] if argv[0].endswith(".py") else argv[0]
    if name == "examples":
        if len(argv) != 2:
            print(f"usage: {prog} examples DIR", file=sys.stderr)
            return 2

        def copy(_):
            names = copy_examples(argv[1])
            print(f"copied {len(names)} files to {argv[1]}: run them there with python3 "
                  "SCRIPT.py (the installed package is what they import)")
            return 0
        return _run(copy, [])
    if name not in COMMANDS:
        near = difflib.get_close_matches(name, COMMANDS, n=3)
        print(f"{prog}: no script {argv[0]!r}" + (f"; did you mean {' or '.join(near)}?"
                                                   if near else f"; `{prog}` lists them"),
              file=sys.stderr)
        return 2
    job = COMMANDS[name][0]
    _launcher, saved = prog, sys.argv
    sys.argv = [f"{prog} {name}", *argv[1:]]        # argparse's usage says this command
    try:
        return job(argv[1:])
    finally:
        _launcher, sys.argv = None, saved
