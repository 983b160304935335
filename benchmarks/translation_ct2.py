#!/usr/bin/env python3
"""Translation speed against CTranslate2, the fastest CPU engine for OPUS-MT's models: the
Marian folder of translation_speed.py (6 + 6 layers, width 512, 8 heads, F 2,048, 65,001
ids shared, random weights, SentencePiece models trained on the archive) read by ours into
TransformerFG and converted by CTranslate2's own converter (TransformersConverter). Both
translate the same held-out English sentences, greedy and with beam 4, in batches of 1 and
32, in fp32 and in int8 (ours: model.quantize("int8"), DLStudio/model/quantize.py;
CTranslate2: its int8 compute type, converted with int8 weights), each engine with all
threads. The rows say sentences a second and, in fp32, whether both wrote the same ids
(the words before the end: with random weights a sentence seldom ends before max_length,
where transformers' rules force </s> and CTranslate2 stops). The last line: CT2_RATIO,
ours over CTranslate2's sentences a second in fp32, beam 4, batch 32.

    python benchmarks/translation_ct2.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz
    python benchmarks/translation_ct2.py --archive ... --results docs/results/translation_ct2.json
    python benchmarks/translation_ct2.py --width 32 --layers 1 --heads 4 --ffn 64 \\
        --vocab 300 --sentences 4 --max-length 6 --repeats 1 --batch-sizes 1,2   # tiny

It needs transformers (to write and convert the folder) and ctranslate2 (the bench extra);
without them it says so and stops.
"""

import argparse
import functools
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from translation_speed import folder_arguments, folder_of, timed  # noqa: E402

from DLStudio.cli.common import archive_or_usage, positive_ints  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.quick import shrink  # noqa: E402


def before_end(rows, end=0):
    """Each row's ids up to (not with) its first end token (the words before the end:
    transformers' rules, ours, force </s> at max_length, where CTranslate2 stops)."""
    return [r[:r.index(end)] if end in r else list(r) for r in rows]


def ct2_translate(translator, tokens, batch_size, beams, rules, words):
    """CTranslate2's ids of each sentence (its tokens mapped back through the vocabulary)."""
    out = []
    for i in range(0, len(tokens), batch_size):
        results = translator.translate_batch(
            tokens[i:i + batch_size], beam_size=beams, max_batch_size=batch_size,
            max_decoding_length=rules.max_length - 1, length_penalty=rules.length_penalty)
        # (its converter takes <pad> out of a Marian vocabulary: never written, as
        # the folder's bad_words_ids has it)
        out += [[words[t] for t in r.hypotheses[0]] for r in results]
    return out


def compare(args, folder, english):
    """One row per (precision, decoding, batch): both engines' sentences a second."""
    import ctranslate2

    from DLStudio.evaluation.decode_and_score import translate_ids
    from DLStudio.runtime.studio import DLStudio
    from DLStudio.Transformers import TransformerFG
    threads = torch.get_num_threads()
    rows = []
    for precision in ("fp32", "int8"):
        converted = os.path.join(folder, f"ct2-{precision}")
        ctranslate2.converters.TransformersConverter(folder).convert(
            converted, quantization=None if precision == "fp32" else "int8", force=True)
        translator = ctranslate2.Translator(
            converted, device="cpu", compute_type="float32" if precision == "fp32" else "int8",
            inter_threads=1, intra_threads=threads)
        xformer, ours, _ = TransformerFG.from_huggingface(folder, DLStudio(use_gpu=False,
                                                                           seed=0))
        if precision == "int8":
            ours.quantize("int8")
        rules, vocab = xformer.generation_rules, xformer.vocab
        src = vocab.encode(english, "en")
        tokens, words = token_lists(folder, src, vocab.pad_id)
        for beams in args.beams:
            for batch in args.batch_sizes:
                t_ct2, out_ct2 = timed(functools.partial(
                    ct2_translate, translator, tokens, batch, beams, rules, words),
                    args.repeats)
                t_ours, out_ours = timed(functools.partial(
                    translate_ids, ours, src, rules.max_length, beams, batch,
                    length_penalty=rules.length_penalty, rules=rules), args.repeats)
                words_before = rules.max_length - 2       # (the last place: </s>, forced)
                a = [r[:words_before] for r in before_end(out_ours)]
                b = [r[:words_before] for r in before_end(out_ct2)]
                rows.append({
                    "precision": precision, "beams": beams, "batch_size": batch,
                    "sentences": len(english), "max_length": rules.max_length,
                    "threads": threads,
                    "ct2_sentences_per_second": round(len(english) / t_ct2, 2),
                    "ours_sentences_per_second": round(len(english) / t_ours, 2),
                    "ratio": round(t_ct2 / t_ours, 3),
                    "same_sentences": sum(x == y for x, y in zip(a, b)),
                    "ctranslate2": ctranslate2.__version__,
                    "sizes": {k: getattr(args, k) for k in ("width", "layers", "heads",
                                                            "ffn", "vocab")}})
    return rows


def token_lists(folder, src, pad):
    """The source sentences as CTranslate2 takes them: each id's piece (vocab.json), the
    padding left out; and the map from a piece back to its id."""
    with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
        ids = json.load(f)
    pieces = {i: w for w, i in ids.items()}
    return [[pieces[int(i)] for i in row if int(i) != pad] for row in src], ids


def parser():
    p = argparse.ArgumentParser(description="Translation with OPUS-MT's layout, ours against "
                                            "CTranslate2.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--batch-sizes", type=positive_ints, default=[1, 32])
    p.add_argument("--beams", type=positive_ints, default=[1, 4],
                   help="comma-separated beam widths (1: greedy)")
    folder_arguments(p)
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add the rows to a result file (docs/results/translation_ct2.json)")
    return p


def main(argv=None):
    p = parser()
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes
    corpus = archive_or_usage(p, args.archive)          # (a bad one is said first)
    try:
        import ctranslate2  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"translation_ct2.py needs transformers and ctranslate2 (pip install -e "
              f"'.[parity,bench]'; {e.name} is missing): nothing measured")
        return 0
    with folder_of(args, corpus) as (folder, english):
        rows = compare(args, folder, english)
    print(f"\n{machine()}; {len(english)} held-out sentences of {args.archive}, max_length "
          f"{args.max_length}; a Marian folder {args.layers}+{args.layers} layers, width "
          f"{args.width}, {args.heads} heads, F {args.ffn}, {args.vocab} ids (random weights); "
          f"best of {args.repeats}\n")
    print("| precision | decoding | batch | CTranslate2 (sentences/s) | ours (sentences/s) | "
          "ours / CTranslate2 | same ids |\n|---|---|---|---|---|---|---|")
    for r in rows:
        how = "greedy" if r["beams"] == 1 else f"beam {r['beams']}"
        same = f"{r['same_sentences']} of {r['sentences']}"
        print(f"| {r['precision']} | {how} | {r['batch_size']} | "
              f"{r['ct2_sentences_per_second']} | {r['ours_sentences_per_second']} | "
              f"{r['ratio']} | {same} |")
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        command = as_typed("benchmarks/translation_ct2.py",
                           sys.argv[1:] if argv is None else argv)
        for r in rows:
            record(args.results, r, command)
        print(f"rows added to {args.results}")
    key = next((r for r in rows if (r["precision"], r["beams"], r["batch_size"]) ==
                ("fp32", 4, 32)), None)
    if key is not None:
        print(f"CT2_RATIO {key['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
