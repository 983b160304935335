#!/usr/bin/env python3
"""The lecture's question on our own data: does pre-training pay for translation, and how
does a decoder-only model compare with the encoder-decoder? Four arms, the same CPU minutes
each, scored on the same held-out sentences with the translation scripts' BLEU:

  (i)   pre-train: our GPT (the Llama switches) trained on the archive's text, both
        languages, for --pretrain-minutes; written as a folder and read back with
        from_huggingface; then every weight fine-tuned on "English: ...\\nSpanish: ..." rows
        (the loss on the Spanish) for the rest of --minutes;
  (ii)  the same pre-trained folder, fine-tuned with LoRA (every projection) instead;
  (iii) the same GPT, the same tokenizer, trained on those rows from scratch, all --minutes;
  (iv)  the encoder-decoder (TransformerPreLN with today's switches: RMSNorm, rotary
        positions, SwiGLU, one key/value head), trained on the pairs for --minutes.

A decoder translates by continuing "English: <sentence>\\nSpanish:" greedily up to its end
token; the encoder-decoder decodes greedily. Every model trains at a constant learning rate
(its own, below), none with averaged weights.

    python3 benchmarks/decoder_translation.py --archive data/en_es_xformer_8_90000.tar.gz \
        --minutes 30 --pretrain-minutes 15 --results docs/results/decoder_translation.json
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from DLStudio.cli.common import (  # noqa: E402
    archive_or_usage,
    positive_float,
    positive_int,
)
from DLStudio.cli.experiments import machine  # noqa: E402
from DLStudio.quick import shrink  # noqa: E402

TEMPLATE = "English: {}\nSpanish:"
ARMS = {"i": "pre-trained, every weight fine-tuned",
        "ii": "pre-trained, LoRA (every projection) fine-tuned",
        "iii": "the same GPT from scratch on the pairs",
        "iv": "encoder-decoder (TransformerPreLN) on the pairs"}
LLAMA = dict(norm="rmsnorm", positions="rope", feed_forward="swiglu", full_width_heads=True,
             output_bias=False)


def plain(sentence):
    words = sentence.split()
    return " ".join(words[1:-1] if words[:1] == ["SOS"] else words)


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--archive", default="data/en_es_xformer_8_90000.tar.gz")
    p.add_argument("--minutes", type=positive_float, default=30.0, help="each arm's CPU minutes")
    p.add_argument("--pretrain-minutes", type=positive_float, default=15.0,
                   help="arms i and ii: the part of --minutes spent pre-training")
    p.add_argument("--arms", default="i,ii,iii,iv", help=f"of: {', '.join(ARMS)}")
    p.add_argument("--held-out", type=positive_int, default=1000,
                   help="held-out English sentences scored (the same for every arm)")
    p.add_argument("--embedding-size", type=positive_int, default=256)
    p.add_argument("--num-layers", type=positive_int, default=4, help="the GPT's layers; the "
                   "encoder-decoder gets half as many a side")
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--vocab-size", type=positive_int, default=8000,
                   help="BPE pieces, both languages")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--lora-rank", type=positive_int, default=16)
    p.add_argument("--out", default="decoder_translation",
                   help="the folders written (pre-trained; arm i's fine-tuned model)")
    p.add_argument("--results", metavar="FILE.json", default="",
                   help="add each arm's row to a result file")
    p.add_argument("--seed", type=int, default=0)
    return p


def held_out_subset(held_out, n):
    """The first ``n`` distinct held-out English sentences with all their references."""
    from DLStudio.evaluation.decode_and_score import held_out_references
    refs = held_out_references(held_out)
    kept = list(refs)[:n]
    return [(en, es) for en, es in held_out if en in set(kept)], {en: refs[en] for en in kept}


def gpt_bleu(gpt, refs, batch_size):
    """Greedy continuations of each English sentence's prompt, scored as the scripts score."""
    from DLStudio.evaluation.decode_and_score import bleu_scores
    english = list(refs)
    prompts = [TEMPLATE.format(plain(en)) for en in english]
    said = gpt.generate(prompts, temperature=0.0, max_new_tokens=48, stop=["\n"],
                        batch_size=batch_size)
    hyps = [text.strip().split() for text in said]
    return bleu_scores(hyps, [refs[en] for en in english]), hyps


