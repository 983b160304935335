#!/usr/bin/env python3
"""Seconds per training iteration, side by side on the same batches: ours against PyTorch's
nn.Transformer of equal size, and how close each comes to the machine's matmul peak.

    python benchmarks/bench_train.py                                   # bundled corpus
    python benchmarks/bench_train.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz
    python benchmarks/bench_train.py --precision bf16                  # all rows in bf16
    python benchmarks/bench_train.py --cpu        # on the CPU where a GPU is (default: CUDA)

The rows (one model each, all built with the same sizes):
  ours, sliced heads          DLStudio's heads: head i reads slice i of the embedding, no W^O
  ours, sliced, readable      the same with softmax(QK^T)V written out (fused = False)
  ours, full-width heads      --full-width-heads: standard multi-head attention with W^O
  nn.Transformer, same size   the full-width model's architecture and parameter count, trained
                              with torch's clipping, then fused Adam, logits on the same
                              positions as ours
  nn.Transformer, clipped in Adam   the same, trained as ours is: the clipping inside the
                              fused Adam step (DLStudio.training.schedule.ClippingAdam)
  nn.Transformer, equal terms every lever of ours that is not architecture: the clipping
                              inside Adam and the loss with its closed-form backward
                              (DLStudio.model.summed_loss); under bf16 both it and ours take
                              PyTorch's fused attention kernel
  nn.Transformer, tutorial    logits at every position, plain Adam (a PyTorch tutorial's way)
The ratio column divides medians by "nn.Transformer, same size"; "paired" is the median of
each batch's time over the reference's on the same batch (steadier when the machine's speed
drifts). The last line, FAIR_RATIO, is the paired median of "ours, full-width heads" over
"nn.Transformer, equal terms": the architecture alone. One iteration = zero_grad, forward,
loss, backward, clip, optimiser step; the models take turns on each batch, the first
--warmup iterations are discarded, and the median and the 25th-75th percentiles are shown.
FLOPs of each iteration are counted by torch.utils.flop_counter.FlopCounterMode on the timed
batches (forward and backward), and divided by the time and by the peak of a large torch.mm
in the same precision, measured here.
"""

