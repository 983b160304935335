#!/usr/bin/env python3
"""Write your own GPT (train_gpt.py, with the Llama switches) as a Hugging Face folder that
transformers reads: AutoModelForCausalLM and AutoTokenizer (docs/real_models.md); or your
own translation model as a MarianMTModel folder.

    python3 train_gpt.py --norm rmsnorm --positions rope --feed-forward swiglu \\
        --full-width-heads --no-output-bias --kv-heads 2 --checkpoints-dir checkpoints_GPT
    python3 save_to_huggingface.py checkpoints_GPT 5 my_llama

Your translation model (TransformerFG, as seq2seq_with_transformerFG.py trains it) as a
MarianMTModel folder, OPUS-MT's architecture (docs/real_translation.md):

    python3 save_to_huggingface.py checkpoints_with_masking_FG last my_marian
"""
import sys

from DLStudio.cli.real_models import save_main

if __name__ == "__main__":
    sys.exit(save_main())
