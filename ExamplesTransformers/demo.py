#!/usr/bin/env python3
"""`make demo`: train TransformerFG on the bundled corpus for a few minutes of CPU time,
then translate held-out sentences it has never seen and score them with BLEU.

    python3 demo.py [--epochs 10] [--out demo_run]

(--archive, --embedding-size and --num-layers exist so that a test can run it small.)
"""
import sys

from DLStudio.cli import demo_main

if __name__ == "__main__":
    sys.exit(demo_main())
