#!/usr/bin/env python3
"""Which model for my laptop: today's small open models at their real sizes, in our classes
with random weights (the arithmetic of a step does not depend on the values), measured on
this machine: parameters, the memory the process held (fp32 and bf16), and greedy tokens per
second at batch 1 (a prompt of 32 tokens, 64 new). Each row runs alone in a fresh process,
so that its peak memory is its own. The configurations are those of the models' config.json
files on the hub, read by the same code that reads a downloaded folder (containers/hub).

    python benchmarks/laptop_models.py                    # every model, fp32 and bf16
    python benchmarks/laptop_models.py --models smollm2-135m,qwen3-0.6b --dtypes fp32
    python benchmarks/laptop_models.py --models tiny --new 2 --repeats 1   # the test's
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_generate import peak_mb  # noqa: E402

from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.quick import quick, shrink  # noqa: E402

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
#: The models, by the fields of their config.json that size them.
MODELS = {
    "smollm2-135m": ("SmolLM2-135M", {
        "architectures": ["LlamaForCausalLM"], "hidden_size": 576, "num_hidden_layers": 30,
        "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
        "vocab_size": 49152, "max_position_embeddings": 8192, "rope_theta": 100000.0,
        "tie_word_embeddings": True}),
    "gemma3-270m": ("Gemma 3 270M", {
        "architectures": ["Gemma3ForCausalLM"], "hidden_size": 640, "num_hidden_layers": 18,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
        "intermediate_size": 2048, "vocab_size": 262144, "max_position_embeddings": 32768,
        "sliding_window": 512, "query_pre_attn_scalar": 256, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "hidden_activation": "gelu_pytorch_tanh"}),
    "qwen2.5-0.5b": ("Qwen2.5-0.5B", {
        "architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
        "vocab_size": 151936, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
        "tie_word_embeddings": True}),
    "qwen3-0.6b": ("Qwen3-0.6B", {
        "architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 3072, "vocab_size": 151936, "max_position_embeddings": 40960,
        "rope_theta": 1000000.0, "tie_word_embeddings": True}),
    "llama3.2-1b": ("Llama 3.2 1B", {
        "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
        "vocab_size": 128256, "max_position_embeddings": 131072, "rope_theta": 500000.0,
        "rope_scaling": LLAMA3_SCALING, "tie_word_embeddings": True}),
    "olmo2-1b": ("OLMo 2 1B", {
        "architectures": ["Olmo2ForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 16,
        "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 8192,
        "vocab_size": 100352, "max_position_embeddings": 4096, "rope_theta": 500000.0,
        "tie_word_embeddings": False}),
    "tiny": ("a tiny Gemma 3 (the test's)", {
        "architectures": ["Gemma3ForCausalLM"], "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
        "intermediate_size": 48, "vocab_size": 300, "max_position_embeddings": 256,
        "sliding_window": 8}),
}


def build(config, dtype):
    """Our TransformerGPT of ``config``'s sizes, random weights, in ``dtype``."""
    from tokenizers import Tokenizer, models

    from DLStudio.containers import hub
    from DLStudio.data.hub_tokenizer import HubTokenizer
    from DLStudio.runtime.studio import DLStudio
    from DLStudio.Transformers import TransformerGPT
    torch.manual_seed(0)
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        gpt = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0),
                             vocab=HubTokenizer(Tokenizer(models.BPE()), config["vocab_size"]),
                             tokenizer="hub", **hub.settings_of(config))
    finally:
        torch.set_default_dtype(before)
    return gpt.eval()


def run_row(args, name, dtype_name):
    """One row, in this (fresh) process."""
    from DLStudio.evaluation.generation import generate
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    config = MODELS[name][1]
    gpt = build(config, dtype)
    params = sum(p.numel() for p in gpt.parameters())
    prompt = torch.randint(2, config["vocab_size"], (1, args.prompt),
                           generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        generate(gpt, prompt, max_new_tokens=args.new, end_ids=())          # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            generate(gpt, prompt, max_new_tokens=args.new, end_ids=())
            times.append(time.perf_counter() - start)
    return {"params": params, "tokens_per_s": args.new / min(times), "peak_mb": peak_mb()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--models", default=",".join(m for m in MODELS if m != "tiny"),
                   help=f"comma-separated, of: {', '.join(MODELS)}")
    p.add_argument("--dtypes", default="fp32,bf16", help="fp32, bf16 or both")
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    p.add_argument("--new", type=int, default=64, help="new tokens (greedy)")
    p.add_argument("--repeats", type=int, default=2, help="timed runs after a warm-up")
    p.add_argument("--row", help=argparse.SUPPRESS)        # NAME:DTYPE, in a child
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes, the tiny model
    if quick():
        args.models = "tiny"
    names, dtypes = args.models.split(","), args.dtypes.split(",")
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        p.error(f"--models: no model {unknown[0]!r}; the models are {', '.join(MODELS)}")
    if not set(dtypes) <= {"fp32", "bf16"}:
        p.error("--dtypes takes fp32, bf16 or both")
    if min(args.prompt, args.new, args.repeats) < 1:
        p.error("--prompt, --new and --repeats must be at least 1")
    if args.row:
        name, dtype = args.row.split(":")
        print(json.dumps(run_row(args, name, dtype)))
        return 0
    print(f"machine: {machine()}")
    print(f"random weights at each model's sizes; batch 1, prompt {args.prompt}, {args.new} "
          f"new tokens (greedy, the key/value cache); best of {args.repeats} after a warm-up; "
          "each row alone in a fresh process (peak memory: its maximum resident set, torch "
          "included)")
    table = ["| model | parameters | dtype | peak memory (GB) | tokens/s |",
             "|---|---|---|---|---|"]
    for name in names:
        for dtype in dtypes:
            cmd = [sys.executable, os.path.abspath(__file__), "--row", f"{name}:{dtype}",
                   f"--prompt={args.prompt}", f"--new={args.new}",
                   f"--repeats={args.repeats}"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                print(f"{name} {dtype}: failed\n{done.stderr[-2000:]}")
                return 1
            r = json.loads(done.stdout.strip().splitlines()[-1])
            table.append(f"| {MODELS[name][0]} | {r['params'] / 1e6:,.0f} M | {dtype} | "
                         f"{r['peak_mb'] / 1024:.2f} | {r['tokens_per_s']:.1f} |")
            print(table[-1], flush=True)
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
