#!/usr/bin/env python3
"""Greedy generation at batch 1, ours against transformers' ``generate``, side by side on
the same weights, machine and threads: a Llama-shaped model of SmolLM2-135M's sizes with
random weights (30 layers, width 576, 9 heads, 3 key/value heads, F 1,536, vocabulary
49,152), a prompt of 32 tokens and 128 new ones, in fp32 and bf16. Each row runs in a
fresh process of its own, so that its peak memory (the process's maximum resident set) is
its own; "added while generating" is how far the resident memory rose above what the loaded
model held (the key/value cache, activations, and any copy of the weights). Without
transformers its rows are left out (said).

    python benchmarks/bench_generate.py                       # about five minutes
    python benchmarks/bench_generate.py --results docs/results/generate_speed.json   # kept
    python benchmarks/bench_generate.py --layers 2 --width 64 --heads 4 --kv-heads 2 \\
        --ffn 96 --vocab 500 --new 8 --repeats 1              # tiny (the test's)
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from DLStudio.cli.experiments import machine  # noqa: E402


def config_of(args):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": args.width, "num_attention_heads": args.heads,
            "num_key_value_heads": args.kv_heads, "num_hidden_layers": args.layers,
            "intermediate_size": args.ffn, "vocab_size": args.vocab,
            "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "tie_word_embeddings": True, "hidden_act": "silu", "bos_token_id": 0,
            "eos_token_id": 1}


def make_folder(args, path):
    """The weights both read: transformers' own folder when it is there, else ours."""
    torch.manual_seed(0)
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        return None
    config = {k: v for k, v in config_of(args).items() if k not in ("architectures",
                                                                    "model_type")}
    LlamaForCausalLM(LlamaConfig(**config)).save_pretrained(path)
    return path


def our_model(args, folder, dtype):
    from tokenizers import Tokenizer, models

    from DLStudio.containers import hub
    from DLStudio.data.hub_tokenizer import HubTokenizer
    from DLStudio.runtime.studio import DLStudio
    from DLStudio.Transformers import TransformerGPT
    if folder:
        with open(os.path.join(folder, "tokenizer.json"), "w") as f:
            f.write(Tokenizer(models.BPE()).to_str())
        return TransformerGPT.from_huggingface(folder, DLStudio(use_gpu=False, seed=0), dtype)
    torch.manual_seed(0)
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        gpt = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0),
                             vocab=HubTokenizer(Tokenizer(models.BPE()), args.vocab),
                             tokenizer="hub", **hub.settings_of(config_of(args)))
    finally:
        torch.set_default_dtype(before)
    return gpt.eval()


def peak_mb():
    """This process's peak resident memory: VmHWM, its own memory's high-water mark (the
    rusage maximum would carry the parent's over the exec of a child)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))
    except (OSError, StopIteration):                    # not Linux: the rusage figure
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def resident_mb():
    """This process's resident memory now (VmRSS; None where /proc says nothing)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))
    except (OSError, StopIteration):
        return None


