#!/usr/bin/env python3
"""The sinusoidal positional encoding as a picture, and how alike the positions are.

    python3 show_positional_encoding.py [--embedding-size 256] [--positions 10] [--base 10000]

Writes positional_encoding.png: the code (positions x dimensions; low dimensions change
fast, high ones slowly) and the cosine similarity of every pair of positions (neighbours
are alike, far positions less so).
"""
import argparse
import sys

from DLStudio import TransformerFG
from DLStudio.visualize import plot_positional_encoding


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--embedding-size", type=int, default=256)
    p.add_argument("--positions", type=int, default=10)
    p.add_argument("--base", type=float, default=TransformerFG.EmbeddingsGenerator.positional_base)
    p.add_argument("--out", default="positional_encoding.png")
    args = p.parse_args()
    if args.embedding_size < 2 or args.embedding_size % 2 or args.positions < 1:
        p.error("--embedding-size must be even and >= 2, --positions >= 1")
    pe = TransformerFG.EmbeddingsGenerator.sinusoids(args.positions, args.embedding_size,
                                                     args.base)
    path = plot_positional_encoding(pe, args.out, f"Sinusoidal positional encoding "
                                                  f"(M = {args.embedding_size}, base "
                                                  f"{args.base:g})")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
