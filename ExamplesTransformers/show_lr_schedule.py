#!/usr/bin/env python3
"""TransformerFG's warm-up schedule: the learning rate at every step.

    python3 show_lr_schedule.py [--embedding-size 256] [--num-warmup-steps 4000] [--steps 20000]

lr(step) = lr_mul * M^-0.5 * min(step^-0.5, step * warmup^-1.5): a linear rise for the
warm-up steps, then a decay as 1/sqrt(step). Writes lr_schedule.png.
"""
import argparse
import sys

import torch

from DLStudio import TransformerFG
from DLStudio.visualize import plot_lr_schedule


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--embedding-size", type=int, default=256)
    p.add_argument("--num-warmup-steps", type=int, default=4000)
    p.add_argument("--lr-mul", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--out", default="lr_schedule.png")
    args = p.parse_args()
    if min(args.embedding_size, args.num_warmup_steps, args.steps) < 1 or args.lr_mul <= 0:
        p.error("sizes and steps must be >= 1 and --lr-mul > 0")
    dummy = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    schedule = TransformerFG.ScheduledOptim(dummy, args.lr_mul, args.embedding_size,
                                            args.num_warmup_steps)
    peak = schedule.lr_at(args.num_warmup_steps)
    path = plot_lr_schedule(schedule.lr_at, args.steps, args.out,
                            f"warm-up schedule: M = {args.embedding_size}, warm-up "
                            f"{args.num_warmup_steps} steps, peak {peak:.2e}")
    print(f"peak learning rate {peak:.3e} at step {args.num_warmup_steps}; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
