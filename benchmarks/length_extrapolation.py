#!/usr/bin/env python3
"""Does a model read texts longer than those it was trained on? The same GPT and the same
translation model with each kind of positions (learned, sinusoidal, rotary, relative,
ALiBi), each trained for the same minutes on short texts only, then scored on longer ones.

    python benchmarks/length_extrapolation.py --archive data/en_es_xformer_8_90000.tar.gz \\
        --results docs/results/length.json                        # about twenty minutes

The GPT: the Spanish sentences of the archive's training split, consecutive ones joined into
texts of at most N words (--words), BPE pieces; its perplexity per piece on texts cut from
the held-out split's sentences joined end to end, of exactly N, 2N and 4N words. Every GPT
is built with a max_seq_length that admits 4N words, so that nothing but its positions
stands in the way; learned positions past what training reached are vectors never trained,
so their rows beyond N say "n/a".

The translation model (pre-LN, the PreLN script's): trained on the training pairs whose two
sentences have at most --short words, scored (BLEU, greedy) on the held-out pairs whose
Spanish has at least --long words, and on the held-out pairs as short as its training ones.
Learned positions: "n/a" on the long ones, for the same reason.

Runs alone on the machine (each model trains for a time budget).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from DLStudio import DLStudio, TransformerGPT, TransformerPreLN  # noqa: E402
from DLStudio.cli.common import archive_or_usage  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE, split_pairs  # noqa: E402
from DLStudio.data.vocabulary import TranslationData  # noqa: E402
from DLStudio.evaluation.decode_and_score import evaluate_bleu  # noqa: E402
from DLStudio.evaluation.generation import perplexity  # noqa: E402
from DLStudio.quick import shrink  # noqa: E402

POSITIONS = ("learned", "sinusoidal", "rope", "relative", "alibi")


def bare(sentence):
    """A sentence without the archive's SOS and EOS markers."""
    return " ".join(w for w in sentence.split() if w not in ("SOS", "EOS"))


def texts_of(sentences, words, exact=False):
    """Consecutive sentences joined into texts of at most ``words`` words (``exact``: the
    sentences joined end to end and cut every ``words`` words)."""
    if exact:
        stream = " ".join(sentences).split()
        return [" ".join(stream[i:i + words])
                for i in range(0, len(stream) - words + 1, words)]
    texts, now = [], []
    for sentence in sentences:
        n = len(sentence.split())
        if now and sum(len(s.split()) for s in now) + n > words:
            texts.append(" ".join(now))
            now = []
        if n <= words:
            now.append(sentence)
    return texts + ([" ".join(now)] if now else [])


def gpt_rows(args, train, held, dls_of):
    """Each positions' GPT: perplexity per piece on held-out texts of N, 2N and 4N words."""
    N, rows = args.words, []
    tests = {k: texts_of(held, k * N, exact=True)[:args.texts] for k in (1, 2, 4)}
    room = 4 * N * 4 + 2              # 4N words in pieces (4 a word at most), SOS and EOS
    for positions in args.positions:
        gpt = TransformerGPT(dl_studio=dls_of(), sentences=texts_of(train, N),
                             tokenizer="bpe", vocab_size=args.vocab_size, max_seq_length=room,
                             positions=positions, embedding_size=args.embedding_size,
                             num_basic_decoders=args.num_layers,
                             num_atten_heads=args.num_atten_heads, save_checkpoints=False)
        start = time.time()
        trainer = gpt.run_code_for_training(None, max_minutes=args.minutes,
                                            max_steps=args.max_steps)
        row = {"model": "GPT", "positions": positions, "trained_words": N,
               "steps": trainer.step, "minutes": round((time.time() - start) / 60, 1)}
        for k, texts in tests.items():
            scored = perplexity(gpt.eval(), texts, max_seq_length=room)
            row[f"perplexity_{k}x"] = None if positions == "learned" and k > 1 else \
                round(scored["per_piece"], 2)
        rows.append(row)
        print(f"GPT {positions}: {row}")
    return rows


