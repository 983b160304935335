#!/usr/bin/env python3
"""LoRA fine-tuning of a Marian model (OPUS-MT's layout) on the archive's pairs, ours against
PEFT on transformers' model, side by side on the same folder, batches, optimiser and
machine: seconds an optimiser step, the memory the process held, the weights that learn,
and the first step's loss on both sides (the same work: it must be the same number). The
folder is translation_speed.py's (transformers' own, opus-mt-en-es's sizes by default,
random weights). A step is the trainer's: the forward pass, the cross-entropy on the
target's pieces up to each </s>, the backward pass, Adam. PEFT is given the levers ours has:
no dropout, and the output layer computed at the learnt positions only. Each side runs
alone in a fresh process, so that its peak memory is its own.

    python benchmarks/translation_finetune_speed.py --archive data/en_es_xformer_8_90000.tar.gz
    python benchmarks/translation_finetune_speed.py --archive data/en_es_xformer_8_90000.tar.gz \\
        --results docs/results/translation_finetune_speed.json    # rows kept
    python benchmarks/translation_finetune_speed.py --width 32 --layers 1 --heads 4 --ffn 64 \\
        --vocab 300 --pieces 100 --steps 1 --warmup 1          # tiny (the test's)

It needs transformers and peft (the parity extra); without them it says so and stops.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_generate import peak_mb  # noqa: E402
from translation_speed import make_folder  # noqa: E402

from DLStudio.cli.common import archive_or_usage, existing_file, positive_int  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE  # noqa: E402
from DLStudio.data.archive import split_pairs  # noqa: E402
from DLStudio.data.vocabulary import plain_words  # noqa: E402
from DLStudio.quick import shrink  # noqa: E402

SIDES = {"ours": "ours (TransformerFG), LoRA", "peft": "PEFT on transformers, LoRA"}


def batches(vocab, pairs, size, count):
    """``count`` batches of ``size`` pairs, as the folder's tokenizer reads them."""
    out = []
    for i in range(count):
        rows = pairs[i * size:(i + 1) * size]
        out.append((vocab.encode([en for en, _ in rows], "en"),
                    vocab.encode([es for _, es in rows], "es")))
    return out


def side(args, name):
    """One side's step (its loss function, its model) on the folder, LoRA on."""
    from DLStudio.runtime.studio import DLStudio
    from DLStudio.Transformers import TransformerFG
    xformer, ours, _ = TransformerFG.from_huggingface(args.folder, DLStudio(use_gpu=False,
                                                                            seed=0))
    targets = args.targets.split(",")
    if name == "ours":
        ours.train()
        learning = ours.add_lora(rank=args.rank, alpha=2 * args.rank, targets=targets)

        def loss(src, tgt):
            total, count = ours.loss(src, tgt)
            return total / count
        return xformer.vocab, ours, loss, learning
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSeq2SeqLM
    hf = AutoModelForSeq2SeqLM.from_pretrained(args.folder, dropout=0.0, attention_dropout=0.0,
                                               activation_dropout=0.0)
    model = get_peft_model(hf, LoraConfig(r=args.rank, lora_alpha=2 * args.rank,
                                          target_modules=targets, lora_dropout=0.0,
                                          task_type="SEQ_2_SEQ_LM")).train()
    inner, vocab = model.base_model.model, xformer.vocab
    learning = sum(p.numel() for p in model.parameters() if p.requires_grad)

    def loss(src, tgt):            # the output layer at the learnt positions only, as ours
        labels = tgt[:, 1:]
        keep = labels != vocab.pad_id
        hidden = inner.model(input_ids=src, attention_mask=(src != vocab.pad_id).long(),
                             decoder_input_ids=tgt[:, :-1]).last_hidden_state
        logits = inner.lm_head(hidden[keep]) + inner.final_logits_bias[0]
        return torch.nn.functional.cross_entropy(logits, labels[keep])
    return vocab, model, loss, learning


