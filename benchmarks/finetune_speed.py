#!/usr/bin/env python3
"""LoRA against full fine-tuning of the same model, side by side on this machine: seconds
per optimiser step, the memory the process held, and the weights that learn. The model is
built in our classes at a real model's sizes (SmolLM2-135M's by default) with random
weights, as laptop_models.py builds it (the arithmetic of a step does not depend on the
values); a step is finetune_lm.py's: the forward pass, the loss on the learnt tokens, the
backward pass, AdamW. Each row runs alone in a fresh process, so that its peak memory is
its own. The row "PEFT, LoRA on the attention" is the same LoRA step through PEFT on
transformers' model of the same sizes, given the same levers as ours (the output layer at
the learnt positions only, the same AdamW and autocast): ours against PEFT, nothing else
(it needs peft and transformers, the parity extra; without them it is left out, said).

    python benchmarks/finetune_speed.py                      # SmolLM2-135M's sizes, fp32
    python benchmarks/finetune_speed.py --ways lora-attention,peft-attention --precision bf16
    python benchmarks/finetune_speed.py --results docs/results/finetune_speed.json
    python benchmarks/finetune_speed.py --model tiny --steps 1 --warmup 1   # the test's
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
from laptop_models import MODELS, build  # noqa: E402

from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.quick import shrink  # noqa: E402

#: The ways of fine-tuning compared: (name, LoRA targets or None for every weight).
WAYS = {"full": None,
        "lora-attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
        "lora-all": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                     "down_proj"),
        "peft-attention": ("q_proj", "k_proj", "v_proj", "o_proj")}
#: transformers' model type of each architecture laptop_models.py names.
MODEL_TYPES = {"LlamaForCausalLM": "llama", "Gemma3ForCausalLM": "gemma3_text",
               "Qwen3ForCausalLM": "qwen3", "Qwen2ForCausalLM": "qwen2",
               "Olmo2ForCausalLM": "olmo2", "MistralForCausalLM": "mistral"}


def peft_model(config, rank, targets):
    """transformers' model of ``config``'s sizes (random weights) with PEFT's LoRA on
    ``targets``; returns (its step's loss function, the weights that learn, all weights)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(0)
    rest = {k: v for k, v in config.items() if k != "architectures"}
    hf = AutoModelForCausalLM.from_config(AutoConfig.for_model(
        MODEL_TYPES[config["architectures"][0]], **rest))
    weights = sum(p.numel() for p in hf.parameters())
    model = get_peft_model(hf, LoraConfig(r=rank, lora_alpha=2 * rank,
                                          target_modules=list(targets))).train()
    learning = sum(p.numel() for p in model.parameters() if p.requires_grad)
    inner = model.base_model.model

    def loss(ids, keep):          # the output layer at the learnt positions only, as ours
        hidden = inner.model(input_ids=ids[:, :-1]).last_hidden_state
        logits = inner.lm_head(hidden[keep])
        return torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][keep])
    return model, loss, learning, weights


def run_row(args, way):
    """One row, in this (fresh) process: the mean seconds of ``args.steps`` steps after
    ``args.warmup``, the peak memory, the weights that learn."""
    config = MODELS[args.model][1]
    if way.startswith("peft-"):
        gpt, loss, learning, weights = peft_model(config, args.rank, WAYS[way])
    else:
        gpt = build(config, torch.float32).train()
        weights = sum(p.numel() for p in gpt.parameters())
        if WAYS[way] is None:
            learning = weights
        else:
            learning = gpt.add_lora(rank=args.rank, alpha=2 * args.rank, targets=WAYS[way])

        def loss(ids, keep):
            total, count = gpt.loss(ids, keep=keep)
            return total / count
    optimizer = torch.optim.AdamW([p for p in gpt.parameters() if p.requires_grad], lr=1e-5)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16")
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, config["vocab_size"], (args.batch_size, args.length), generator=g)
    keep = torch.ones(args.batch_size, args.length - 1, dtype=torch.bool)
    keep[:, :args.length // 2] = False                   # the prompt's half is not learnt
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        with autocast:
            value = loss(ids, keep)
        value.backward()
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    return {"learning": learning, "weights": weights,
            "seconds_per_step": sum(times) / len(times), "peak_mb": peak_mb()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="smollm2-135m", choices=sorted(MODELS))
    p.add_argument("--ways", default=",".join(WAYS), help=f"of: {', '.join(WAYS)}")
    p.add_argument("--rank", type=int, default=8, help="LoRA's rank (alpha: twice it)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                   help="bf16: the forward pass under autocast, as finetune_lm.py's")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--length", type=int, default=128, help="tokens a row")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add the rows to a result file")
    p.add_argument("--row", help=argparse.SUPPRESS)          # WAY, in a child
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes
    ways = args.ways.split(",")
    if not set(ways) <= set(WAYS):
        p.error(f"--ways takes {', '.join(WAYS)}")
    if min(args.rank, args.batch_size, args.steps) < 1 or args.length < 2 or args.warmup < 0:
        p.error("--rank, --batch-size, --steps must be at least 1, --length at least 2")
    if args.row:
        print(json.dumps(run_row(args, args.row)))
        return 0
    name = MODELS[args.model][0]
    print(f"machine: {machine()}")
    print(f"{name}'s sizes, random weights, {args.precision}; batch {args.batch_size} x "
          f"{args.length} "
          f"tokens (the loss on the second half), AdamW; mean of {args.steps} steps after "
          f"{args.warmup}; each row alone in a fresh process (peak memory: its maximum "
          "resident set, torch included)")
    table = ["| model | fine-tuning | weights that learn | seconds a step | peak memory (GB) |",
             "|---|---|---|---|---|"]
    rows = []
    try:
        import peft  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        if any(w.startswith("peft-") for w in ways):
            print("peft or transformers is not installed: the PEFT row is left out "
                  "(pip install -e '.[parity]')")
        ways = [w for w in ways if not w.startswith("peft-")]
    for way in ways:
        cmd = [sys.executable, os.path.abspath(__file__), "--row", way, f"--model={args.model}",
               f"--precision={args.precision}",
               f"--rank={args.rank}", f"--batch-size={args.batch_size}",
               f"--length={args.length}", f"--steps={args.steps}", f"--warmup={args.warmup}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            print(f"{way}: failed\n{done.stderr[-2000:]}")
            return 1
        r = json.loads(done.stdout.strip().splitlines()[-1])
        how = "every weight" if WAYS[way] is None else \
            f"LoRA r={args.rank} on {', '.join(WAYS[way])}"
        how = f"PEFT on transformers, {how}" if way.startswith("peft-") else how
        rows.append({"model": name, "fine_tuning": how, "precision": args.precision,
                     "learning": r["learning"],
                     "learning_share": r["learning"] / r["weights"],
                     "seconds_per_step": round(r["seconds_per_step"], 3),
                     "peak_memory_gb": round(r["peak_mb"] / 1024, 2),
                     "batch": f"{args.batch_size} x {args.length}"})
        share = 100 * rows[-1]["learning_share"]
        table.append(f"| {name} | {how} | {r['learning']:,} ({share:.2f}%) | "
                     f"{r['seconds_per_step']:.3f} | {r['peak_mb'] / 1024:.2f} |")
        print(table[-1], flush=True)
    print("\n".join(table))
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        command = as_typed("benchmarks/finetune_speed.py",
                           sys.argv[1:] if argv is None else argv)
        for row in rows:
            record(args.results, row, command)
        print(f"rows added to {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
