#!/usr/bin/env python3
"""Translate held-out sentences with a TransformerFG checkpoint and score it with BLEU.

    python3 test_checkpointFG.py checkpoints_with_masking_FG 39
"""
import sys

from DLStudio.cli import test_checkpoint_main

if __name__ == "__main__":
    sys.exit(test_checkpoint_main("FG"))
