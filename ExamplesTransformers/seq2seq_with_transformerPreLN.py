#!/usr/bin/env python3
"""Train TransformerPreLN for English-to-Spanish translation.

    python3 seq2seq_with_transformerPreLN.py                       # the lecture's configuration
    python3 seq2seq_with_transformerPreLN.py --epochs 10 \
        --archive ../datasets/en_es_synthetic_8_20000.tar.gz

A checkpoint every five epochs goes to checkpoints_with_masking_PreLN/; then the held-out split
is translated and scored with BLEU. --help lists the flags.
"""
import sys

from DLStudio.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main("PreLN"))
