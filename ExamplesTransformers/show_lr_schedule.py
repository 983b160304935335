#!/usr/bin/env python3
"""TransformerFG's warm-up schedule: the learning rate at every step.

    python3 show_lr_schedule.py [--embedding-size 256] [--num-warmup-steps 4000] [--steps 20000]

lr(step) = lr_mul * M^-0.5 * min(step^-0.5, step * warmup^-1.5): a linear rise for the
warm-up steps, then a decay as 1/sqrt(step). Writes lr_schedule.png.
"""
import sys

from DLStudio.cli.lecture_pictures import show_lr_schedule_main

if __name__ == "__main__":
    sys.exit(show_lr_schedule_main())