def translation_rows(args, corpus, dls_of):
    """Each positions' translation model: BLEU on short and on long held-out pairs."""
    def words(s):
        return len(bare(s).split())
    train, held = split_pairs(corpus.pairs)
    short = [p for p in train if max(words(p[0]), words(p[1])) <= args.short]
    tests = {"short": [p for p in held if max(words(p[0]), words(p[1])) <= args.short],
             "long": [p for p in held if words(p[1]) >= args.long]}
    rows = []
    for positions in args.positions:
        data = TranslationData(corpus, split=(short, held), tokenizer="word")
        x = TransformerPreLN(dl_studio=dls_of(), data=data, positions=positions,
                             embedding_size=args.embedding_size, save_checkpoints=False)
        enc = x.MasterEncoder(x.dl_studio, x, args.num_layers, args.num_atten_heads)
        dec = x.MasterDecoderWithMasking(x.dl_studio, x, args.num_layers, args.num_atten_heads)
        start = time.time()
        trainer = x.run_code_for_training(x.dl_studio, enc, dec, None,
                                          max_minutes=args.minutes, max_steps=args.max_steps)
        model = x.model_from(enc, dec).eval()
        row = {"model": "translation (PreLN)", "positions": positions,
               "trained_words": args.short, "steps": trainer.step,
               "minutes": round((time.time() - start) / 60, 1)}
        for name, pairs in tests.items():
            row[f"bleu_{name}"] = None if positions == "learned" and name == "long" else \
                round(evaluate_bleu(model, x.vocab, pairs[:args.texts])["bleu"], 2)
        row["pairs"] = {name: min(len(p), args.texts) for name, p in tests.items()}
        rows.append(row)
        print(f"translation {positions}: {row}")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--archive", default=BUNDLED_ARCHIVE, help="a DLStudio archive "
                   "(default: the bundled corpus)")
    p.add_argument("--positions", default=",".join(POSITIONS),
                   help="which, comma-separated (default: all five)")
    p.add_argument("--minutes", type=float, default=1.5,
                   help="each model's training budget (default: %(default)s)")
    p.add_argument("--max-steps", type=int, default=None, help="instead (the tests' tiny runs)")
    p.add_argument("--words", type=int, default=16,
                   help="N: the GPT's training texts have at most N words (default: %(default)s)")
    p.add_argument("--short", type=int, default=5,
                   help="the translation model's training pairs: at most this many words a "
                        "side (default: %(default)s)")
    p.add_argument("--long", type=int, default=7,
                   help="its long held-out pairs: at least this many Spanish words "
                        "(default: %(default)s)")
    p.add_argument("--texts", type=int, default=400,
                   help="held-out texts (and pairs) scored of each kind (default: %(default)s)")
    p.add_argument("--embedding-size", type=int, default=128)
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--num-atten-heads", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=2000, help="the GPT's BPE pieces")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add the rows to a result file (docs/results/length.json)")
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes
    args.positions = args.positions.split(",")
    bad = sorted(set(args.positions) - set(POSITIONS))
    sizes = ("words", "short", "long", "texts", "embedding_size", "num_layers",
             "num_atten_heads", "vocab_size", "batch_size")
    if bad or min(getattr(args, n) for n in sizes) < 1 or args.minutes <= 0 or (
            args.max_steps is not None and args.max_steps < 1):
        p.error(f"--positions takes {', '.join(POSITIONS)}" if bad else
                "--" + ", --".join(n.replace("_", "-") for n in sizes) + " and --max-steps "
                "must be at least 1, --minutes above 0")
    corpus = archive_or_usage(p, args.archive)
    print(f"machine: {machine()}")
    train, held = split_pairs(corpus.pairs)

    def dls_of():
        return DLStudio(use_gpu=False, seed=0, batch_size=args.batch_size,
                        learning_rate=5e-4, epochs=1000)
    rows = gpt_rows(args, [bare(es) for _, es in train], [bare(es) for _, es in held], dls_of)
    rows += translation_rows(args, corpus, dls_of)
    print_tables(rows, args)
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        command = as_typed("benchmarks/length_extrapolation.py",
                           sys.argv[1:] if argv is None else argv)
        for row in rows:
            record(args.results, row, command)
        print(f"rows added to {args.results}")
    return 0


def shown(value):
    return "n/a" if value is None else f"{value:.2f}"


def print_tables(rows, args):
    N = args.words
    print(f"\nGPT trained on texts of at most {N} words: perplexity per piece on held-out "
          "texts of")
    print(f"| positions | {N} words | {2 * N} words | {4 * N} words | steps |")
    print("|---|---|---|---|---|")
    for r in rows:
        if r["model"] == "GPT":
            print(f"| {r['positions']} | {shown(r['perplexity_1x'])} | "
                  f"{shown(r['perplexity_2x'])} | {shown(r['perplexity_4x'])} | {r['steps']} |")
    print(f"\nTranslation trained on pairs of at most {args.short} words: held-out BLEU on")
    print(f"| positions | pairs of at most {args.short} words | Spanish of {args.long} words "
          "or more | steps |")
    print("|---|---|---|---|")
    for r in rows:
        if r["model"] != "GPT":
            print(f"| {r['positions']} | {shown(r['bleu_short'])} | {shown(r['bleu_long'])} | "
                  f"{r['steps']} |")


if __name__ == "__main__":
    sys.exit(main())
