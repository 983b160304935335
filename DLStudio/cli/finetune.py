"""What ``finetune_lm.py`` does: adapt a language model (a Hugging Face folder, or one of
our GPT checkpoints) to rows of chat, prompt/completion or preference pairs, with LoRA or
every weight, and write what transformers and our scripts read (docs/fine_tuning.md)."""

import os
import random

import torch

from ..containers import hub
from ..runtime.distributed import launched_by_torchrun
from ..runtime.studio import DLStudio
from ..training.rows import encode_rows, read_rows
from ..Transformers import TransformerGPT
from .common import (
    Parser,
    UserError,
    checkpoint_and_rest,
    hugging_face_folder,
    nonnegative_float,
    positive_float,
    positive_int,
    run_job,
)

__all__ = ["finetune_main", "finetune_parser", "LEARNING_RATES"]

#: The default learning rate of each way of fine-tuning (AdamW, constant).
LEARNING_RATES = {("completion", "lora"): 2e-4, ("completion", "full"): 2e-5,
                  ("preference", "lora"): 5e-5, ("preference", "full"): 1e-6,
                  ("labelled", "lora"): 5e-4, ("labelled", "full"): 5e-5}
ATTENTION = "q_proj,k_proj,v_proj,o_proj"


def finetune_parser():
    p = Parser(description="Fine-tune a language model (a Hugging Face folder or a "
                           "train_gpt.py checkpoint) on your rows: chat, prompt/completion "
                           "(instruction tuning) or chosen/rejected pairs (DPO); with LoRA "
                           "(the default) or every weight (--full).")
    p.add_argument("checkpoint", metavar="FOLDER|DIR|FILE",
                   help="a Hugging Face folder (config.json), or a GPT checkpoint")
    p.add_argument("more", nargs="*", metavar="N", help="after DIR: which checkpoint "
                                                        "(an epoch or 'last', the default)")
    p.add_argument("--data", required=True, metavar="FILE",
                   help="JSONL rows of {\"messages\": [...]}, {\"prompt\", \"completion\"} or "
                        "{\"prompt\", \"chosen\", \"rejected\"} (DPO); or a TSV of "
                        "prompt<TAB>completion (or prompt<TAB>chosen<TAB>rejected), no header")
    p.add_argument("--classify", action="store_true",
                   help="--data is a TSV of label<TAB>text (or label<TAB>text<TAB>text2, "
                        "python -m DLStudio.data tasks): train a classifier on the last "
                        "token; --out DIR writes a checkpoint classify_text.py reads")
    p.add_argument("--test", metavar="FILE",
                   help="with --classify: held-out rows, the same format (else --held-out "
                        "of --data's)")
    p.add_argument("--template", metavar="TEXT",
                   help="each prompt put in TEXT's {} (\\n: a newline), e.g. "
                        "\"English: {}\\nSpanish:\"")
    p.add_argument("--held-out", type=nonnegative_float, default=0.1, metavar="FRACTION",
                   help="rows kept out of training and scored (default 0.1)")
    p.add_argument("--full", action="store_true",
                   help="fine-tune every weight instead of LoRA")
    p.add_argument("--lora-rank", type=positive_int, default=8)
    p.add_argument("--lora-alpha", type=positive_float, default=16.0)
    p.add_argument("--lora-dropout", type=nonnegative_float, default=0.0, metavar="P",
                   help="dropout on each LoRA's input while training, below 1 (PEFT's "
                        "lora_dropout; default 0)")
    p.add_argument("--lora-targets", default=ATTENTION, metavar="NAMES",
                   help=f"comma-separated projections (default {ATTENTION}, GPT-2's c_attn; "
                        "also gate_proj, up_proj, down_proj, GPT-2's c_proj, c_fc, or ours: "
                        "WQ, WK, WV, W_O, W1, V, W2)")
    p.add_argument("--beta", type=positive_float, default=0.1,
                   help="DPO's beta: how far the model may move from the reference")
    p.add_argument("--learning-rate", type=positive_float, default=None,
                   help="AdamW's, constant (default: LoRA 2e-4, full 2e-5; DPO: LoRA 5e-5, "
                        "full 1e-6)")
    p.add_argument("--batch-size", type=positive_int, default=4,
                   help="rows a forward pass (padded to the longest)")
    p.add_argument("--accumulate", type=positive_int, default=1, metavar="K",
                   help="K batches summed into one optimiser step (gradient accumulation)")
    p.add_argument("--epochs", type=positive_int, default=1)
    p.add_argument("--max-length", type=positive_int, default=None,
                   help="rows longer than this many tokens are left out (default: the "
                        "model's context)")
    p.add_argument("--max-minutes", type=positive_float, default=None)
    p.add_argument("--max-steps", type=positive_int, default=None)
    p.add_argument("--checkpoints-dir", default=None,
                   help="the run's checkpoints (default: DIR/checkpoints with --out DIR, "
                        "else checkpoints_finetune)")
    p.add_argument("--checkpoint-freq", type=positive_int, default=1, metavar="EPOCHS")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: the forward pass under autocast")
    p.add_argument("--out", metavar="DIR",
                   help="write DIR/adapter/ (PEFT's files) and, with --merge or --full, "
                        "DIR/merged/ (a folder transformers reads: with LoRA, in the "
                        "folder's own architecture; --full: a Llama folder; for a "
                        "checkpoint of ours: a checkpoint)")
    p.add_argument("--merge", action="store_true",
                   help="with --out: also the model with the LoRA folded in")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--fsdp", action="store_true",
                   help="under torchrun: shard the weights, gradients and optimiser state "
                        "across the processes (PyTorch's FSDP2; docs/scale.md)")
    return p


