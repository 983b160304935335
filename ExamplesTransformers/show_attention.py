#!/usr/bin/env python3
"""What does each head look at? Attention maps of every layer and head for one sentence.

    python3 show_attention.py checkpoints_with_masking_FG 39 "i will visit my grandmother tomorrow"

Translates the sentence, then runs the model once on the sentence and its translation and
plots, with the words on the axes:
    attention_encoder.png       encoder self-attention   (English x English)
    attention_decoder_self.png  masked decoder self-attention (Spanish x Spanish)
    attention_cross.png         cross-attention (Spanish queries x English keys)
"""
import argparse
import os
import sys

from DLStudio.cli import load_checkpoint_or_exit
from DLStudio.visualize import plot_attention


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints_dir")
    p.add_argument("checkpoint_index", type=int)
    p.add_argument("sentence")
    p.add_argument("--out", default="attention_maps", help="folder for the PNG files")
    args = p.parse_args()
    xformer, model = load_checkpoint_or_exit(args.checkpoints_dir, args.checkpoint_index)
    try:
        words = xformer.prepare_sentence(args.sentence)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    spanish = xformer.translate(model, [words])[0].split()
    src = xformer.sentence_with_words_to_ints([words], "en")[:, :len(words) + 2]
    tgt = xformer.sentence_with_words_to_ints([spanish], "es")[:, :len(spanish) + 1]
    maps = model.attention_maps(src, tgt)
    en_axis = ["SOS"] + words + ["EOS"]
    es_axis = ["SOS"] + spanish
    print(f"{' '.join(words)}  ->  {' '.join(spanish)}")
    for kind, queries, keys, title in (
            ("encoder", en_axis, en_axis, "encoder self-attention"),
            ("decoder_self", es_axis, es_axis, "decoder self-attention (masked)"),
            ("cross", es_axis, en_axis, "cross-attention: Spanish queries, English keys")):
        path = plot_attention([m[0] for m in maps[kind]], queries, keys,
                              f"Transformer{xformer.variant}: {title}",
                              os.path.join(args.out, f"attention_{kind}.png"))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
