#!/usr/bin/env python3
"""Translate your own English with any checkpoint (FG or PreLN: checkpoints say which).

    python3 translate_sentence.py checkpoints_with_masking_FG 39 "I'm hungry."
    cat sentences.txt | python3 translate_sentence.py checkpoints_with_masking_FG 39 -
"""
import sys

from DLStudio.cli import translate_main

if __name__ == "__main__":
    sys.exit(translate_main())