def _checked(p, args):
    if args.merge and not args.out:
        p.error("--merge writes into --out DIR: give --out")
    if args.checkpoints_dir is None:          # two fine-tunings with --out never share one
        args.checkpoints_dir = os.path.join(args.out, "checkpoints") if args.out \
            else "checkpoints_finetune"
    if args.out and os.path.exists(args.out):
        own = os.path.relpath(os.path.abspath(args.checkpoints_dir), os.path.abspath(args.out))
        if set(os.listdir(args.out)) - {own}:        # the run's own checkpoints may be there
            raise UserError(f"{args.out} exists and is not empty: give a new folder for "
                            "--out (only this run's own checkpoints may be in it)")
    if args.test and not args.classify:
        p.error("--test holds labelled rows: it goes with --classify")
    if not 0 <= args.held_out < 1:
        p.error(f"--held-out is a fraction of the rows, below 1 (got {args.held_out})")
    if not args.lora_dropout < 1:
        p.error(f"--lora-dropout is a probability below 1 (got {args.lora_dropout})")


def _load(p, args, dls):
    """(gpt, is a folder) of the model argument."""
    if hugging_face_folder(args.checkpoint):
        if args.more:
            p.error("a folder takes no N: give FOLDER, or DIR N for a checkpoint")
        return TransformerGPT.from_huggingface(args.checkpoint, dl_studio=dls), True
    path, rest = checkpoint_and_rest(args, "train_gpt")
    if rest:
        p.error(f"unexpected {' '.join(rest)!r}: give FOLDER, or DIR [N]")
    return TransformerGPT.from_checkpoint(path, dl_studio=dls)[0], False


def _split(examples, fraction, seed):
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n = round(fraction * len(examples)) if len(examples) >= 10 else 0
    held = sorted(order[:n])
    kept = sorted(order[n:])
    return [examples[i] for i in kept], [examples[i] for i in held]


def _writable(gpt, folder, args):
    """Refuse, before training, what could not be written at the end."""
    if not args.out or not folder or args.classify:       # a classifier: our checkpoint
        return
    if args.full:
        found = hub.writer.refusals(gpt)
        if found:
            raise UserError("a model fine-tuned whole is written as a LlamaForCausalLM "
                            f"folder, which this one cannot be ({'; '.join(found)}): "
                            "fine-tune it with LoRA (its adapter, and with --merge its "
                            "merged folder, are written in its own architecture)")
    elif gpt.folder_architecture == "GPT2LMHeadModel":
        from ..model.lora import GPT2_TARGETS
        other = [t for t in _targets(gpt, args) if t not in GPT2_TARGETS]
        if other:
            raise UserError(f"GPT-2's modules are {', '.join(GPT2_TARGETS)} (its W_Q, W_K, "
                            f"W_V are one c_attn): --lora-targets {','.join(other)} has no "
                            "module of its own in a GPT-2 folder")
    else:
        from ..containers.hub.adapter import OURS
        from ..model.lora import GPT2_TARGETS, HF_TARGETS
        fused = [t for t in _targets(gpt, args)
                 if any(n not in OURS for n in GPT2_TARGETS.get(t, (HF_TARGETS.get(t, t),)))]
        if fused:
            raise UserError(f"a {gpt.folder_architecture} folder has q_proj, k_proj, v_proj "
                            f"apart: --lora-targets {','.join(fused)} (W_Q, W_K, W_V as one) "
                            "has no module of its own there, so its adapter could not be "
                            f"written; target {', '.join(HF_TARGETS)}")


