#!/usr/bin/env python3
"""Greedy generation at batch 1, ours against transformers' ``generate``, side by side on
the same weights, machine and threads, in each precision: a Llama-shaped model of
SmolLM2-135M's sizes with random weights (30 layers, width 576, 9 heads, 3 key/value heads,
F 1,536, vocabulary 49,152), a prompt of 32 tokens and 128 new ones. Each row runs in a
fresh process of its own, so that its peak memory (the process's maximum resident set) is
its own; "added while generating" is how far the resident memory rose above what the loaded
model held (the key/value cache, activations, and any copy of the weights). Without
transformers its rows are left out (said).

Precisions (``--dtypes``): fp32; bf16 (by default only where the CPU computes it natively,
AVX512-BF16 or AMX: said); int8 (weights in 8 bits, DLStudio/model/quantize.py, with the
fastest kernel this CPU has: FBGEMM's, which rounds the activations to 8 bits too);
int8-wo (the same weights through torch's weight-only _weight_int8pack_mm, activations as
they are); int4 (group-wise, group 32, torch's int4 kernel). transformers' model in int8 is
torchao's weight-only int8 (``Int8WeightOnlyConfig``) where torchao is installed (the
bench extra). The cost of the bytes saved: each row's perplexity on a held-out text (16
sequences of 64 tokens sampled from the fp32 model, temperature 1, fixed seed: the fp32
model's perplexity on its own samples is the floor) and its largest logit change against our
fp32 model's logits on that text, over the logits' largest magnitude.

The bound: at batch 1 every step reads every weight once (the output layer's matrix
included; a tied embedding counted once; an embedding table otherwise not, a step reads
one row of it), so no implementation generates faster than the machine's memory bandwidth
over the weights' bytes, counted in each row's own bytes per weight. The bandwidth is
measured first (all threads summing a buffer far larger than the caches, best of several),
and each row prints its share of the bound. Ours lays the widening matrices out column by
column while it generates at batch 1 or 2 in fp32 (DLStudio/runtime/weight_layout.py), a
lever any model can take: the row "transformers-columns" is transformers given it too, and
SAME_LAYOUT_RATIO is ours over that row. The last lines: GENERATE_RATIO (ours over
transformers as it is shipped, fp32, the first sizes) and BOUND_SHARE (ours, the same row,
over the bound), INT8_SPEEDUP (our int8 over our fp32 tokens/s) and INT8_BOUND_SHARE.

    python benchmarks/bench_generate.py                       # about eight minutes
    python benchmarks/bench_generate.py --full                # also batch 8, Qwen2.5-0.5B's sizes
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
from DLStudio.quick import shrink  # noqa: E402


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


def memory_bandwidth(mb=1024, tries=5):
    """Bytes a second this machine reads from memory: all threads summing a buffer of ``mb``
    MB (far larger than the caches), the best of ``tries``."""
    buffer = torch.ones(mb * 2**20 // 4)
    buffer.sum()                                                    # pages touched once
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        buffer.sum()
        best = min(best, time.perf_counter() - start)
    return buffer.numel() * 4 / best


#: Each precision: the dtype the model is read in, and how its weights are then kept.
PRECISIONS = {"fp32": (torch.float32, None), "bf16": (torch.bfloat16, None),
              "int8": (torch.float32, ("int8", "auto")),
              "int8-wo": (torch.float32, ("int8", "int8pack")),
              "int4": (torch.float32, ("int4", "auto"))}


def native_bf16():
    """Whether this CPU computes bf16 products natively (AVX512-BF16 or AMX), from its flags."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def run_row(args, which, precision, folder, work):
    """One row, in this (fresh) process: tokens per second over ``repeats`` runs after a
    warm-up, the peak resident memory, and the logits on the held-out text (``work``: the
    fp32 row samples that text and keeps its logits there, the later rows read them)."""
    dtype, quantized = PRECISIONS[precision]
    prompt = torch.randint(2, args.vocab, (args.batch, args.prompt),
                           generator=torch.Generator().manual_seed(1))
    if which.startswith("transformers") or which == "torchao":
        from transformers import AutoModelForCausalLM

        from DLStudio.runtime.weight_layout import read_by_columns
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
        if which == "torchao":
            from torchao.quantization import Int8WeightOnlyConfig, quantize_
            quantize_(model, Int8WeightOnlyConfig())

        def once():                      # "transformers-columns": our layout lever given
            with read_by_columns(model, which == "transformers-columns"):
                return model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                      max_new_tokens=args.new, min_new_tokens=args.new,
                                      do_sample=False, pad_token_id=0)[:, args.prompt:]

        def logits_of(ids):
            return model(ids).logits.float()
    else:
        from DLStudio.evaluation.generation import generate
        gpt = our_model(args, folder, dtype)
        if quantized:
            gpt.quantize(quantized[0], kernel=quantized[1])
        model = gpt

        def once():
            return generate(gpt, prompt, max_new_tokens=args.new, end_ids=(-1,))[:,
                                                                               args.prompt:]

        def logits_of(ids):
            return gpt(ids).float()
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
    with torch.inference_mode():
        quality = held_out_quality(args, which, precision, work, model, logits_of)
    return {"tokens_per_s": args.new / min(times), "peak_mb": max(loaded_peak, generating),
            "generating_mb": generating - held if apart else None, "tokens": tokens.tolist(),
            "weight_bytes": weight_bytes(model), **quality}


