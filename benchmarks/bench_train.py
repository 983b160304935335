#!/usr/bin/env python3
"""Seconds per training iteration: our TransformerFG and TransformerPreLN against a baseline
built from PyTorch's fused ``nn.Transformer`` of the same sizes, on the same batches.

    python benchmarks/bench_train.py                                   # bundled corpus
    python benchmarks/bench_train.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz

One iteration = zero_grad, forward, loss, backward, optimiser step. The three models are run
in turn on each batch (interleaved, so that a slow spell of the machine hits all three),
the first --warmup iterations are discarded, and the median and the spread (25th-75th
percentile) are reported, with tokens per second, parameter counts and peak memory.
"""

import argparse
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from DLStudio import DLStudio, TransformerFG, TransformerPreLN  # noqa: E402
from DLStudio.cli import (  # noqa: E402
    archive_or_usage,
    existing_file,
    nonnegative_int,
    positive_int,
)
from DLStudio.datasets import BUNDLED_ARCHIVE  # noqa: E402
from DLStudio.experiments import machine  # noqa: E402
from DLStudio.tokens import padding_mask  # noqa: E402
from DLStudio.training import TranslationTrainer  # noqa: E402


class Baseline(nn.Module):
    """nn.Transformer with embeddings, sinusoidal positions and an output layer: the way a
    PyTorch tutorial builds a translator (logits at every position, padding ignored in the
    loss)."""

    def __init__(self, V_en, V_es, M, H, L, F_hidden, max_len, norm_first):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(V_en, M), nn.Embedding(V_es, M)
        pe = TransformerFG.EmbeddingsGenerator.sinusoids(max_len, M, 10000.0)
        self.register_buffer("pe", pe)
        self.transformer = nn.Transformer(M, H, L, L, F_hidden, dropout=0.0, batch_first=True,
                                          norm_first=norm_first)
        self.out = nn.Linear(M, V_es)
        self.scale = math.sqrt(M)

    def forward(self, src, tgt_in):
        src_pad, tgt_pad = padding_mask(src), padding_mask(tgt_in)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1))
        x = self.src_emb(src) * self.scale + self.pe[:src.size(1)]
        y = self.tgt_emb(tgt_in) * self.scale + self.pe[:tgt_in.size(1)]
        h = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_pad,
                             tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
                             tgt_is_causal=True)
        return self.out(h)

    def loss(self, src, tgt):
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
        logits = self(src, tgt_in)
        labels = labels.masked_fill(padding_mask(labels), -100)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", default=BUNDLED_ARCHIVE, type=existing_file)
    p.add_argument("--embedding-size", type=positive_int, default=256)
    p.add_argument("--num-layers", type=positive_int, default=4)
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--batch-size", type=positive_int, default=50)
    p.add_argument("--iters", type=positive_int, default=40, help="timed iterations per model")
    p.add_argument("--warmup", type=nonnegative_int, default=5,
                   help="iterations discarded per model")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    M, H, L = args.embedding_size, args.num_atten_heads, args.num_layers
    corpus = archive_or_usage(p, args.archive)
    dls = DLStudio(use_gpu=False, batch_size=args.batch_size, epochs=1, seed=args.seed,
                   learning_rate=1e-4)
    trainers, containers = {}, {}
    for cls in (TransformerFG, TransformerPreLN):
        x = cls(dl_studio=dls, corpus=corpus, embedding_size=M, num_warmup_steps=4000)
        enc = cls.MasterEncoder(dls, x, num_basic_encoders=L, num_atten_heads=H)
        dec = cls.MasterDecoderWithMasking(dls, x, num_basic_decoders=L, num_atten_heads=H)
        trainers[cls.__name__] = TranslationTrainer.for_container(x, enc, dec)
        containers[cls.__name__] = x
    x = containers["TransformerFG"]
    F_hidden = x.FeedForward.expansion * M
    baseline = Baseline(x.vocab_en_size, x.vocab_es_size, M, H, L, F_hidden,
                        x.max_seq_length, norm_first=False)
    base_opt = torch.optim.Adam(baseline.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def baseline_step(src, tgt):
        base_opt.zero_grad()
        loss = baseline.loss(src, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(baseline.parameters(), 1.0)
        base_opt.step()

    steps = {name: t.train_step for name, t in trainers.items()}
    steps["nn.Transformer"] = baseline_step
    batches = trainers["TransformerFG"].batches(0)
    times = {name: [] for name in steps}
    tokens = []
    for i in range(args.warmup + args.iters):
        src, tgt = next(batches)
        if i >= args.warmup:
            tokens.append(int((~padding_mask(src)).sum() + (~padding_mask(tgt)).sum()))
        for name, step in steps.items():
            t0 = time.perf_counter()
            step(src, tgt)
            if i >= args.warmup:
                times[name].append(time.perf_counter() - t0)

    def params(module):
        return sum(p.numel() for p in module.parameters())

    counts = {name: params(t.model) for name, t in trainers.items()}
    counts["nn.Transformer"] = params(baseline)
    print(f"machine: {machine()}")
    print(f"archive {args.archive}: {len(corpus.pairs)} pairs, vocabularies "
          f"{x.vocab_en_size} / {x.vocab_es_size}")
    print(f"config: embedding {M}, {L}+{L} layers, {H} heads, feed-forward {F_hidden}, "
          f"batch {args.batch_size}; {args.iters} timed iterations after {args.warmup} "
          f"warm-up; torch {torch.__version__}, {torch.get_num_threads()} threads")
    base_median = statistics.median(times["nn.Transformer"])
    print(f"{'model':<18}{'s/iter (median)':>16}{'p25-p75':>18}{'tokens/s':>10}"
          f"{'ratio':>8}{'params':>13}")
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        med = statistics.median(ts)
        print(f"{name:<18}{med:>16.4f}{f'{q[0]:.4f}-{q[2]:.4f}':>18}"
              f"{sum(tokens) / sum(ts):>10.0f}{med / base_median:>8.2f}{counts[name]:>13,}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process (all three models): {peak:.0f} MB")


if __name__ == "__main__":
    main()