import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import (
    FlopCounterMode,
    flop_registry,
    register_flop_formula,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from DLStudio import DLStudio, TransformerFG, TransformerPreLN  # noqa: E402
from DLStudio.cli import (  # noqa: E402
    archive_or_usage,
    existing_file,
    nonnegative_int,
    positive_int,
)
from DLStudio.cli.common import Parser  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE  # noqa: E402
from DLStudio.model.summed_loss import summed_cross_entropy  # noqa: E402
from DLStudio.model.tokens import padding_mask  # noqa: E402
from DLStudio.runtime.precision import Precision, native_bf16  # noqa: E402
from DLStudio.training.schedule import adam, clip_gradient_norm  # noqa: E402

aten = torch.ops.aten


def _cpu_sdpa_flop(q, k, v, *args, out_shape=None, **kwargs):
    return sdpa_flop_count(q, k, v)


def _cpu_sdpa_backward_flop(grad_out, q, k, v, *args, out_shape=None, **kwargs):
    return sdpa_backward_flop_count(grad_out, q, k, v)


# The CPU's fused attention kernel has no FLOP formula in torch.utils.flop_counter: give it
# the one its CUDA kernels have (2 matmuls forward, 5 backward), once per process.
for _op, _formula in ((aten._scaled_dot_product_flash_attention_for_cpu, _cpu_sdpa_flop),
                      (aten._scaled_dot_product_flash_attention_for_cpu_backward,
                       _cpu_sdpa_backward_flop)):
    if _op not in flop_registry:
        register_flop_formula(_op)(_formula)


class Baseline(nn.Module):
    """nn.Transformer with embeddings, sinusoidal positions and an output layer.

    fair=True: logits only at the target positions ours computes them at (up to each
    sentence's EOS), and the optimiser is ours (fused Adam). fair=False: a tutorial's way,
    logits at every position (padding ignored by the loss) and plain Adam.
    """

    def __init__(self, V_en, V_es, M, H, L, F_hidden, max_len, norm_first, fair=True,
                 closed_form=False):
        super().__init__()
        self.closed_form = closed_form
        self.src_emb, self.tgt_emb = nn.Embedding(V_en, M), nn.Embedding(V_es, M)
        self.register_buffer("pe", TransformerFG.EmbeddingsGenerator.sinusoids(
            max_len, M, 10000.0))
        self.transformer = nn.Transformer(M, H, L, L, F_hidden, dropout=0.0, batch_first=True,
                                          norm_first=norm_first)
        self.out = nn.Linear(M, V_es)
        self.scale, self.fair = math.sqrt(M), fair

    def hidden(self, src, tgt_in):
        src_pad, tgt_pad = padding_mask(src), padding_mask(tgt_in)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), dtype=torch.bool,
                                                                device=tgt_in.device)
        x = self.src_emb(src) * self.scale + self.pe[:src.size(1)]
        y = self.tgt_emb(tgt_in) * self.scale + self.pe[:tgt_in.size(1)]
        return self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_pad,
                                tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
                                tgt_is_causal=True)                          # (B, T_tgt, M)

    def loss(self, src, tgt):
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
        h = self.hidden(src, tgt_in)
        if self.fair:
            keep = ~padding_mask(labels)
            if self.closed_form:                       # ours: the sum, then the mean
                return summed_cross_entropy(self.out(h[keep]), labels[keep]) / int(keep.sum())
            return F.cross_entropy(self.out(h[keep]), labels[keep])
        logits = self.out(h)
        labels = labels.masked_fill(padding_mask(labels), -100)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))

    def final_norms(self):
        """Parameters of nn.Transformer's final LayerNorms (ours has them only pre-LN)."""
        return sum(p.numel() for n in (self.transformer.encoder.norm, self.transformer.decoder.norm)
                   for p in n.parameters())


def baseline_step(model, optimizer, precision, inside=False):
    """One iteration of nn.Transformer: torch's clipping then the step, or (``inside``) the
    clipping inside our fused Adam's step, as our trainer does."""
    def step(src, tgt):
        optimizer.zero_grad()
        with precision.autocast():
            loss = model.loss(src, tgt)
        loss.backward()
        clip_gradient_norm(model.parameters(), 1.0, optimizer if inside else None)
        optimizer.step()
    return step


def synchronize(device):
    """Wait for the device's queued work (a GPU's kernels run after the call returns)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def matmul_peak(dtype, n=2048, seconds=1.0, device="cpu"):
    """FLOP/s of a large torch.mm (n x n) in ``dtype``, repeated for about ``seconds``
    (twice at least): the machine's dense matmul peak."""
    device = torch.device(device)
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    torch.mm(a, b)
    synchronize(device)
    reps, t0 = 0, time.perf_counter()
    while reps < 2 or time.perf_counter() - t0 < seconds:
        torch.mm(a, b)
        reps += 1
        synchronize(device)
    return 2 * n ** 3 * reps / (time.perf_counter() - t0)


def counted_flops(loss_fn, model, batches):
    """Forward and backward FLOPs of ``loss_fn`` on each batch (gradients thrown away)."""
    total = 0
    for src, tgt in batches:
        with FlopCounterMode(display=False) as counter:
            loss_fn(src, tgt).backward()
        total += counter.get_total_flops()
        model.zero_grad(set_to_none=True)
    return total


#: The baseline given every lever of ours that is not the architecture (FAIR_RATIO's).
EQUAL_TERMS = "nn.Transformer, equal terms"


