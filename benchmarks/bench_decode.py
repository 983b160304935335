#!/usr/bin/env python3
"""Sentences per second when translating the held-out split: our decoder with its key/value
cache, our decoder re-running the whole prefix, and a baseline built from PyTorch's
``nn.Transformer`` decoding naively (re-running its decoder on the whole prefix each step).

    python benchmarks/bench_decode.py                                    # bundled corpus
    python benchmarks/bench_decode.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz

    python benchmarks/bench_decode.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz \
        --checkpoint checkpoints_with_masking_FG/checkpoint_0.pt

All three run the same decoding loops (DLStudio.evaluation.greedy_decode / beam_search) on
the same batches of held-out sentences.
    - With --checkpoint (a trained TransformerFG of that archive): our model stops each
      sentence at its EOS, as real translation does (a finished sentence leaves the batch,
      in greedy decoding and in beam search once its every hypothesis has finished),
      and the baseline, untrained, is run for exactly as many steps on each batch as ours
      needed for that batch (a naive loop stops when the whole batch is done).
    - Without: every model is untrained and runs every step to max_seq_length.
      --kv-heads G adds our model with G key/value heads (grouped-query attention, beside
      the same model with one per head: give --full-width-heads, which it needs), and the
      numbers each model's caches hold per sentence.

    python benchmarks/bench_decode.py --archive ../shared/data/en_es_xformer_8_90000.tar.gz \
        --full-width-heads --kv-heads 1
"""

import contextlib
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_train import Baseline  # noqa: E402

from DLStudio import (  # noqa: E402
    DLStudio,
    TransformerFG,
    evaluation,
)
from DLStudio.checkpoints import CheckpointError  # noqa: E402
from DLStudio.cli import (  # noqa: E402
    archive_or_usage,
    existing_file,
    positive_int,
)
from DLStudio.cli.common import Parser  # noqa: E402
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.data import BUNDLED_ARCHIVE  # noqa: E402
from DLStudio.model.tokens import padding_mask  # noqa: E402
from DLStudio.runtime.precision import Precision, native_bf16  # noqa: E402


class NaiveBaseline(torch.nn.Module):
    """The nn.Transformer baseline behind the interface the decoding loops use."""

    def __init__(self, baseline):
        super().__init__()
        self.b = baseline

    def decoding(self):             # no key/value cache: each step re-runs the prefix
        return contextlib.nullcontext([])

    def encode(self, src):
        pad = padding_mask(src)
        x = self.b.src_emb(src) * self.b.scale + self.b.pe[:src.size(1)]
        return self.b.transformer.encoder(x, src_key_padding_mask=pad), pad

    def decode(self, ys, memory, pad, keep):
        T = ys.size(1)
        y = self.b.tgt_emb(ys) * self.b.scale + self.b.pe[:T]
        causal = torch.nn.Transformer.generate_square_subsequent_mask(T)
        h = self.b.transformer.decoder(y, memory, tgt_mask=causal, tgt_is_causal=True,
                                       memory_key_padding_mask=pad)
        return self.b.out(h[keep])


