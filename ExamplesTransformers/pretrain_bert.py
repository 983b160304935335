#!/usr/bin/env python3
"""Pre-train TransformerBERT, an encoder-only model, by masked-language modelling.

    python3 pretrain_bert.py                                  # the bundled corpus's English
    python3 pretrain_bert.py --archive data/en_es_xformer_8_90000.tar.gz --side both
    python3 pretrain_bert.py --text my_lines.txt --pair-task next   # lines that run in order

15% of the tokens of every batch are selected anew (80% become [MASK], 10% a random token,
10% stay) and the loss is counted at those only. Checkpoints go to checkpoints_BERT/ every
five epochs; at the end, held-out masked-token accuracy and perplexity, and a filled mask.
--help lists the flags.
"""
import sys

from DLStudio.cli.bert import pretrain_main

if __name__ == "__main__":
    sys.exit(pretrain_main())
