#!/usr/bin/env python3
"""Fine-tune a language model on your rows, with LoRA (the default) or every weight:

    python3 finetune_lm.py SmolLM2-135M-Instruct --data chats.jsonl --out tuned --merge
    python3 finetune_lm.py checkpoints_GPT --data pairs.tsv --template "English: {}\\nSpanish:"
    python3 finetune_lm.py SmolLM2-135M-Instruct --data preferences.jsonl --out dpo

Rows: JSONL chat "messages" (the loss on the assistant's turns), "prompt"/"completion"
(on the completion), "prompt"/"chosen"/"rejected" (DPO), or a TSV of prompt<TAB>completion.
--out DIR writes DIR/adapter/ (PEFT's files) and, with --merge, DIR/merged/ (a folder
transformers and interact_with_prompts.py read). --help lists the flags.
"""
import sys

from DLStudio.cli.finetune import finetune_main

if __name__ == "__main__":
    sys.exit(finetune_main())
