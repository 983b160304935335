#!/usr/bin/env python3
"""Train TransformerGPT, a language model built of the translation models' own classes.

    python3 train_gpt.py                                  # the bundled corpus's Spanish
    python3 train_gpt.py --text my_sentences.txt          # any UTF-8 text, a sentence a line
    python3 train_gpt.py --archive data/en_es_xformer_8_90000.tar.gz --side es --epochs 10

Checkpoints go to checkpoints_GPT/ every five epochs; at the end, held-out perplexity and a
few continuations of a prompt. --help lists the flags.
"""
import sys

from DLStudio.cli.gpt import gpt_train_main

if __name__ == "__main__":
    sys.exit(gpt_train_main())