def _targets(gpt, args):
    """--lora-targets; a GPT-2 folder's default is its c_attn (PEFT's)."""
    if args.lora_targets == ATTENTION and \
            getattr(gpt, "folder_architecture", None) == "GPT2LMHeadModel":
        return ["c_attn"]
    return [t.strip() for t in args.lora_targets.split(",") if t.strip()]


def _rows(gpt, folder, args):
    """(kind, training examples, held-out examples, rows left out) of --data's rows."""
    kind, rows = read_rows(args.data, args.template.replace("\\n", "\n")
                           if args.template else None)
    if kind == "messages" and not folder:
        raise UserError("chat rows need a folder's chat template: give our GPT "
                        "prompt/completion rows (a TSV of prompt<TAB>completion)")
    examples, too_long = encode_rows(gpt, kind, rows, args.max_length, args.data)
    if not examples:
        raise UserError(f"every row of {args.data} is longer than the model reads "
                        f"({args.max_length or gpt.max_seq_length} tokens)")
    return (kind, *_split(examples, args.held_out, args.seed), too_long)


def _labelled(gpt, args):
    """--classify: a classifier on the last token for --data's labels; (kind, training
    examples, held-out examples (--test's, else a share of --data's), 0)."""
    from ..data.bert_text import read_labelled_rows
    from ..training.rows import encode_labelled
    rows = read_labelled_rows(args.data)
    labels = tuple(sorted(set(rows.labels)))
    if len(labels) < 2:
        raise UserError(f"{args.data}: one label ({labels[0]}); a classifier needs two")
    gpt.add_classifier(labels)
    examples = encode_labelled(gpt, rows, labels, args.max_length, args.data)
    if args.test:
        return ("labelled", examples,
                encode_labelled(gpt, read_labelled_rows(args.test), labels, args.max_length,
                                args.test), 0)
    return ("labelled", *_split(examples, args.held_out, args.seed), 0)


def _adapt(gpt, args, kind):
    """LoRA on the model (or every weight learning): (settings, weights that learn)."""
    settings = {"kind": kind, "how": "full" if args.full else "lora"}
    if args.full:
        return settings, sum(w.numel() for w in gpt.parameters())
    targets = _targets(gpt, args)
    trainable = gpt.add_lora(args.lora_rank, args.lora_alpha, targets, args.lora_dropout)
    if kind == "labelled":                 # the new head learns whole
        gpt.classifier.requires_grad_(True)
        trainable += sum(w.numel() for w in gpt.classifier.parameters())
    settings.update(rank=args.lora_rank, alpha=args.lora_alpha, targets=targets,
                    dropout=args.lora_dropout)
    return settings, trainable


def finetune_main(argv=None):
    """``finetune_lm.py FOLDER|DIR [N] --data FILE``: fine-tune, report held-out scores,
    write the adapter and the merged model."""
    from ..training.finetune import ClassifyingTrainer, CompletionTrainer, PreferenceTrainer

    def run(argv):
        p = finetune_parser()
        args = p.parse_args(argv)
        _checked(p, args)
        if launched_by_torchrun() and not args.fsdp:
            p.error("under torchrun, fine-tuning shards the model across the processes: give "
                    "--fsdp (or run it with python3, one process)")
        dls = DLStudio(batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
                       use_gpu=not args.cpu)
        torch.manual_seed(args.seed)
        gpt, folder = _load(p, args, dls)
        kind, train, held_out, too_long = _labelled(gpt, args) if args.classify else \
            _rows(gpt, folder, args)
        _writable(gpt, folder, args)
        settings, trainable = _adapt(gpt, args, kind)
        if kind == "preference":
            settings["beta"] = args.beta
        lr = args.learning_rate or LEARNING_RATES[(kind if kind in ("preference", "labelled")
                                                   else "completion", settings["how"])]
        dls.learning_rate = lr
        gpt.train()
        optimizer = torch.optim.AdamW([w for w in gpt.parameters() if w.requires_grad], lr=lr,
                                      weight_decay=0.0)
        total = sum(w.numel() for w in gpt.parameters())
        print(f"{args.checkpoint}: {total:,} weights, {trainable:,} learning "
              f"({'every weight' if args.full else f'LoRA rank {args.lora_rank}'}); "
              f"{len(train)} {kind} rows to learn, {len(held_out)} held out"
              + (f", {too_long} longer than the model reads left out" if too_long else "")
              + f"; learning rate {lr:g}; device {dls.device}", flush=True)
        cls = {"preference": PreferenceTrainer, "labelled": ClassifyingTrainer}.get(
            kind, CompletionTrainer)
        options = {"beta": args.beta} if kind == "preference" else {}
        trainer = cls(gpt, train, held_out, optimizer, dls, args.checkpoints_dir,
                      accumulate=args.accumulate, settings=settings,
                      checkpoint_freq=args.checkpoint_freq, max_minutes=args.max_minutes,
                      max_steps=args.max_steps, overwrite=args.overwrite, resume=args.resume,
                      precision=args.precision, title="fine-tuning", fsdp=args.fsdp,
                      **options)
        before = trainer.held_out_score()
        trainer.run()
        _report(kind, before, trainer.held_out_score(), len(held_out))
        if args.out and trainer.fsdp:      # the weights whole, written by rank 0 alone
            _write_whole(p, args, dls, kind, trainer)
        elif args.out:
            _write(gpt, folder, trainer, args)
        return 0
    return run_job(run, argv)


