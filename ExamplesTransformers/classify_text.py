#!/usr/bin/env python3
"""Every label's probability for a text (or a pair), with a fine-tuned BERT.

    python3 classify_text.py checkpoints_BERT_finetuned 4 "did she read the book"
    printf 'she reads\tella lee\n' | python3 classify_text.py checkpoints_BERT_finetuned 4 -
"""
import sys

from DLStudio.cli.bert import classify_main

if __name__ == "__main__":
    sys.exit(classify_main())
