"""What the example scripts do, written once: argument parsing, training, checkpoint tests,
translation. Each script in ExamplesTransformers/ is a few lines that call one of these.

Every function takes ``argv`` and returns an exit code; bad arguments give a usage message
(argparse), and expected failures (a missing archive, a bad checkpoint, an unknown word)
give one line that says what to do, never a traceback.
"""

import argparse
import logging
import os
import sys

from .checkpoints import CheckpointError, checkpoint_path, list_checkpoints
from .datasets import BUNDLED_ARCHIVE, ArchiveError, load_archive
from .DLStudio import DLStudio
from .training import TrainingDiverged, TrainingInterrupted
from .Transformers import TransformerBase, TransformerFG, TransformerPreLN

__all__ = ["train_main", "test_checkpoint_main", "translate_main", "load_checkpoint_or_exit",
           "LECTURE"]

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


_positive_int = _number(int, 1, strict=False)
_positive_float = _number(float, 0.0, strict=True)
_nonnegative_float = _number(float, 0.0, strict=False)


def _run(fn, argv):
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return fn(argv)
    except (UserError, ArchiveError, CheckpointError, FileNotFoundError, FileExistsError,
            TrainingDiverged, TrainingInterrupted, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


# ---------------------------------------------------------------------------------------
def _missing_archive_message(path):
    return (f"no archive at {path}.\n"
            "  - The lecture's archive en_es_xformer_8_90000.tar.gz comes with DLStudio's data "
            "(put it in ./data/), or build one from Tatoeba's spa-eng file:\n"
            "      python -m DLStudio.datasets build-archive spa.txt -o "
            "data/en_es_xformer_8_90000.tar.gz\n"
            f"  - or train on the bundled corpus: --archive {BUNDLED_ARCHIVE}")


def _resolve_archive(path):
    if os.path.isfile(path):
        return path
    if sys.stdin is not None and sys.stdin.isatty():
        print(_missing_archive_message(path))
        answer = input("Use the bundled corpus instead? [y/N] ").strip().lower()
        if answer in ("y", "yes"):
            return BUNDLED_ARCHIVE
    raise UserError(_missing_archive_message(path))


def training_parser(variant):
    p = argparse.ArgumentParser(
        description=f"Train Transformer{variant} for English-to-Spanish translation. With no "
                    "arguments: the lecture's configuration.")
    L = LECTURE
    p.add_argument("--archive", default=L["archive"],
                   help="DLStudio archive (default: %(default)s)")
    p.add_argument("--epochs", type=_positive_int, default=L["epochs"])
    p.add_argument("--batch-size", type=_positive_int, default=L["batch_size"])
    p.add_argument("--embedding-size", type=_positive_int, default=L["embedding_size"])
    p.add_argument("--num-layers", type=_positive_int, default=L["num_layers"],
                   help="basic encoders and basic decoders (each)")
    p.add_argument("--num-atten-heads", type=_positive_int, default=L["num_atten_heads"])
    p.add_argument("--max-seq-length", type=_positive_int, default=L["max_seq_length"])
    p.add_argument("--num-warmup-steps", type=_positive_int, default=L["num_warmup_steps"],
                   help="FG's warm-up")
    p.add_argument("--lr-mul", type=_positive_float, default=L["lr_mul"],
                   help="FG: scales the warm-up schedule")
    p.add_argument("--learning-rate", type=_positive_float, default=L["learning_rate"],
                   help="PreLN: Adam's constant rate")
    p.add_argument("--dropout", type=_nonnegative_float, default=0.0)
    p.add_argument("--label-smoothing", type=_nonnegative_float, default=0.0)
    p.add_argument("--checkpoint-freq", type=_positive_int, default=5)
    p.add_argument("--checkpoints-dir", default=f"checkpoints_with_masking_{variant}")
    p.add_argument("--max-minutes", type=_positive_float, default=None,
                   help="stop after this much training (a checkpoint is written)")
    p.add_argument("--overwrite", action="store_true",
                   help="reuse a checkpoints directory that holds checkpoints")
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in --checkpoints-dir")
    p.add_argument("--track-bleu", action="store_true",
                   help="score the held-out split at every checkpoint (plotted with the loss)")
    p.add_argument("--full-width-heads", action="store_true",
                   help="heads read the whole embedding, with an output projection W^O")
    p.add_argument("--tie-embeddings", action="store_true",
                   help="the output layer shares the Spanish embedding matrix")
    p.add_argument("--learned-positions", action="store_true",
                   help="trained position vectors instead of sinusoids")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true", help="do not use a GPU even when present")
    p.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation")
    return p


def train_main(variant, argv=None):
    """``seq2seq_with_transformer{FG,PreLN}.py``: train, checkpoint, evaluate."""
    def run(argv):
        args = training_parser(variant).parse_args(argv)
        archive = _resolve_archive(args.archive)
        cls = _VARIANTS[variant]
        dls = DLStudio(dataroot=os.path.dirname(archive) or ".",
                       path_saved_model=os.path.join(args.checkpoints_dir, f"saved_{variant}.pt"),
                       learning_rate=args.learning_rate, batch_size=args.batch_size,
                       epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
        xformer = cls(dl_studio=dls, data_archive=archive, max_seq_length=args.max_seq_length,
                      embedding_size=args.embedding_size, num_warmup_steps=args.num_warmup_steps,
                      lr_mul=args.lr_mul, checkpoint_freq=args.checkpoint_freq,
                      dropout=args.dropout, label_smoothing=args.label_smoothing,
                      full_width_heads=args.full_width_heads,
                      tie_embeddings=args.tie_embeddings,
                      learned_positions=args.learned_positions)
        encoder = cls.MasterEncoder(dls, xformer, num_basic_encoders=args.num_layers,
                                    num_atten_heads=args.num_atten_heads)
        decoder = cls.MasterDecoderWithMasking(dls, xformer, num_basic_decoders=args.num_layers,
                                               num_atten_heads=args.num_atten_heads)
        n_params = sum(p.numel() for p in xformer.EncoderDecoder(xformer, encoder, decoder)
                       .parameters())
        print(f"Transformer{variant} on {archive}: {len(xformer.training_corpus)} training "
              f"pairs, {len(xformer.held_out_corpus)} held out; vocabularies "
              f"{xformer.vocab_en_size} / {xformer.vocab_es_size}; {n_params:,} parameters; "
              f"device {dls.device}")
        xformer.run_code_for_training(dls, encoder, decoder, display_train_loss=True,
                                      checkpoints_dir=args.checkpoints_dir,
                                      max_minutes=args.max_minutes, overwrite=args.overwrite,
                                      resume=args.resume, track_bleu=args.track_bleu)
        if not args.no_eval:
            xformer.run_code_for_evaluating(encoder, decoder, show=10,
                                            result_file=os.path.join(args.checkpoints_dir,
                                                                     "held_out_translations.txt"))
        return 0
    return _run(run, argv)


# ---------------------------------------------------------------------------------------
def _load(checkpoints_dir, index, archive=None):
    path = checkpoint_path(checkpoints_dir, index)
    if not os.path.isdir(checkpoints_dir):
        raise UserError(f"no directory {checkpoints_dir}: train first, e.g. "
                        "python3 seq2seq_with_transformerFG.py")
    if not os.path.isfile(path):
        have = list_checkpoints(checkpoints_dir)
        raise UserError(f"no checkpoint {index} in {checkpoints_dir}; it has "
                        f"{have or 'none'}")
    corpus = load_archive(archive) if archive else None
    return TransformerBase.from_checkpoint(path, corpus=corpus)


def load_checkpoint_or_exit(checkpoints_dir, index, archive=None):
    """``(xformer, model)`` from ``checkpoints_dir/checkpoint_<index>.pt``, or a one-line
    message and exit code 1 (for scripts)."""
    try:
        return _load(checkpoints_dir, index, archive)
    except (UserError, ArchiveError, CheckpointError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def test_checkpoint_main(variant, argv=None):
    """``test_checkpoint{FG,PreLN}.py DIR N``: held-out translations and BLEU."""
    def run(argv):
        p = argparse.ArgumentParser(description="Translate held-out sentences with a "
                                                "checkpoint and score it with BLEU.")
        p.add_argument("checkpoints_dir")
        p.add_argument("checkpoint_index", type=int)
        p.add_argument("--archive", help="the archive it was trained on, if it has moved")
        p.add_argument("--beam", type=_positive_int, default=1, help="beam width (1: greedy)")
        p.add_argument("--show", type=int, default=20, help="translations to print")
        p.add_argument("--result-file", help="write every held-out translation here")
        args = p.parse_args(argv)
        xformer, model = _load(args.checkpoints_dir, args.checkpoint_index, args.archive)
        if variant and xformer.variant != variant:
            log.warning("note: this is a Transformer%s checkpoint", xformer.variant)
        if not xformer.held_out_corpus:
            raise UserError("the archive this checkpoint was trained on is not where it was: "
                            "give it with --archive")
        print(f"Transformer{xformer.variant} checkpoint {args.checkpoint_index} "
              f"({len(xformer.held_out_corpus)} held-out pairs, beam {args.beam}):\n")
        xformer.run_code_for_evaluating(model.encoder, model.decoder,
                                        result_file=args.result_file, beam_width=args.beam,
                                        checkpoint=None, show=args.show, model=model)
        return 0
    return _run(run, argv)


def translate_main(argv=None):
    """``translate_sentence.py DIR N "sentence"`` (or ``-`` for standard input)."""
    def run(argv):
        p = argparse.ArgumentParser(description="Translate English with any checkpoint.")
        p.add_argument("checkpoints_dir")
        p.add_argument("checkpoint_index", type=int)
        p.add_argument("sentence", help='an English sentence, or "-" to read one per line '
                                        "from standard input")
        p.add_argument("--beam", type=_positive_int, default=1)
        args = p.parse_args(argv)
        xformer, model = _load(args.checkpoints_dir, args.checkpoint_index)
        if args.sentence != "-":
            print(xformer.translate(model, [args.sentence], args.beam)[0])
            return 0
        lines = [line.rstrip("\n") for line in sys.stdin]
        status, prepared = 0, []
        for line in lines:      # check every line first; a bad one gets its message
            try:
                prepared.append(xformer.prepare_sentence(line) if line.strip() else None)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                prepared.append(None)
                status = 1
        todo = [words for words in prepared if words]
        done = iter(xformer.translate(model, todo, args.beam)) if todo else iter(())
        for words in prepared:  # one translation per input line, in order
            print(next(done) if words else "")
        return status
    return _run(run, argv)