def build(args, corpus, dls, precision):
    """{row name: (step function, loss function, model)} and the fair baseline."""
    M, H, L = args.embedding_size, args.num_atten_heads, args.num_layers
    cls = {"FG": TransformerFG, "PreLN": TransformerPreLN}[args.variant]
    rows = {}
    ours = [("ours, sliced heads", False, True, False), ("ours, sliced, readable", False, False,
                                                         False),
            ("ours, full-width heads", True, True, False)]
    if args.compile:
        ours.append(("ours, sliced, compiled", False, True, True))
    for name, full_width, fused, compiled in ours:
        torch.manual_seed(args.seed)
        x = cls(dl_studio=dls, corpus=corpus, embedding_size=M, num_warmup_steps=4000,
                full_width_heads=full_width)
        enc = cls.MasterEncoder(dls, x, num_basic_encoders=L, num_atten_heads=H)
        dec = cls.MasterDecoderWithMasking(dls, x, num_basic_decoders=L, num_atten_heads=H)
        trainer = x.trainer(enc, dec, precision=precision.name,
                                                   compile=compiled)
        for m in trainer.model.modules():
            if hasattr(m, "fused"):
                m.fused = fused
                m.fused_cpu_bf16 = fused        # bf16 on a CPU: the kernel nn.Transformer takes
        rows[name] = (trainer.train_step, trainer.loss_on_batch, trainer.model)
    F_hidden = x.FeedForward.expansion * M
    for name, fair, inside, closed in (("nn.Transformer, same size", True, False, False),
                                       ("nn.Transformer, clipped in Adam", True, True, False),
                                       (EQUAL_TERMS, True, True, True),
                                       ("nn.Transformer, tutorial", False, False, False)):
        torch.manual_seed(args.seed)
        base = Baseline(x.vocab_en_size, x.vocab_es_size, M, H, L, F_hidden, x.max_seq_length,
                        norm_first=cls.norm_first, fair=fair, closed_form=closed).to(dls.device)
        opt = (adam(base.parameters(), 1e-4, x.optimizer_params) if fair else
               torch.optim.Adam(base.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9))
        rows[name] = (baseline_step(base, opt, precision, inside), base.loss, base)
    return rows, trainer, x, F_hidden