HELD_OUT = (16, 64)      # sequences, tokens: the held-out text the precisions are scored on


def held_out_quality(args, which, precision, work, model, logits_of):
    """Perplexity on the held-out text and the largest logit change against our fp32
    model's logits there (relative to their largest magnitude); the fp32 row of ours first
    samples the text (temperature 1) and keeps its logits. Nothing where there is no work
    folder or no fp32 row of ours ran first."""
    text, kept = os.path.join(work, "held_out.pt"), os.path.join(work, "fp32_logits.pt")
    if which == "ours" and precision == "fp32":
        from DLStudio.evaluation.generation import generate
        count, length = HELD_OUT
        start = torch.randint(2, args.vocab, (count, 1),
                              generator=torch.Generator().manual_seed(2))
        ids = generate(model, start, max_new_tokens=min(length, model.max_seq_length) - 1,
                       temperature=1.0, generator=torch.Generator().manual_seed(3),
                       end_ids=(-1,))
        torch.save(ids, text)
        torch.save(logits_of(ids), kept)
    if not os.path.exists(text):
        return {}
    ids, reference = torch.load(text), torch.load(kept)
    logits = logits_of(ids)
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                                             ids[:, 1:].reshape(-1))
    return {"perplexity": float(loss.exp()),
            "logit_change": float((logits - reference).abs().max() / reference.abs().max())}


def weight_bytes(model):
    """The bytes a step at batch 1 reads (quantize.py's count for ours: a QuantizedLinear's
    integers and scales; transformers' and torchao's: every parameter once, a tied matrix
    once, an untied embedding table not; torchao's int8 weights at a byte each)."""
    if hasattr(model, "quantized_as"):
        return model.weight_bytes()
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings().weight
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) in seen or (p is embedding and output is not embedding):
            continue
        seen.add(id(p))
        inner = getattr(p, "qdata", None)               # torchao's Int8Tensor: its int8
        if inner is not None:
            total += inner.numel() * inner.element_size() + sum(
                t.numel() * t.element_size() for t in (getattr(p, "scale", None),)
                if isinstance(t, torch.Tensor))
        else:
            total += p.numel() * p.element_size()
    return total


