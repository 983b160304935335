"""What ``finetune_lm.py`` does: adapt a language model (a Hugging Face folder, or one of
our GPT checkpoints) to rows of chat, prompt/completion or preference pairs, with LoRA or
every weight, and write what transformers and our scripts read (docs/fine_tuning.md)."""

import os
import random

import torch

from ..containers import hub
from ..runtime.distributed import single_process_only
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
                  ("preference", "lora"): 5e-5, ("preference", "full"): 1e-6}
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
    p.add_argument("--template", metavar="TEXT",
                   help="each prompt put in TEXT's {} (\\n: a newline), e.g. "
                        "\"English: {}\\nSpanish:\"")
    p.add_argument("--held-out", type=nonnegative_float, default=0.1, metavar="FRACTION",
                   help="rows kept out of training and scored (default 0.1)")
    p.add_argument("--full", action="store_true",
                   help="fine-tune every weight instead of LoRA")
    p.add_argument("--lora-rank", type=positive_int, default=8)
    p.add_argument("--lora-alpha", type=positive_float, default=16.0)
    p.add_argument("--lora-targets", default=ATTENTION, metavar="NAMES",
                   help=f"comma-separated projections (default {ATTENTION}; also gate_proj, "
                        "up_proj, down_proj, or ours: WQ, WK, WV, W_O, W1, V, W2)")
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
    p.add_argument("--checkpoints-dir", default="checkpoints_finetune")
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
    return p


def _checked(p, args):
    if args.merge and not args.out:
        p.error("--merge writes into --out DIR: give --out")
    if args.out and os.path.exists(args.out) and os.listdir(args.out):
        raise UserError(f"{args.out} exists and is not empty: give a new folder for --out")
    if not 0 <= args.held_out < 1:
        p.error(f"--held-out is a fraction of the rows, below 1 (got {args.held_out})")


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
    if not args.out or not folder:
        return
    if args.full:
        found = hub.writer.refusals(gpt)
        if found:
            raise UserError("a model fine-tuned whole is written as a LlamaForCausalLM "
                            f"folder, which this one cannot be ({'; '.join(found)}): "
                            "fine-tune it with LoRA (its adapter, and with --merge its "
                            "merged folder, are written in its own architecture)")
    elif gpt.folder_architecture == "GPT2LMHeadModel":
        raise UserError("GPT-2's attention is one fused c_attn, which a PEFT adapter of "
                        "ours does not write: fine-tune it with --full --out DIR")


def finetune_main(argv=None):
    """``finetune_lm.py FOLDER|DIR [N] --data FILE``: fine-tune, report held-out scores,
    write the adapter and the merged model."""
    from ..training.finetune import CompletionTrainer, PreferenceTrainer

    def run(argv):
        single_process_only("finetune_lm.py")
        p = finetune_parser()
        args = p.parse_args(argv)
        _checked(p, args)
        kind, rows = read_rows(args.data, args.template.replace("\\n", "\n")
                               if args.template else None)
        dls = DLStudio(batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
                       use_gpu=not args.cpu)
        torch.manual_seed(args.seed)
        gpt, folder = _load(p, args, dls)
        if kind == "messages" and not folder:
            raise UserError("chat rows need a folder's chat template: give our GPT "
                            "prompt/completion rows (a TSV of prompt<TAB>completion)")
        examples, too_long = encode_rows(gpt, kind, rows, args.max_length)
        if not examples:
            raise UserError(f"every row of {args.data} is longer than the model reads "
                            f"({args.max_length or gpt.max_seq_length} tokens)")
        train, held_out = _split(examples, args.held_out, args.seed)
        _writable(gpt, folder, args)
        how = "full" if args.full else "lora"
        settings = {"kind": kind, "how": how}
        if args.full:
            trainable = sum(p.numel() for p in gpt.parameters())
        else:
            targets = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
            trainable = gpt.add_lora(args.lora_rank, args.lora_alpha, targets)
            settings.update(rank=args.lora_rank, alpha=args.lora_alpha, targets=targets)
        preference = kind == "preference"
        if preference:
            settings["beta"] = args.beta
        lr = args.learning_rate or LEARNING_RATES[("preference" if preference else
                                                   "completion", how)]
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
        cls = PreferenceTrainer if preference else CompletionTrainer
        options = {"beta": args.beta} if preference else {}
        trainer = cls(gpt, train, held_out, optimizer, dls, args.checkpoints_dir,
                      accumulate=args.accumulate, settings=settings,
                      checkpoint_freq=args.checkpoint_freq, max_minutes=args.max_minutes,
                      max_steps=args.max_steps, overwrite=args.overwrite, resume=args.resume,
                      precision=args.precision, title="fine-tuning", **options)
        before = trainer.held_out_score()
        trainer.run()
        after = trainer.held_out_score()
        if after is not None:
            if preference:
                print(f"held-out pairs whose chosen completion the model now prefers more "
                      f"than the reference does: {after:.1f}% of {len(held_out)}")
            else:
                print(f"held-out perplexity of the completions: {after:.3f} (before: "
                      f"{before:.3f}), on {len(held_out)} rows")
        if args.out:
            _write(gpt, folder, trainer, args)
        return 0
    return run_job(run, argv)


def _write(gpt, folder, trainer, args):
    """DIR/adapter/ and DIR/merged/ (--out, --merge)."""
    from ..checkpoints import make_payload, save_checkpoint
    os.makedirs(args.out, exist_ok=True)
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
    gpt.remove_lora()
    gpt.eval()
    os.makedirs(merged)
    payload = make_payload(gpt, {"epoch": trainer.last_epoch or 0, "step": trainer.step,
                                 "epoch_complete": True, "train_losses":
                                 list(trainer.train_losses), "finetuning": trainer.settings})
    save_checkpoint(payload, os.path.join(merged, f"checkpoint_{trainer.last_epoch or 0}.pt"))
    print(f"wrote {merged}: the fine-tuned GPT as a checkpoint (interact_with_prompts.py "
          f"{merged} \"...\" reads it)")
