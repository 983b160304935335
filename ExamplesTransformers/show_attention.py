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
import sys

from DLStudio.cli.checkpoint_pictures import show_attention_main

if __name__ == "__main__":
    sys.exit(show_attention_main())