def run_side(args, name):
    """This (fresh) process's row: the mean seconds of ``args.steps`` steps after
    ``args.warmup``, the peak memory, the weights that learn, the first loss."""
    torch.manual_seed(0)
    vocab, model, loss, learning = side(args, name)
    with open(args.pairs, encoding="utf-8") as f:
        pairs = json.load(f)
    data = batches(vocab, pairs, args.batch_size, args.warmup + args.steps)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    times, first = [], None
    for step, (src, tgt) in enumerate(data):
        start = time.perf_counter()
        optimizer.zero_grad()
        value = loss(src, tgt)
        value.backward()
        optimizer.step()
        first = float(value) if first is None else first
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    return {"learning": learning, "weights": sum(p.numel() for p in model.parameters()),
            "seconds_per_step": sum(times) / len(times), "peak_mb": peak_mb(),
            "first_loss": first, "tokens": sum(int((t[:, 1:] != vocab.pad_id).sum())
                                               for _, t in data) / len(data)}


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--archive", default=BUNDLED_ARCHIVE, type=existing_file)
    p.add_argument("--targets", default="q_proj,k_proj,v_proj,out_proj",
                   help="LoRA's modules, Marian's names (both attentions)")
    p.add_argument("--rank", type=positive_int, default=8, help="alpha: twice it")
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--steps", type=positive_int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--width", type=positive_int, default=512)
    p.add_argument("--layers", type=positive_int, default=6)
    p.add_argument("--heads", type=positive_int, default=8)
    p.add_argument("--ffn", type=positive_int, default=2048)
    p.add_argument("--vocab", type=positive_int, default=65001)
    p.add_argument("--pieces", type=positive_int, default=8000)
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add the rows to a result file")
    p.add_argument("--side", help=argparse.SUPPRESS)            # in a child: ours | peft
    p.add_argument("--folder", help=argparse.SUPPRESS)
    p.add_argument("--pairs", help=argparse.SUPPRESS)
    return p


def main(argv=None):
    p = parser()
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes
    if args.side:
        print(json.dumps(run_side(args, args.side)))
        return 0
    corpus = archive_or_usage(p, args.archive)
    try:
        import peft  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("translation_finetune_speed.py needs transformers and peft (pip install -e "
              "'.[parity]'): nothing measured")
        return 0
    training, _ = split_pairs(corpus.pairs, 0.05, 0)
    pairs = [(" ".join(plain_words(en)), " ".join(plain_words(es))) for en, es in training]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        args.max_length = 32                      # (translation_speed.py's folder asks it)
        make_folder(args, work, [en for en, _ in pairs], [es for _, es in pairs])
        with open(os.path.join(work, "pairs.json"), "w", encoding="utf-8") as f:
            json.dump(pairs[:args.batch_size * (args.warmup + args.steps)], f)
        for name in SIDES:
            cmd = [sys.executable, os.path.abspath(__file__), "--side", name,
                   "--folder", work, "--pairs", os.path.join(work, "pairs.json"),
                   f"--targets={args.targets}", f"--rank={args.rank}",
                   f"--batch-size={args.batch_size}", f"--steps={args.steps}",
                   f"--warmup={args.warmup}"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                print(f"{name}: failed\n{done.stderr[-2000:]}")
                return 1
            rows.append(dict(json.loads(done.stdout.strip().splitlines()[-1]), side=name))
    same = abs(rows[0]["first_loss"] - rows[1]["first_loss"]) <= 1e-4 * rows[1]["first_loss"]
    print(f"\n{machine()}; a Marian folder {args.layers}+{args.layers} layers, width "
          f"{args.width}, {args.heads} heads, F {args.ffn}, {args.vocab} ids (random weights); "
          f"batches of {args.batch_size} training pairs of {args.archive} (about "
          f"{rows[0]['tokens']:.0f} target pieces each), LoRA r={args.rank} on {args.targets}, "
          f"Adam; mean of {args.steps} steps after {args.warmup}; each side alone in a fresh "
          "process (peak memory: its maximum resident set, torch included)\n")
    print("| fine-tuning | weights that learn | seconds a step | peak memory (GB) | "
          "first loss |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {SIDES[r['side']]} | {r['learning']:,} | {r['seconds_per_step']:.3f} | "
              f"{r['peak_mb'] / 1024:.2f} | {r['first_loss']:.5f} |")
    print(f"\nthe same first loss on both sides: {'yes' if same else 'NO'}")
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        command = as_typed("benchmarks/translation_finetune_speed.py",
                           sys.argv[1:] if argv is None else argv)
        for r in rows:
            record(args.results, {"fine_tuning": SIDES[r["side"]], "targets": args.targets,
                                  "rank": args.rank, "batch_size": args.batch_size,
                                  "learning": r["learning"],
                                  "seconds_per_step": round(r["seconds_per_step"], 3),
                                  "peak_memory_gb": round(r["peak_mb"] / 1024, 2),
                                  "first_loss": round(r["first_loss"], 5), "same_loss": same,
                                  "sizes": {k: getattr(args, k) for k in (
                                      "width", "layers", "heads", "ffn", "vocab")}}, command)
        print(f"rows added to {args.results}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