def main():
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", default=BUNDLED_ARCHIVE, type=existing_file)
    p.add_argument("--variant", choices=("FG", "PreLN"), default="FG")
    p.add_argument("--embedding-size", type=positive_int, default=256)
    p.add_argument("--num-layers", type=positive_int, default=4)
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--batch-size", type=positive_int, default=50)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="every row's forward pass (autocast), and the matmul peak's dtype")
    p.add_argument("--iters", type=positive_int, default=40, help="timed iterations per model")
    p.add_argument("--warmup", type=nonnegative_int, default=5,
                   help="iterations discarded per model")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch threads (default: torch's)")
    p.add_argument("--peak-size", type=positive_int, default=2048,
                   help="n of the n x n matmul that measures the peak")
    p.add_argument("--compile", action="store_true",
                   help="add a row: ours (sliced heads) through torch.compile; its compile "
                        "time is the warm-up's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true", help="the CPU even where CUDA is")
    p.add_argument("--results", metavar="FILE.json",
                   help="add the rows to a result file (docs/results/train_speed.json)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = archive_or_usage(p, args.archive)
    dls = DLStudio(use_gpu=not args.cpu, batch_size=args.batch_size, epochs=1, seed=args.seed,
                   learning_rate=1e-4)
    precision = Precision(args.precision, dls.device)
    rows, trainer, x, F_hidden = build(args, corpus, dls, precision)

    batches, timed = trainer.batches(0), []
    times = {name: [] for name in rows}
    warmup = dict.fromkeys(rows, 0.0)
    for i in range(args.warmup + args.iters):
        src, tgt = next(batches)
        if i >= args.warmup:
            timed.append((src, tgt))
        for name, (step, _, _) in rows.items():
            synchronize(dls.device)
            t0 = time.perf_counter()
            step(src, tgt)
            synchronize(dls.device)
            if i >= args.warmup:
                times[name].append(time.perf_counter() - t0)
            else:
                warmup[name] += time.perf_counter() - t0
    tokens = sum(int((~padding_mask(s)).sum() + (~padding_mask(t)).sum()) for s, t in timed)
    flops = {}
    for name, (_, loss_fn, model) in rows.items():
        with precision.autocast():
            flops[name] = counted_flops(loss_fn, model, timed)
    peak = matmul_peak(precision.dtype, args.peak_size, device=dls.device)
    other = torch.bfloat16 if precision.dtype == torch.float32 else torch.float32
    other_peak = matmul_peak(other, min(args.peak_size, 1024), device=dls.device)

    def params(model):
        return sum(q.numel() for q in model.parameters())

    M, H, L = args.embedding_size, args.num_atten_heads, args.num_layers
    print(f"machine: {machine()}")
    print(f"archive {args.archive}: {len(corpus.pairs)} pairs, vocabularies "
          f"{x.vocab_en_size} / {x.vocab_es_size}")
    print(f"config: {args.variant}, embedding {M}, {L}+{L} layers, {H} heads, feed-forward "
          f"{F_hidden}, batch {args.batch_size}, {args.precision}; {args.iters} timed "
          f"iterations after {args.warmup} warm-up; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"matmul peak ({args.peak_size}x{args.peak_size} torch.mm, {args.precision}): "
          f"{peak / 1e9:.1f} GFLOP/s; in {str(other)[6:]} (up to 1024x1024): "
          f"{other_peak / 1e9:.1f} GFLOP/s; native bf16: {native_bf16(dls.device)}")
    ref = statistics.median(times["nn.Transformer, same size"])
    paired = {name: statistics.median(t / r for t, r in zip(ts, times["nn.Transformer, same size"]))
              for name, ts in times.items()}      # each batch's time over the reference's
    print(f"{'model':<33}{'s/iter':>8}{'p25-p75':>15}{'tokens/s':>10}{'ratio':>7}{'paired':>7}"
          f"{'params':>12}{'GFLOP/it':>10}{'GFLOP/s':>9}{'of peak':>9}")
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        med = statistics.median(ts)
        per_iter = flops[name] / len(timed)
        achieved = flops[name] / sum(ts)
        print(f"{name:<33}{med:>8.4f}{f'{q[0]:.3f}-{q[2]:.3f}':>15}"
              f"{tokens / sum(ts):>10.0f}{med / ref:>7.2f}{paired[name]:>7.2f}"
              f"{params(rows[name][2]):>12,}"
              f"{per_iter / 1e9:>10.2f}{achieved / 1e9:>9.1f}{achieved / peak:>9.0%}")
    ours = params(rows["ours, full-width heads"][2])
    base = rows["nn.Transformer, same size"][2]
    theirs = params(base) - base.final_norms()
    print(f"equal size: ours with full-width heads {ours:,} parameters, nn.Transformer "
          f"{theirs:,} without its final LayerNorms ({base.final_norms():,}): "
          f"{abs(ours - theirs) / theirs:.2%} apart")
    print("warm-up iterations, seconds in all: " + ", ".join(
        f"{name} {t:.1f}" for name, t in warmup.items()))
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process (all the models): {peak_rss:.0f} MB")
    equal = {name: statistics.median(t / e for t, e in zip(ts, times[EQUAL_TERMS]))
             for name, ts in times.items()}          # each batch's time over equal terms'
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        for name, ts in times.items():
            med = statistics.median(ts)
            record(args.results, {
                "model": name, "precision": args.precision,
                "seconds_per_iteration": round(med, 3), "ratio": round(med / ref, 2),
                "paired": round(paired[name], 2),
                "paired_equal_terms": round(equal[name], 2),
                "parameters": params(rows[name][2]),
                "gflop_per_iteration": round(flops[name] / len(timed) / 1e9, 1),
                "of_peak": round(flops[name] / sum(ts) / peak, 2)},
                as_typed("benchmarks/bench_train.py", sys.argv[1:]))
        print(f"rows added to {args.results}")
    print(f"FAIR_RATIO {equal['ours, full-width heads']:.2f}")


if __name__ == "__main__":
    main()
