#!/usr/bin/env python3
"""Is PreLN more stable but slower to converge? Does FG need its warm-up? What does each
design switch buy? Train and see.

    python3 compare_fg_preln.py --archive ../datasets/en_es_synthetic_8_20000.tar.gz --minutes 3
    python3 compare_fg_preln.py --archive data/en_es_xformer_8_90000.tar.gz --minutes 30 --every 5

Trains, on the same data, for the same budget each (--minutes of training time, or --steps
optimiser steps, which stays fair when the machine is busy):
    FG with warm-up            the lecture's recipe (ScheduledOptim)
    FG-no-warmup               Adam at the schedule's peak rate from the first step
    PreLN                      Adam at --preln-lr, no warm-up
and plots loss and held-out BLEU against steps and against minutes on one figure
(compare_fg_preln.png), with the table in compare_fg_preln.csv. Designs switched on by the
flags (--dropout, --label-smoothing, --full-width-heads, ...) apply to every run; a run can
also change one for itself, after a colon, to measure what that switch does:

    --runs "FG,FG:full_width_heads,FG:tie_embeddings,FG:learned_positions,FG:dropout=0"
"""
import sys

from DLStudio.cli.lecture_pictures import compare_fg_preln_main

if __name__ == "__main__":
    sys.exit(compare_fg_preln_main())