def fine_tune(gpt, rows, minutes, lr, batch_size, seed, lora_rank=None):
    """Train ``gpt`` (a folder's) on the rows for ``minutes``: (steps, minutes)."""
    import torch

    from DLStudio.runtime.studio import DLStudio
    from DLStudio.training.finetune import CompletionTrainer
    from DLStudio.training.rows import encode_rows
    if lora_rank:
        gpt.add_lora(lora_rank, 2 * lora_rank, ("q_proj", "k_proj", "v_proj", "o_proj",
                                                "gate_proj", "up_proj", "down_proj"))
    examples, _ = encode_rows(gpt, "completion", rows)
    dls = DLStudio(use_gpu=False, batch_size=batch_size, epochs=10_000, seed=seed)
    gpt.train()
    optimizer = torch.optim.AdamW([w for w in gpt.parameters() if w.requires_grad], lr=lr,
                                  weight_decay=0.0)
    trainer = CompletionTrainer(gpt, examples, [], optimizer, dls, save_checkpoints=False,
                                max_minutes=minutes)
    start = time.monotonic()
    trainer.run()
    return trainer.step, (time.monotonic() - start) / 60


def main(argv=None):
    import torch

    from DLStudio.containers import hub
    from DLStudio.data import split_pairs
    from DLStudio.runtime.studio import DLStudio
    from DLStudio.Transformers import TransformerGPT
    p = parser()
    args = shrink(p.parse_args(argv))   # DLSTUDIO_QUICK=1: tiny sizes
    arms = args.arms.split(",")
    if not set(arms) <= set(ARMS) or not args.pretrain_minutes < args.minutes:
        p.error("--arms takes i, ii, iii, iv; --pretrain-minutes is less than --minutes")
    torch.manual_seed(args.seed)
    corpus = archive_or_usage(p, args.archive, max_seq_length=None)
    train, held_out = split_pairs(corpus.pairs)
    scored, refs = held_out_subset(held_out, args.held_out)
    rows = [(0, {"prompt": TEMPLATE.format(plain(en)), "completion": " " + plain(es)})
            for en, es in train]
    text = [plain(en) for en, _ in train] + [plain(es) for _, es in train]
    print(f"machine: {machine()}\n{args.archive}: {len(train)} training pairs, {len(refs)} "
          f"held-out English sentences scored; {args.minutes:g} minutes an arm, "
          f"{args.pretrain_minutes:g} of them pre-training in arms i and ii", flush=True)
    sizes = dict(embedding_size=args.embedding_size, num_atten_heads=args.num_atten_heads,
                 max_seq_length=64, dropout=0.0, **LLAMA)
    dls = DLStudio(use_gpu=False, batch_size=args.batch_size, epochs=10_000, seed=args.seed,
                   learning_rate=1e-3)
    gpt = TransformerGPT(dl_studio=dls, sentences=text, lang="text", tokenizer="bpe",
                         vocab_size=args.vocab_size, num_basic_decoders=args.num_layers,
                         held_out_fraction=0.01, schedule="budget", save_checkpoints=False,
                         **sizes)
    scratch = TransformerGPT(dl_studio=dls, vocab=gpt.vocab, tokenizer="bpe",
                             num_basic_decoders=args.num_layers, **sizes)
    os.makedirs(args.out, exist_ok=True)
    folders = {"scratch": os.path.join(args.out, "scratch")}
    for path in folders.values():
        if os.path.exists(path) and os.listdir(path):
            p.error(f"{path} exists: give another --out")
    hub.write_folder(scratch, folders["scratch"])
    results = []
    pre_minutes, pre_steps = 0.0, 0
    if {"i", "ii"} & set(arms):
        start = time.monotonic()
        trainer = gpt.trainer(max_minutes=args.pretrain_minutes)
        trainer.run()
        pre_minutes, pre_steps = (time.monotonic() - start) / 60, trainer.step
        folders["pretrained"] = hub.write_folder(gpt, os.path.join(args.out, "pretrained"))
        ppl = gpt.perplexity()["per_piece"]
        print(f"pre-trained {pre_steps} steps in {pre_minutes:.1f} min; held-out perplexity "
              f"{ppl:.1f} a piece; written as {folders['pretrained']}", flush=True)
    params = sum(w.numel() for w in gpt.parameters())
    for arm in arms:
        rest = args.minutes - pre_minutes if arm in ("i", "ii") else args.minutes
        if arm == "iv":
            row = encoder_decoder(args, train, scored, rest)
        else:
            model = TransformerGPT.from_huggingface(
                folders["pretrained" if arm in ("i", "ii") else "scratch"])
            lr = {"i": 5e-4, "ii": 1e-3, "iii": 1e-3}[arm]
            steps, minutes = fine_tune(model, rows, rest, lr, args.batch_size, args.seed,
                                       args.lora_rank if arm == "ii" else None)
            bleu, hyps = gpt_bleu(model.eval(), refs, args.batch_size)
            row = {"params": params, "steps": steps, "minutes": round(minutes, 1),
                   "bleu": round(bleu["bleu"], 2), "sacrebleu": round(bleu["sacrebleu"], 2),
                   "learning_rate": lr, "example": " ".join(hyps[0])}
            if arm == "i":
                model.remove_lora()
                hub.write_folder(model, os.path.join(args.out, "finetuned"))
        if arm in ("i", "ii"):
            row.update(pretrain_steps=pre_steps, pretrain_minutes=round(pre_minutes, 1))
        row = {"arm": f"{arm}: {ARMS[arm]}", "sentences": len(refs), **row}
        results.append(row)
        print(" | ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    print("\n| arm | parameters | steps (pre-training + fine-tuning) | minutes | held-out "
          "BLEU (sacreBLEU) |\n|---|---|---|---|---|")
    for r in results:
        pre = f"{r['pretrain_steps']:,} + " if "pretrain_steps" in r else ""
        mins = f"{r['pretrain_minutes']} + " if "pretrain_minutes" in r else ""
        print(f"| {r['arm']} | {r['params'] / 1e6:.1f} M | {pre}{r['steps']:,} | "
              f"{mins}{r['minutes']} | {r['bleu']:.2f} ({r['sacrebleu']:.2f}) |")
    if "i" in arms:
        print(f"\nTranslate your own sentences with arm i's model:\n  python3 "
              f"ExamplesTransformers/interact_with_prompts.py {args.out}/finetuned --prompts - "
              "--template \"English: {}\\nSpanish:\" --stop \"\\n\" --temperature 0")
    if args.results:
        from DLStudio.cli.common.results import as_typed, record
        command = as_typed("benchmarks/decoder_translation.py",
                           sys.argv[1:] if argv is None else argv)
        for r in results:
            record(args.results, r, command)
        print(f"rows added to {args.results}")
    return 0


