#!/usr/bin/env python3
"""Held-out BLEU of every checkpoint in a directory: when did the model learn, and did it
diverge?

    python3 score_checkpoints.py checkpoints_with_masking_FG [--beam 1]

Prints a table (epoch, BLEU, sacreBLEU), writes bleu_by_epoch.png in the directory and
flags a divergence: BLEU collapsing below a quarter of its best after it had risen.
"""
import sys

from DLStudio.cli.checkpoint_pictures import score_checkpoints_main

if __name__ == "__main__":
    sys.exit(score_checkpoints_main())