class NoCache(torch.nn.Module):
    """Our model with its cache turned off (re-runs the prefix, like the baseline)."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def decoding(self):
        return contextlib.nullcontext([])

    def encode(self, src):
        return self.m.encode(src)

    def decode(self, ys, memory, cross_mask, keep):
        return self.m.decode(ys, memory, cross_mask, keep)


class KeepsFinished(NoCache):
    """Our model with its cache, keeping every sentence in the batch for as many steps as
    the batch needs (a finished sentence does not leave it)."""

    def decoding(self):
        return self.m.decoding()

    def decode_newest(self, ys, memory, cross_mask):
        return self.m.decode_newest(ys, memory, cross_mask)


def cache_numbers(model, src, steps):
    """How many numbers the key/value caches of ``model`` hold for one sentence after
    ``steps`` decoding steps (self-attention's grow by a word a step, cross-attention's
    hold the memory's keys and values)."""
    with torch.no_grad(), model.decoding() as caches:
        memory, cross_mask = model.encode(src)
        ys = torch.zeros(1, 1, dtype=torch.long)
        for _ in range(steps - 1):
            model.decode_newest(ys, memory, cross_mask)
            ys = torch.cat([ys, ys[:, -1:]], dim=1)
        return sum(c.K.numel() + c.V.numel() for c in caches if c.K is not None)


def main():
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", default=BUNDLED_ARCHIVE, type=existing_file)
    p.add_argument("--embedding-size", type=positive_int, default=256)
    p.add_argument("--num-layers", type=positive_int, default=4)
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument("--batches", type=positive_int, default=4,
                   help="held-out batches per measurement")
    p.add_argument("--repeats", type=positive_int, default=3)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="every model decodes under this autocast (bf16: matrix products in "
                        "bfloat16, softmax and LayerNorm in fp32)")
    p.add_argument("--checkpoint", type=existing_file,
                   help="a trained TransformerFG checkpoint of --archive")
    p.add_argument("--full-width-heads", action="store_true",
                   help="untrained models: heads that read all of M, then W^O")
    p.add_argument("--kv-heads", type=positive_int, metavar="G",
                   help="untrained models: add ours with G key/value heads (needs "
                        "--full-width-heads)")
    args = p.parse_args()
    if args.kv_heads and (args.checkpoint or not args.full_width_heads
                          or args.num_atten_heads % args.kv_heads):
        p.error("--kv-heads G goes with --full-width-heads, untrained models (no "
                "--checkpoint), and a G that divides --num-atten-heads")
    torch.manual_seed(0)
    corpus = archive_or_usage(p, args.archive)
    dls = DLStudio(use_gpu=False, seed=0)
    if args.checkpoint:
        try:
            x, ours, _ = TransformerFG.from_checkpoint(args.checkpoint, dl_studio=dls,
                                                       corpus=corpus)
        except CheckpointError as e:
            p.error(str(e))
        M, L = x.embedding_size, ours.encoder.num_basic_encoders
        H = ours.encoder.num_atten_heads
    else:
        M, H, L = args.embedding_size, args.num_atten_heads, args.num_layers

        def untrained(**switches):
            x = TransformerFG(dl_studio=dls, corpus=corpus, embedding_size=M,
                              full_width_heads=args.full_width_heads, **switches)
            enc = x.MasterEncoder(dls, x, L, H)
            dec = x.MasterDecoderWithMasking(dls, x, L, H)
            return x, x.EncoderDecoder(x, enc, dec).eval()
        x, ours = untrained()
    baseline = NaiveBaseline(Baseline(x.vocab_en_size, x.vocab_es_size, M, H, L,
                                      x.FeedForward.expansion * M, x.max_seq_length,
                                      norm_first=False)).eval()
    english = sorted({en for en, _ in x.held_out_corpus})
    src = x.sentence_with_words_to_ints(english, "en")
    batches = [src[i:i + args.batch_size]
               for i in range(0, len(src), args.batch_size)][:args.batches]
    n = sum(len(b) for b in batches)
    trained = bool(args.checkpoint)
    models = {"ours (cache)": ours, "ours (no cache)": NoCache(ours),
              "nn.Transformer naive": baseline}
    keeping = KeepsFinished(ours)             # what dropping finished sentences gains
    if trained:
        models["ours (cache), keeps all"] = keeping
    if args.kv_heads:
        models[f"ours kv_heads={args.kv_heads} (cache)"] = untrained(kv_heads=args.kv_heads)[1]
    print(f"machine: {machine()}")
    print(f"archive {args.archive}; embedding {M}, {L}+{L} layers, {H} heads; {n} held-out "
          f"sentences in batches of {args.batch_size}; {torch.get_num_threads()} threads; "
          f"{args.precision} (native bf16: {native_bf16(dls.device)}); "
          + (f"ours trained ({args.checkpoint}), stopping at EOS" if trained else
             "untrained models, every step run"))

    for label, model in models.items():
        if label.endswith("(cache)"):
            print(f"{label}: {sum(p.numel() for p in model.parameters()):,} parameters; its "
                  f"caches hold {cache_numbers(model, src[:1], x.max_seq_length):,} numbers "
                  "per sentence at the last step")
    precision = Precision(args.precision, dls.device)
    if precision.name != "fp32":         # nn.Transformer's inference fast path is fp32 only
        torch.backends.mha.set_fastpath_enabled(False)

    def decode(model, b, width, max_len):
        stop = trained and model not in (baseline, keeping)  # these run their given steps
        with precision.autocast():
            if width == 1:
                return evaluation.greedy_decode(model, b, max_len, stop_at_eos=stop)
            return evaluation.beam_search(model, b, max_len, width, stop_at_eos=stop)

    for name, width in (("greedy", 1), ("beam-4", 4)):
        # the steps each batch takes with our model: the baseline is given the same
        with torch.no_grad():
            steps = [decode(ours, b, width, x.max_seq_length).size(1) + 1 for b in batches]
        rates = {}
        for _ in range(args.repeats):           # interleaved repeats
            for label, model in models.items():
                t0 = time.perf_counter()
                with torch.no_grad():
                    for b, max_len in zip(batches, steps):
                        decode(model, b, width, max_len if model in (baseline, keeping)
                               else x.max_seq_length)
                rates.setdefault(label, []).append(n / (time.perf_counter() - t0))
        base = statistics.median(rates["nn.Transformer naive"])
        for label, r in rates.items():
            med = statistics.median(r)
            print(f"{name:<7} {label:<22} {med:>9.1f} sentences/s   x{med / base:.2f} "
                  "vs the naive baseline")


if __name__ == "__main__":
    main()
