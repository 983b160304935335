#!/usr/bin/env python3
"""Translation with a Marian model (OPUS-MT's layout), ours against transformers'
``generate``, side by side on the same weights, sentences, machine and threads. The folder
is built by transformers at opus-mt-en-es's sizes (6 + 6 layers, width 512, 8 heads, F
2,048, a vocabulary of 65,001 ids, shared) with random weights, its two SentencePiece models
trained on the archive's English and Spanish; both read it, ours into TransformerFG. Both
translate the same held-out English sentences of the archive in batches, greedy and with
beam search, under the folder's generation_config.json (<pad> never written, </s> forced at
max_length); the rows say whether the two outputs are the same ids. With random weights a
translation seldom ends before max_length, so both do the same work: max_length - 1 steps a
sentence (the decoder's cost; a real model ends sooner, on both sides alike). In bf16 (fast
where the CPU multiplies bf16 natively: AVX512-BF16, AMX) the ids are compared sentence by
sentence: random weights leave near-equal logits that bf16 rounds either way.

    python benchmarks/translation_speed.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz
    python benchmarks/translation_speed.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz \\
        --results docs/results/translation_speed.json         # rows kept
    python benchmarks/translation_speed.py --width 32 --layers 1 --heads 4 --ffn 64 \\
        --vocab 300 --sentences 4 --max-length 6 --repeats 1  # tiny (the test's)

It needs transformers (the parity extra) to build the folder and to be compared with;
without it, it says so and stops.
"""

import argparse
import contextlib
import functools
import io
import json
import os
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from DLStudio.cli.common import archive_or_usage, existing_file, positive_int  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE  # noqa: E402
from DLStudio.data.archive import split_pairs  # noqa: E402
from DLStudio.data.vocabulary import plain_words  # noqa: E402
from DLStudio.quick import shrink  # noqa: E402


def spm_model(sentences, size):
    """A SentencePiece model of ``size`` pieces trained on ``sentences`` (Marian's kind)."""
    import sentencepiece
    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=out, vocab_size=size,
        model_type="unigram", character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1,
        pad_id=-1, hard_vocab_limit=False, minloglevel=2)
    return out.getvalue()


