#!/usr/bin/env python3
"""Continue your own prompts with a TransformerGPT checkpoint (train_gpt.py).

    python3 interact_with_prompts.py checkpoints_GPT 4 "el perro"
    python3 interact_with_prompts.py checkpoints_GPT 4 "el perro" --temperature 0   # greedy
    python3 interact_with_prompts.py checkpoints_GPT        # prompts from standard input
"""
import sys

from DLStudio.cli.gpt import prompts_main

if __name__ == "__main__":
    sys.exit(prompts_main())