DEFAULT = " (default: %(default)s)"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--layers", type=int, default=30, help="N" + DEFAULT)
    p.add_argument("--width", type=int, default=576, help="M" + DEFAULT)
    p.add_argument("--heads", type=int, default=9, help="H" + DEFAULT)
    p.add_argument("--kv-heads", type=int, default=3, help="G" + DEFAULT)
    p.add_argument("--ffn", type=int, default=1536, help="SwiGLU's hidden width" + DEFAULT)
    p.add_argument("--vocab", type=int, default=49152, help="V" + DEFAULT)
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens" + DEFAULT)
    p.add_argument("--new", type=int, default=128, help="new tokens (greedy)" + DEFAULT)
    p.add_argument("--repeats", type=int, default=3, help="timed runs after a warm-up" + DEFAULT)
    p.add_argument("--dtypes", default=None,
                   help="precisions, comma-separated: fp32, bf16, int8, int8-wo, int4 "
                        "(default: all; bf16 only where the CPU computes it natively)")
    p.add_argument("--batch", type=int, default=1, help="prompts generated together" + DEFAULT)
    p.add_argument("--full", action="store_true",
                   help="also batch 8, and Qwen2.5-0.5B's sizes at batch 1 and 8")
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add the rows to a result file (docs/results/generate_speed.json)")
    p.add_argument("--row", help=argparse.SUPPRESS)      # WHICH:DTYPE:FOLDER, in a child
    p.add_argument("--work", default="", help=argparse.SUPPRESS)   # the held-out text's folder
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes
    for name in SIZES + ("prompt", "new", "repeats", "batch"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.width % args.heads or args.heads % args.kv_heads:
        p.error("--heads must divide --width, and --kv-heads must divide --heads")
    native = native_bf16()
    dtypes = (args.dtypes or ",".join(p for p in PRECISIONS if p != "bf16" or native)
              ).split(",")
    if not set(dtypes) <= set(PRECISIONS) or not dtypes:
        p.error(f"--dtypes takes some of {', '.join(PRECISIONS)}, comma-separated")
    dtypes.sort(key=list(PRECISIONS).index)             # fp32 first: it samples the text
    if args.row:
        which, dtype, folder = args.row.split(":", 2)
        print(json.dumps(run_row(args, which, dtype, folder or None, args.work)))
        return 0
    print(f"machine: {machine()}")
    print(f"bf16 natively (AVX512-BF16 or AMX): {'yes' if native else 'no'}"
          + ("" if native or "bf16" in dtypes else " (its rows are left out; --dtypes "
             "fp32,bf16 runs them)"))
    bandwidth = memory_bandwidth()
    print(f"memory bandwidth: {bandwidth / 1e9:.1f} GB/s (all threads summing 1 GB, the best "
          "of 5)")
    mine = {name: getattr(args, name) for name in SIZES}
    label = "SmolLM2-135M" if mine == SMOLLM2_135M else "given"
    configs = [(label, mine, args.batch)]
    if args.full:
        configs += [(label, mine, 8), ("Qwen2.5-0.5B", QWEN_05B, 1),
                    ("Qwen2.5-0.5B", QWEN_05B, 8)]
    compared = []
    for label, sizes, batch in configs:
        shown = argparse.Namespace(**{**vars(args), **sizes, "batch": batch})
        print(f"\nLlama-shaped, random weights ({label}): {shown.layers} layers, width "
              f"{shown.width}, {shown.heads} heads ({shown.kv_heads} key/value), F {shown.ffn}, "
              f"vocabulary {shown.vocab}; batch {batch}, prompt {args.prompt}, {args.new} new "
              f"tokens (greedy); best of {args.repeats} after a warm-up; each row alone in a "
              "fresh process")
        rows = rows_of(shown, dtypes)
        if rows is None:
            return 1
        compared += table_of(rows, bandwidth, shown, label)
    first = next((c for c in compared if c["model"] == "ours" and c["dtype"] == "fp32"), None)
    int8 = next((c for c in compared if c["model"] == "ours" and c["dtype"] == "int8"), None)
    if args.results:
        keep_rows(args, compared, argv)
    if first is not None:
        same = next((c for c in compared if c["model"] == "transformers-columns"), None)
        if same is not None:       # the baseline given the same weight layout (a lever of ours)
            print(f"SAME_LAYOUT_RATIO {first['tokens_per_second'] / same['tokens_per_second']:.2f}")
        if first["vs_transformers"] is not None:
            print(f"GENERATE_RATIO {first['vs_transformers']:.2f}")
        print(f"BOUND_SHARE {first['bound_share']:.2f}")
    if first is not None and int8 is not None:
        print(f"INT8_SPEEDUP {int8['tokens_per_second'] / first['tokens_per_second']:.2f}")
        print(f"INT8_BOUND_SHARE {int8['bound_share']:.2f}")
    return 0


SIZES = ("layers", "width", "heads", "kv_heads", "ffn", "vocab")
#: The default sizes: SmolLM2-135M's.
SMOLLM2_135M = {"layers": 30, "width": 576, "heads": 9, "kv_heads": 3, "ffn": 1536,
                "vocab": 49152}
#: Qwen2.5-0.5B's sizes (--full), Llama-shaped (its query/key/value biases left out).
QWEN_05B = {"layers": 24, "width": 896, "heads": 14, "kv_heads": 2, "ffn": 4864,
            "vocab": 151936}


def rows_of(args, dtypes):
    """Each (who, dtype, its child process's figures), or None when a child failed."""
    import importlib.util
    rows = []
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as work:
        folder = make_folder(args, tmp)
        if folder is None:
            print("transformers is not installed: its rows are left out "
                  "(pip install -e '.[parity]')")
        torchao = folder and importlib.util.find_spec("torchao") is not None
        if folder and "int8" in dtypes and not torchao:
            print("torchao is not installed: its int8 row is left out (pip install -e "
                  "'.[bench]')")
        for dtype in dtypes:
            whos = ["ours"] + (["transformers"] if folder and dtype in ("fp32", "bf16")
                               else []) + (
                ["transformers-columns"] if folder and dtype == "fp32" and args.batch <= 2
                else []) + (["torchao"] if torchao and dtype == "int8" else [])
            for who in whos:
                cmd = [sys.executable, os.path.abspath(__file__), "--work", work, "--row",
                       f"{who}:{dtype}:{folder or ''}"] + [
                    f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                    SIZES + ("prompt", "new", "repeats", "batch")]
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode:
                    print(f"{who} {dtype}: failed\n{done.stderr[-2000:]}")
                    return None
                rows.append((who, dtype, json.loads(done.stdout.strip().splitlines()[-1])))
    return rows


def table_of(rows, bandwidth, args, label):
    """The rows side by side (each beside transformers' in the same precision: in int8,
    torchao's on transformers' model), printed."""
    compared = []
    for who, dtype, r in rows:
        theirs = next((t for w, d, t in rows if (w, d) in (("transformers", dtype),
                                                           ("torchao", dtype.split("-")[0]))),
                      None)
        bound = bandwidth / r["weight_bytes"] * args.batch      # tokens a second, all rows
        compared.append({
            "model": who, "dtype": dtype, "sizes": label, "batch": args.batch,
            "tokens_per_second": round(r["tokens_per_s"] * args.batch, 1),
            "vs_transformers": round(r["tokens_per_s"] / theirs["tokens_per_s"], 2)
            if theirs else None,
            "bound_tokens_per_second": round(bound, 1),
            "bound_share": round(r["tokens_per_s"] * args.batch / bound, 2),
            "bandwidth_gb_s": round(bandwidth / 1e9, 1),
            "peak_memory_mb": round(r["peak_mb"]),
            "generating_mb": None if r.get("generating_mb") is None
            else round(r["generating_mb"]),
            "same_tokens": r["tokens"] == theirs["tokens"] if theirs else None,
            "perplexity": None if "perplexity" not in r else round(r["perplexity"], 2),
            "logit_change": None if "logit_change" not in r else round(r["logit_change"], 4),
            "bf16_native": native_bf16() if dtype == "bf16" else None})
    table = ["| model | dtype | tokens/s | vs transformers | bound (tokens/s) | of the bound | "
             "peak memory (MB) | added while generating (MB) | same tokens | held-out "
             "perplexity | largest logit change |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in compared:
        ratio = "-" if c["vs_transformers"] is None else f"{c['vs_transformers']:.2f}x"
        same = {None: "-", True: "yes", False: "no"}[c["same_tokens"]]
        added = "-" if c["generating_mb"] is None else c["generating_mb"]
        ppl = "-" if c["perplexity"] is None else f"{c['perplexity']:.2f}"
        change = "-" if c["logit_change"] is None else f"{c['logit_change']:.4f}"
        table.append(f"| {c['model']} | {c['dtype']} | {c['tokens_per_second']:.1f} | {ratio} | "
                     f"{c['bound_tokens_per_second']:.1f} | {c['bound_share']:.2f} | "
                     f"{c['peak_memory_mb']} | {added} | {same} | {ppl} | {change} |")
    print("\n".join(table))
    return compared


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