def make_folder(args, path, english, spanish):
    """The Marian folder both read: transformers' own weights and files."""
    import sentencepiece
    from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer
    pieces = []
    for name, text in (("source.spm", english), ("target.spm", spanish)):
        proto = spm_model(text, min(args.pieces, args.vocab // 2))
        with open(os.path.join(path, name), "wb") as f:
            f.write(proto)
        sp = sentencepiece.SentencePieceProcessor(model_proto=proto)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    words = ["</s>", "<unk>"] + [p for p in dict.fromkeys(pieces) if p != "<unk>"]
    words = words[:args.vocab - 1]
    words += [f"<extra_{i}>" for i in range(args.vocab - 1 - len(words))] + ["<pad>"]
    with open(os.path.join(path, "vocab.json"), "w") as f:
        json.dump({w: i for i, w in enumerate(words)}, f, ensure_ascii=False)
    pad = args.vocab - 1
    torch.manual_seed(0)
    MarianMTModel(MarianConfig(
        vocab_size=args.vocab, d_model=args.width, encoder_layers=args.layers,
        decoder_layers=args.layers, encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads, encoder_ffn_dim=args.ffn, decoder_ffn_dim=args.ffn,
        activation_function="swish", max_position_embeddings=512, scale_embedding=True,
        pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
        architectures=["MarianMTModel"])).save_pretrained(path)
    MarianTokenizer(*(os.path.join(path, n) for n in ("source.spm", "target.spm",
                                                      "vocab.json"))).save_pretrained(path)
    GenerationConfig(bad_words_ids=[[pad]], decoder_start_token_id=pad, eos_token_id=0,
                     forced_eos_token_id=0, max_length=args.max_length, num_beams=4,
                     pad_token_id=pad).save_pretrained(path)


@contextlib.contextmanager
def folder_of(args, corpus):
    """``with folder_of(args, corpus) as (folder, english)``: the Marian folder, written in a
    temporary folder, and the held-out English sentences, for the duration of ``with``."""
    training, held_out = split_pairs(corpus.pairs, 0.05, 0)
    english = list(dict.fromkeys(" ".join(plain_words(en)) for en, _ in held_out))
    with tempfile.TemporaryDirectory() as folder:
        make_folder(args, folder, [" ".join(plain_words(en)) for en, _ in training],
                    [" ".join(plain_words(es)) for _, es in training])
        yield folder, english[:args.sentences]


def timed(run, repeats):
    """The best of ``repeats`` runs of ``run()`` in seconds, and its output."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    return best, out


@torch.no_grad()
def generated(model, batches, pad, beams):
    """transformers' ids of each sentence, its start token left out."""
    return [r[1:] for b in batches for r in model.generate(
        input_ids=b, attention_mask=(b != pad).long(), num_beams=beams).tolist()]


def upto_end(rows):
    return [r[:r.index(0) + 1] if 0 in r else r for r in rows]


def compare(args, folder, english):
    """One row per (beams, dtype): both sides' sentences a second on the same work."""
    from transformers import AutoModelForSeq2SeqLM

    from DLStudio.evaluation.decode_and_score import translate_ids
    from DLStudio.runtime.studio import DLStudio
    from DLStudio.Transformers import TransformerFG
    rows = []
    for dtype in args.dtypes.split(","):
        torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        theirs = AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch_dtype).eval()
        xformer, ours, _ = TransformerFG.from_huggingface(folder, DLStudio(use_gpu=False,
                                                                           seed=0), torch_dtype)
        rules, vocab = xformer.generation_rules, xformer.vocab
        src = vocab.encode(english, "en")
        batches = [src[i:i + args.batch_size] for i in range(0, len(src), args.batch_size)]
        for beams in map(int, args.beams.split(",")):
            t_theirs, out_theirs = timed(functools.partial(
                generated, theirs, batches, vocab.pad_id, beams), args.repeats)
            t_ours, out_ours = timed(functools.partial(
                translate_ids, ours, src, rules.max_length, beams, args.batch_size,
                length_penalty=rules.length_penalty, rules=rules), args.repeats)
            rows.append({"dtype": dtype, "beams": beams, "sentences": len(english),
                         "batch_size": args.batch_size, "max_length": rules.max_length,
                         "theirs_sentences_per_second": round(len(english) / t_theirs, 2),
                         "ours_sentences_per_second": round(len(english) / t_ours, 2),
                         "ratio": round(t_theirs / t_ours, 3),
                         "same_output": upto_end(out_theirs) == upto_end(out_ours),
                         "same_sentences": sum(a == b for a, b in zip(
                             upto_end(out_theirs), upto_end(out_ours))),
                         "sizes": {k: getattr(args, k) for k in ("width", "layers", "heads",
                                                                 "ffn", "vocab")}})
    return rows


def parser():
    p = argparse.ArgumentParser(description="Translation with OPUS-MT's layout, ours against "
                                            "transformers' generate.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--beams", default="1,4", help="comma-separated beam widths (1: greedy)")
    p.add_argument("--dtypes", default="fp32", help="fp32, and bf16 where the CPU has it")
    folder_arguments(p)
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add the rows to a result file (docs/results/translation_speed.json)")
    return p


def folder_arguments(p):
    """The archive, the sentences and the Marian folder's sizes (translation_ct2.py's too)."""
    p.add_argument("--archive", default=BUNDLED_ARCHIVE, type=existing_file)
    p.add_argument("--sentences", type=positive_int, default=64,
                   help="held-out English sentences translated")
    p.add_argument("--max-length", type=positive_int, default=32,
                   help="the folder's max_length (its start token counted)")
    p.add_argument("--width", type=positive_int, default=512)
    p.add_argument("--layers", type=positive_int, default=6)
    p.add_argument("--heads", type=positive_int, default=8)
    p.add_argument("--ffn", type=positive_int, default=2048)
    p.add_argument("--vocab", type=positive_int, default=65001)
    p.add_argument("--pieces", type=positive_int, default=8000,
                   help="pieces of each SentencePiece model")
    p.add_argument("--repeats", type=positive_int, default=2)


def main(argv=None):
    p = parser()
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes
    corpus = archive_or_usage(p, args.archive)          # (a bad one is said first)
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("translation_speed.py needs transformers (pip install -e '.[parity]'): it "
              "builds the folder and is compared with it; nothing measured")
        return 0
    with folder_of(args, corpus) as (folder, english):
        rows = compare(args, folder, english)
    print(f"\n{machine()}; {len(english)} held-out sentences of {args.archive}, batches of "
          f"{args.batch_size}, max_length {args.max_length}; a Marian folder "
          f"{args.layers}+{args.layers} layers, width {args.width}, {args.heads} heads, "
          f"F {args.ffn}, {args.vocab} ids (random weights)\n")
    print("| dtype | decoding | transformers generate (sentences/s) | ours (sentences/s) | "
          "ours / theirs | same ids |\n|---|---|---|---|---|---|")
    for r in rows:
        same = "yes" if r["same_output"] else f"{r['same_sentences']} of {r['sentences']}"
        how = "greedy" if r["beams"] == 1 else f"beam {r['beams']}"
        print(f"| {r['dtype']} | {how} | {r['theirs_sentences_per_second']} | "
              f"{r['ours_sentences_per_second']} | {r['ratio']} | "
              f"{same} |")
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        command = as_typed("benchmarks/translation_speed.py",
                           sys.argv[1:] if argv is None else argv)
        for r in rows:
            record(args.results, {**r, "transformers": transformers.__version__}, command)
        print(f"rows added to {args.results}")
    # (in bf16 near-equal logits of random weights may round either way: said, not failed)
    return 0 if all(r["same_output"] for r in rows if r["dtype"] == "fp32") else 1


if __name__ == "__main__":
    sys.exit(main())
