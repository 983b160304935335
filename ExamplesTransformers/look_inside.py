#!/usr/bin/env python3
"""Look inside a GPT (train_gpt.py's checkpoint, or a real model's folder) on a text: its
hook points, the logit lens, heads switched off, activation patching, direct logit
attribution and the induction-head detector (docs/interpretability.md).

    python3 look_inside.py checkpoints_GPT 4 "el perro come"           # the hook points
    python3 look_inside.py checkpoints_GPT 4 "el perro come" --lens
    python3 look_inside.py checkpoints_GPT 4 "el perro come" --ablate
    python3 look_inside.py checkpoints_GPT 4 "el perro come" --patch "el gato come"
    python3 look_inside.py checkpoints_GPT 4 "el perro come" --attribute
    python3 look_inside.py checkpoints_GPT 4 "el perro come" --heads
"""
import sys

from DLStudio.cli.look_inside import look_inside_main

if __name__ == "__main__":
    sys.exit(look_inside_main())
