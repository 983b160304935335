"""``python -m DLStudio.data``: inspect, build and generate DLStudio archives.

    python -m DLStudio.data inspect ARCHIVE
    python -m DLStudio.data build-archive spa.txt [-o OUT.tar.gz]
        [--max-words 8] [--pairs 90000] [--seed 0]    (OUT: data/en_es_xformer_8_90000.tar.gz)
    python -m DLStudio.data synth -o OUT.tar.gz [--pairs 20000] [--seed 0]
    python -m DLStudio.data tasks {tense,negation,question,translation} [ARCHIVE] -o DIR
"""

import argparse
import collections
import logging
import os
import random
import sys

from ..quick import shrink
from . import (
    ArchiveError,
    curate_pairs,
    generate_corpus,
    load_archive,
    read_tsv_pairs,
    save_archive,
)


def _inspect(args):
    corpus = load_archive(args.archive)
    pairs = corpus.pairs
    print(f"archive:           {args.archive}")
    print(f"sentence pairs:    {len(pairs)}")
    print(f"distinct English:  {len({en for en, _ in pairs})}")
    print(f"vocabulary sizes:  English {len(corpus.vocab_en)}, Spanish {len(corpus.vocab_es)}"
          " (SOS and EOS included)")
    print("words per sentence (SOS/EOS excluded):   English  Spanish")
    en_len = collections.Counter(len(en.split()) - 2 for en, _ in pairs)
    es_len = collections.Counter(len(es.split()) - 2 for _, es in pairs)
    for n in range(min(en_len | es_len), max(en_len | es_len) + 1):
        print(f"  {n:2d} words {en_len[n]:>35d} {es_len[n]:>8d}")
    print("sample pairs:")
    for en, es in random.Random(args.seed).sample(pairs, min(args.samples, len(pairs))):
        print(f"  {en}\n    -> {es}")


def _keep_previous(path):
    """An archive already at ``path`` moves to ``previous/`` beside it (NAME-1 ... when one
    is there too): writing a new one never loses the old."""
    if not os.path.lexists(path):
        return
    folder = os.path.join(os.path.dirname(path) or ".", "previous")
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(path)
    suffix = ".tar.gz" if name.endswith(".tar.gz") else ""
    target, n = os.path.join(folder, name), 0
    while os.path.lexists(target):
        n += 1
        target = os.path.join(folder, f"{name[:len(name) - len(suffix)]}-{n}{suffix}")
    os.replace(path, target)
    print(f"{path} was there: it moved to {target}")


def _build(args):
    if not os.path.isfile(args.tsv):
        raise FileNotFoundError(f"no file at {args.tsv}; download spa-eng.zip from "
                                "https://www.manythings.org/anki/ (Tatoeba's sentences) and "
                                "unzip it: the file is spa.txt")
    corpus = curate_pairs(read_tsv_pairs(args.tsv), max_words=args.max_words,
                          num_pairs=args.pairs, seed=args.seed)
    if args.output is None:
        args.output = os.path.join("data", f"en_es_xformer_{args.max_words}_{args.pairs}.tar.gz")
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    _keep_previous(args.output)
    save_archive(corpus, args.output)
    print(f"wrote {args.output}: {len(corpus.pairs)} pairs, vocabularies "
          f"{len(corpus.vocab_en)} / {len(corpus.vocab_es)}")


def _synth(args):
    corpus = generate_corpus(args.pairs, args.seed)
    _keep_previous(args.output)
    save_archive(corpus, args.output)
    print(f"wrote {args.output}: {len(corpus.pairs)} pairs, vocabularies "
          f"{len(corpus.vocab_en)} / {len(corpus.vocab_es)}")


def _tasks(args):
    from .tasks import write_task
    archive = args.archive
    if archive in (None, "bundled"):
        from . import BUNDLED_ARCHIVE
        archive = BUNDLED_ARCHIVE
    counts = write_task(load_archive(archive), args.task, args.output, args.seed,
                        args.synthetic_seed)
    print(f"wrote {args.task} rows of {archive} to {args.output}: " + ", ".join(
        f"{name}.tsv {n}" for name, n in counts.items()) + " (test rows: the held-out split)")


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def main(argv=None):
    shows = {"formatter_class": argparse.ArgumentDefaultsHelpFormatter,   # --help: defaults
             "allow_abbrev": False}                        # flags as written, never shortened
    parser = argparse.ArgumentParser(prog="python -m DLStudio.data",
                                     description="Inspect, build and generate DLStudio "
                                                 "English-Spanish archives.", **shows)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="validate an archive and print what it holds", **shows)
    p.add_argument("archive")
    p.add_argument("--samples", type=_positive, default=5, help="pairs to print")
    p.add_argument("--seed", type=int, default=0, help="which pairs are printed")
    p.set_defaults(run=_inspect)
    p = sub.add_parser("build-archive", help="curate a Tatoeba/Anki TSV file into an archive",
                       **shows)
    p.add_argument("tsv", help="the unzipped file, e.g. spa.txt of manythings.org/anki's "
                               "spa-eng.zip")
    p.add_argument("-o", "--output", default=None,
                   help="the archive to write (default: data/en_es_xformer_W_N.tar.gz, W "
                        "--max-words and N --pairs: the folder the scripts look in)")
    p.add_argument("--max-words", type=_positive, default=8, help="longest sentence kept")
    p.add_argument("--pairs", type=_positive, default=90000, help="pairs kept at most")
    p.add_argument("--seed", type=int, default=0, help="which pairs are kept")
    p.set_defaults(run=_build)
    p = sub.add_parser("synth", help="generate the project's synthetic corpus", **shows)
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--pairs", type=_positive, default=20000, help="pairs to generate")
    p.add_argument("--seed", type=int, default=0, help="of the generator")
    p.set_defaults(run=_synth)
    p = sub.add_parser("tasks", help="labelled rows for fine-tuning a BERT (train.tsv, "
                                     "dev.tsv, test.tsv)", **shows)
    p.add_argument("task", choices=("tense", "negation", "question", "translation"),
                   help="tense, negation, question: the bundled corpus's English labelled by "
                        "its generator; translation: English and Spanish, yes when one "
                        "translates the other (any archive)")
    p.add_argument("archive", nargs="?", default="bundled",
                   help="the archive, or bundled: the bundled corpus")
    p.add_argument("-o", "--output", required=True, help="the folder to write the files to")
    p.add_argument("--seed", type=int, default=0, help="of the dev split and the negatives")
    p.add_argument("--synthetic-seed", type=int, default=0,
                   help="tense, negation, question on a synthetic archive of your own: the "
                        "--seed its synth command was given (the bundled corpus's: 0)")
    p.set_defaults(run=_tasks)
    args = shrink(parser.parse_args(argv))       # DLSTUDIO_QUICK=1: fewer pairs
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        args.run(args)
    except (ArchiveError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
