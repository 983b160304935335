#!/usr/bin/env python3
"""The likeliest tokens for each [MASK] of a text, with a pre-trained BERT.

    python3 fill_mask.py checkpoints_BERT 9 "she [MASK] the book"
    python3 fill_mask.py checkpoints_BERT/checkpoint_9.pt --top 10 < texts.txt
"""
import sys

from DLStudio.cli.bert import fill_mask_main

if __name__ == "__main__":
    sys.exit(fill_mask_main())
