#!/usr/bin/env python3
"""What does each head look at? Attention maps of every layer and head for one sentence.

    python3 show_attention.py checkpoints_with_masking_FG 39 "i will visit my grandmother tomorrow"
    python3 show_attention.py checkpoints_with_masking_FG last "..."   # or one .pt file

Translates the sentence, then runs the model once on the sentence and its translation and
plots, with the words on the axes:
    attention_encoder.png       encoder self-attention   (English x English)
    attention_decoder_self.png  masked decoder self-attention (Spanish x Spanish)
    attention_cross.png         cross-attention (Spanish queries x English keys)
"""
import argparse
import os
import sys

import torch

from DLStudio.checkpoints import CheckpointError
from DLStudio.cli import add_checkpoint_arguments, checkpoint_arguments, load_checkpoint_or_exit
from DLStudio.evaluation import translate_ids
from DLStudio.tokens import SOS_INDEX
from DLStudio.visualize import plot_attention


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkpoint_arguments(p, sentence=True)
    p.add_argument("--out", default="attention_maps", help="folder for the PNG files")
    p.add_argument("--model-class", metavar="MODULE:CLASS",
                   help="the container class of a checkpoint trained with your own subclass")
    args = p.parse_args()
    try:
        path, sentence = checkpoint_arguments(p, args, sentence=True)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    xformer, model = load_checkpoint_or_exit(path, model_class=args.model_class)
    try:
        words = xformer.vocab.prepare(sentence)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    device = next(model.parameters()).device
    src = xformer.sentence_with_words_to_ints([words], "en")[:, :len(words) + 2].to(device)
    predicted = translate_ids(model, src, xformer.max_seq_length)[0]
    spanish = xformer.vocab.words(predicted)   # an early model's may be long and wrong
    # the decoder's input: SOS and the predicted words (not re-encoded: any length fits)
    tgt = torch.tensor([[SOS_INDEX] + predicted[:len(spanish)]], device=device)
    try:
        maps = model.attention_maps(src, tgt)
    except ValueError as e:      # a student's head that does not hand over its weights
        print(f"error: {e}", file=sys.stderr)
        return 1
    en_axis = ["SOS"] + words + ["EOS"]
    es_axis = ["SOS"] + spanish
    print(f"{' '.join(words)}  ->  {' '.join(spanish)}")
    for kind, queries, keys, title in (
            ("encoder", en_axis, en_axis, "encoder self-attention"),
            ("decoder_self", es_axis, es_axis, "decoder self-attention (masked)"),
            ("cross", es_axis, en_axis, "cross-attention: Spanish queries, English keys")):
        path = plot_attention([m[0].cpu() for m in maps[kind]], queries, keys,
                              f"Transformer{xformer.variant}: {title}",
                              os.path.join(args.out, f"attention_{kind}.png"))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