def _write_whole(p, args, dls, kind, trainer):
    """--out under FSDP: every rank hands in its shards (a collective); rank 0 loads the whole
    into the model read again from its source, adapted as it was, and writes it."""
    from ..training.sharded import whole_weights
    weights = whole_weights(trainer.model)
    if dls.world.is_main:
        gpt, folder = _load(p, args, DLStudio(use_gpu=False, seed=args.seed))
        if kind == "labelled":
            _labelled(gpt, args)
        _adapt(gpt, args, kind)
        gpt.load_state_dict(weights)
        _write(gpt, folder, trainer, args)
    dls.world.barrier()


def _report(kind, before, after, rows):
    if after is None:
        return
    if kind == "preference":
        print(f"held-out pairs whose chosen completion the model now prefers more than the "
              f"reference does: {after:.1f}% of {rows}")
    elif kind == "labelled":
        print(f"held-out accuracy: {after:.1f}% (before: {before:.1f}%), on {rows} rows")
    else:
        print(f"held-out perplexity of the completions: {after:.3f} (before: {before:.3f}), "
              f"on {rows} rows")


def _write(gpt, folder, trainer, args):
    """--out DIR: DIR/adapter/ and, with --merge or --full, DIR/merged/; a classifier (or
    our checkpoint's fine-tuning) as a checkpoint of ours."""
    os.makedirs(args.out, exist_ok=True)
    if getattr(gpt, "labels", None):                  # a classifier: a checkpoint of ours
        return _checkpoint(gpt, trainer, args.out, f"classify_text.py {args.out} \"...\"")
    lora = bool(getattr(gpt, "lora_targets", None))
    if folder and lora:
        hub.write_adapter(gpt, os.path.join(args.out, "adapter"))
        adapter = os.path.join(args.out, "adapter")
        print(f"wrote {adapter}: PEFT's LoRA adapter of {args.checkpoint} "
              f"(interact_with_prompts.py {args.checkpoint} --adapter {adapter}; "
              "PeftModel.from_pretrained in Python)")
    if not (args.merge or args.full or not folder):
        return
    merged = os.path.join(args.out, "merged")
    if folder:
        if lora:
            hub.write_merged(gpt, merged)
        else:
            hub.write_folder(gpt, merged)
        print(f"wrote {merged}: a {gpt.folder_architecture if lora else 'LlamaForCausalLM'} "
              f"folder (interact_with_prompts.py {merged} \"...\", and transformers, read "
              "it)")
        return
    _checkpoint(gpt, trainer, merged, f"interact_with_prompts.py {merged} \"...\"")


def _checkpoint(gpt, trainer, folder, use):
    """The fine-tuned model (any LoRA folded in) as a checkpoint of ours in ``folder``."""
    from ..checkpoints import make_payload, save_checkpoint
    gpt.remove_lora()
    gpt.eval()
    os.makedirs(folder, exist_ok=True)
    epoch = trainer.last_epoch or 0
    payload = make_payload(gpt, {"epoch": epoch, "step": trainer.step, "epoch_complete": True,
                                 "train_losses": list(trainer.train_losses),
                                 "finetuning": trainer.settings})
    save_checkpoint(payload, os.path.join(folder, f"checkpoint_{epoch}.pt"))
    print(f"wrote {folder}: the fine-tuned GPT as a checkpoint ({use} reads it)")