def restart_peak():
    """Start the high-water mark (VmHWM) again from the memory held now: what generating
    adds is then measured apart from what reading the model cost (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def run_row(args, which, dtype_name, folder):
    """One row, in this (fresh) process: tokens per second over ``repeats`` runs after a
    warm-up, and the peak resident memory."""
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    prompt = torch.randint(2, args.vocab, (1, args.prompt), generator=torch.Generator()
                           .manual_seed(1))
    if which == "transformers":
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()

        def once():
            return model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                  max_new_tokens=args.new, min_new_tokens=args.new,
                                  do_sample=False, pad_token_id=0)[0, args.prompt:]
    else:
        from DLStudio.evaluation.generation import generate
        gpt = our_model(args, folder, dtype)

        def once():
            return generate(gpt, prompt, max_new_tokens=args.new, end_ids=(-1,))[0,
                                                                               args.prompt:]
    loaded_peak, held = peak_mb(), resident_mb()
    apart = restart_peak() and held is not None
    with torch.inference_mode():
        tokens = once()                                         # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            tokens = once()
            times.append(time.perf_counter() - start)
    generating = peak_mb()
    return {"tokens_per_s": args.new / min(times), "peak_mb": max(loaded_peak, generating),
            "generating_mb": generating - held if apart else None, "tokens": tokens.tolist()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--layers", type=int, default=30, help="N")
    p.add_argument("--width", type=int, default=576, help="M")
    p.add_argument("--heads", type=int, default=9, help="H")
    p.add_argument("--kv-heads", type=int, default=3, help="G")
    p.add_argument("--ffn", type=int, default=1536, help="SwiGLU's hidden width")
    p.add_argument("--vocab", type=int, default=49152, help="V")
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    p.add_argument("--new", type=int, default=128, help="new tokens (greedy)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs after a warm-up")
    p.add_argument("--dtypes", default="fp32,bf16", help="fp32, bf16 or both")
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add the rows to a result file (docs/results/generate_speed.json)")
    p.add_argument("--row", help=argparse.SUPPRESS)      # WHICH:DTYPE:FOLDER, in a child
    args = p.parse_args(argv)
    for name in ("layers", "width", "heads", "kv_heads", "ffn", "vocab", "prompt", "new",
                 "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.width % args.heads or args.heads % args.kv_heads:
        p.error("--heads must divide --width, and --kv-heads must divide --heads")
    dtypes = args.dtypes.split(",")
    if not set(dtypes) <= {"fp32", "bf16"}:
        p.error("--dtypes takes fp32, bf16 or both")
    if args.row:
        which, dtype, folder = args.row.split(":", 2)
        print(json.dumps(run_row(args, which, dtype, folder or None)))
        return 0
    print(f"machine: {machine()}")
    print(f"Llama-shaped, random weights: {args.layers} layers, width {args.width}, "
          f"{args.heads} heads ({args.kv_heads} key/value), F {args.ffn}, vocabulary "
          f"{args.vocab}; batch 1, prompt {args.prompt}, {args.new} new tokens (greedy); best "
          f"of {args.repeats} after a warm-up; each row alone in a fresh process")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_folder(args, tmp)
        if folder is None:
            print("transformers is not installed: its rows are left out "
                  "(pip install -e '.[parity]')")
        whos = ["ours"] + (["transformers"] if folder else [])
        for dtype in dtypes:
            for who in whos:
                cmd = [sys.executable, os.path.abspath(__file__), "--row",
                       f"{who}:{dtype}:{folder or ''}"] + [
                    f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                    ("layers", "width", "heads", "kv_heads", "ffn", "vocab", "prompt", "new",
                     "repeats")]
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode:
                    print(f"{who} {dtype}: failed\n{done.stderr[-2000:]}")
                    return 1
                rows.append((who, dtype, json.loads(done.stdout.strip().splitlines()[-1])))
    compared = []                      # each row beside transformers' in the same dtype
    for who, dtype, r in rows:
        theirs = next((t for w, d, t in rows if w == "transformers" and d == dtype), None)
        compared.append({
            "model": who, "dtype": dtype, "tokens_per_second": round(r["tokens_per_s"], 1),
            "vs_transformers": round(r["tokens_per_s"] / theirs["tokens_per_s"], 2)
            if theirs else None,
            "peak_memory_mb": round(r["peak_mb"]),
            "generating_mb": None if r.get("generating_mb") is None
            else round(r["generating_mb"]),
            "same_tokens": r["tokens"] == theirs["tokens"] if theirs else None})
    table = ["| model | dtype | tokens/s | vs transformers | peak memory (MB) | added while "
             "generating (MB) | same tokens |", "|---|---|---|---|---|---|---|"]
    for c in compared:
        ratio = "-" if c["vs_transformers"] is None else f"{c['vs_transformers']:.2f}x"
        same = {None: "-", True: "yes", False: "no"}[c["same_tokens"]]
        added = "-" if c["generating_mb"] is None else c["generating_mb"]
        table.append(f"| {c['model']} | {c['dtype']} | {c['tokens_per_second']:.1f} | {ratio} | "
                     f"{c['peak_memory_mb']} | {added} | {same} |")
    print("\n".join(table))
    if args.results:
        keep_rows(args, compared, argv)
    return 0


def keep_rows(args, compared, argv):
    """``--results``: each row, with how it was made, added to the result file."""
    from DLStudio.cli.common.results import as_typed, record
    try:
        import transformers
        version = transformers.__version__
    except ImportError:
        version = None
    command = as_typed("benchmarks/bench_generate.py", sys.argv[1:] if argv is None else argv)
    for c in compared:
        record(args.results, {**c, "transformers": version}, command)
    print(f"rows added to {args.results}")


if __name__ == "__main__":
    sys.exit(main())
