#!/usr/bin/env python3
"""Pre-train, then fine-tune, when translation pairs are scarce: the lecture's claim, measured.

    python3 pretraining_experiment.py --archive data/en_es_xformer_8_90000.tar.gz \
        --pairs 10000 --steps 3000 --pretrain-steps 1500 --runs a,b,c --tokenizers word,bpe

N pairs are the labelled data; the Spanish (and English) sentences of the other training
pairs are unlabelled text. Run a trains the translation model from scratch; run b first
trains a GPT on the unlabelled Spanish and starts the decoder from it; run c starts the
encoder from a GPT on the unlabelled English as well. Each run gets the same number of
optimiser steps, pre-training included, and is scored on the same held-out sentences.
"""
import sys

from DLStudio.cli.gpt import pretraining_main

if __name__ == "__main__":
    sys.exit(pretraining_main())