def encoder_decoder(args, train, scored, minutes):
    """Arm iv: TransformerPreLN with today's switches on the pairs, greedy BLEU."""
    from DLStudio.data import Corpus
    from DLStudio.data.vocabulary import TranslationData, build_vocabulary
    from DLStudio.evaluation.decode_and_score import evaluate_bleu
    from DLStudio.runtime.studio import DLStudio
    from DLStudio.Transformers import TransformerPreLN
    corpus = Corpus(train + scored, [], [])
    vocab = build_vocabulary(corpus, train, "bpe", args.vocab_size, "training")
    dls = DLStudio(use_gpu=False, batch_size=128, epochs=10_000, seed=args.seed,
                   learning_rate=1e-3)
    x = TransformerPreLN(dl_studio=dls, data=TranslationData(corpus, vocab,
                                                             split=(train, scored)),
                         embedding_size=args.embedding_size, dropout=0.0,
                         label_smoothing=0.1, kv_heads=1, save_checkpoints=False, **{
                             k: v for k, v in LLAMA.items() if k != "output_bias"})
    half = max(1, args.num_layers // 2)
    enc = x.MasterEncoder(dls, x, half, args.num_atten_heads)
    dec = x.MasterDecoderWithMasking(dls, x, half, args.num_atten_heads)
    trainer = x.trainer(enc, dec, max_minutes=minutes)
    start = time.monotonic()
    trainer.run()
    spent = (time.monotonic() - start) / 60
    r = evaluate_bleu(trainer.model, x.vocab, scored, show=0)
    example = " ".join(r["translations"][0][1])
    return {"params": sum(w.numel() for w in trainer.model.parameters()),
            "steps": trainer.step, "minutes": round(spent, 1), "bleu": round(r["bleu"], 2),
            "sacrebleu": round(r["sacrebleu"], 2), "learning_rate": 1e-3, "example": example}


if __name__ == "__main__":
    sys.exit(main())
