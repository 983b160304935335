#!/usr/bin/env python3
"""Fine-tune a classifier on a BERT's [CLS] vector, pre-trained or from scratch.

    python -m DLStudio.data tasks question -o tasks/question
    python3 finetune_bert.py --pretrained checkpoints_BERT --train tasks/question/train.tsv \
        --test tasks/question/test.tsv
    python3 finetune_bert.py --from-scratch checkpoints_BERT --train ... --labelled 50

Rows are label<TAB>text or label<TAB>text<TAB>text2 (a pair). At the end: held-out
accuracy and the confusion matrix. --help lists the flags.
"""
import sys

from DLStudio.cli.bert import finetune_main

if __name__ == "__main__":
    sys.exit(finetune_main())
