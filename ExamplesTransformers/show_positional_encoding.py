#!/usr/bin/env python3
"""The sinusoidal positional encoding as a picture, and how alike the positions are.

    python3 show_positional_encoding.py [--embedding-size 256] [--positions 10] [--base 10000]

Writes positional_encoding.png: the code (positions x dimensions; low dimensions change
fast, high ones slowly) and the cosine similarity of every pair of positions (neighbours
are alike, far positions less so).
"""
import sys

from DLStudio.cli.lecture_pictures import show_positional_encoding_main

if __name__ == "__main__":
    sys.exit(show_positional_encoding_main())
