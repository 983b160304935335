#!/usr/bin/env python3
"""Continue your own prompts with a TransformerGPT checkpoint (train_gpt.py).

    python3 interact_with_prompts.py checkpoints_GPT 4 "el perro"
    python3 interact_with_prompts.py checkpoints_GPT 4 "el perro" --temperature 0   # greedy
    python3 interact_with_prompts.py checkpoints_GPT        # prompts from standard input
    # a real model's folder (docs/real_models.md):
    python3 interact_with_prompts.py SmolLM2-135M-Instruct "The capital of France is" \
        --temperature 0
    python3 interact_with_prompts.py SmolLM2-135M-Instruct --chat
"""
import sys

from DLStudio.cli.gpt import prompts_main

if __name__ == "__main__":
    sys.exit(prompts_main())
