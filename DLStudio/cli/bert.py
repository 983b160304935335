"""What the BERT scripts do: ``pretrain_bert.py`` (masked-language pre-training),
``fill_mask.py``, ``finetune_bert.py`` (a classifier on [CLS]) and ``classify_text.py``.
The conventions are the other scripts': argv in, an exit code out, one line for an
expected failure."""

import argparse
import os
import sys

import torch

from ..data import BUNDLED_ARCHIVE
from ..data.bert_text import read_labelled_rows
from ..evaluation.decode_and_score import confusion_matrix, format_confusion
from ..runtime.studio import DLStudio
from ..Transformers import TransformerBERT
from .common import (
    Parser,
    UserError,
    add_run_arguments,
    add_since_2017_arguments,
    add_stack_arguments,
    add_weights_argument,
    checkpoint_and_rest,
    how_to_run,
    hugging_face_folder,
    model_class_flag,
    nonnegative_float,
    positive_float,
    positive_int,
    python_command,
    resolve_archive,
    run_job,
    since_2017,
    subclass_of,
    take_best_use,
)
from .gpt import archive_side, read_sentences

__all__ = ["pretrain_main", "fill_mask_main", "finetune_main", "classify_main", "BERT",
           "FINETUNE"]

#: pretrain_bert.py's defaults: a small BERT that learns the bundled corpus in minutes.
BERT = {"embedding_size": 128, "num_layers": 2, "num_atten_heads": 4, "batch_size": 64,
        "epochs": 10, "learning_rate": 5e-4, "vocab_size": 4000}
#: finetune_bert.py's defaults.
FINETUNE = {"batch_size": 32, "epochs": 5, "learning_rate": 1e-4}


def pretrain_parser():
    d = BERT
    p = Parser(description="Pre-train TransformerBERT by masked-language modelling on a "
                           "text file or one or both sides of a DLStudio archive.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="a UTF-8 text file, one sentence per line")
    src.add_argument("--archive", help="a DLStudio archive: its training split's sentences, "
                                       "one a row (default: the bundled corpus, "
                                       f"{BUNDLED_ARCHIVE})")
    p.add_argument("--max-words", type=positive_int, default=60,
                   help="with --text: lines of more words are left out (said), so that one "
                        "long line (a paragraph) does not make every row that long")
    p.add_argument("--side", choices=("en", "es", "both"), default="en",
                   help="with --archive: which language's sentences (both: each sentence "
                        "of both, alone, never beside its translation)")
    p.add_argument("--tokenizer", choices=("bpe", "word"), default="bpe",
                   help="bpe: byte-level pieces learnt from the text; word: a token per word")
    p.add_argument("--vocab-size", type=positive_int, default=d["vocab_size"])
    p.add_argument("--pair-task", choices=("none", "next"), default="none",
                   help="next: also learn whether a line follows another (--text whose "
                        "lines run in order); none: masked tokens only (RoBERTa's finding)")
    add_stack_arguments(p, d, "encoder layers (BasicEncoder)")
    p.set_defaults(layout="FG")
    add_since_2017_arguments(p, feed_forward="gelu", positions="learned")
    p.add_argument("--full-width-heads", action="store_true",
                   help="heads read all of M, then W^O (BERT's; default: the lecture's "
                        "sliced heads)")
    p.add_argument("--learning-rate", type=positive_float, default=d["learning_rate"])
    p.add_argument("--batch-size", type=positive_int, default=d["batch_size"])
    p.add_argument("--epochs", type=positive_int, default=d["epochs"])
    p.add_argument("--dropout", type=nonnegative_float, default=0.1)
    p.add_argument("--mask-rate", type=positive_float, default=0.15,
                   help="the fraction of tokens selected (80%% [MASK], 10%% random, 10%% kept)")
    add_run_arguments(p, "checkpoints_BERT", "perplexity",
                      "held-out masked-token perplexity and accuracy")
    model_class_flag(p, "pre-train this subclass of TransformerBERT (the masking exercise's "
                        "MyBERT, homework)", example="masking:MyBERT")
    return p


def _text(args, p):
    """(sentences, label, archive_text, lang, ordered) of --text or --archive."""
    if args.text:
        lines = read_sentences(args.text)
        kept = [line for line in lines if len(line.split()) <= args.max_words]
        if len(kept) < len(lines):
            print(f"{args.text}: {len(lines) - len(kept)} of {len(lines)} lines have more than "
                  f"{args.max_words} words and are left out (--max-words)")
        return kept, args.text, False, "text", True
    if args.pair_task == "next":
        p.error("--pair-task next pairs each line with the next: an archive's pairs are "
                "shuffled, so give --text FILE whose lines run in order")
    archive = resolve_archive(args.archive or BUNDLED_ARCHIVE)
    sides = ("en", "es") if args.side == "both" else (args.side,)
    sentences = [s for side in sides for s in archive_side(archive, side)[1]]
    return sentences, f"{archive} ({args.side})", True, args.side, False


def pretrain_main(argv=None):
    """``pretrain_bert.py``: pre-train, checkpoint, report held-out masked-token scores."""
    def run(argv):
        p = pretrain_parser()
        args = p.parse_args(argv)
        sentences, label, archive_text, lang, ordered = _text(args, p)
        dls = DLStudio(path_saved_model=os.path.join(args.checkpoints_dir, "saved_BERT.pt"),
                       learning_rate=args.learning_rate, batch_size=args.batch_size,
                       epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
        cls = subclass_of(args.model_class, TransformerBERT) if args.model_class else \
            TransformerBERT
        bert = cls(
            dl_studio=dls, sentences=sentences, ordered=ordered, lang=lang,
            tokenizer=args.tokenizer, vocab_size=args.vocab_size,
            embedding_size=args.embedding_size, num_basic_encoders=args.num_layers,
            num_atten_heads=args.num_atten_heads, layout=args.layout,
            num_warmup_steps=args.num_warmup_steps, schedule=args.schedule,
            dropout=args.dropout, full_width_heads=args.full_width_heads,
            pair_task=args.pair_task, mask_rate=args.mask_rate, **since_2017(args),
            checkpoint_freq=args.checkpoint_freq, archive_text=archive_text)
        n_params = sum(q.numel() for q in bert.parameters())
        print(f"TransformerBERT ({args.layout}) on {label}: {len(bert.training_sentences)} "
              f"training and {len(bert.held_out_sentences)} held-out sentences; "
              f"{bert.vocab.size} {args.tokenizer} tokens; max_seq_length "
              f"{bert.max_seq_length}; {n_params:,} parameters; device {dls.device}")
        before = bert.masked_scores() if bert.held_out_sentences else None
        trainer = bert.run_code_for_pretraining(
            args.checkpoints_dir, display_train_loss=True, max_minutes=args.max_minutes,
            max_steps=args.max_steps, ema=args.ema, overwrite=args.overwrite,
            resume=args.resume, track_perplexity=args.track_perplexity,
            precision=args.precision, compile=args.compile)
        if not dls.world.is_main:
            return 0
        if before is not None:
            after = bert.masked_scores()
            print(f"held-out masked tokens ({after['tokens']}, masked once): accuracy "
                  f"{after['accuracy']:.1f}% (untrained {before['accuracy']:.1f}%), "
                  f"perplexity {after['perplexity']:.1f} (untrained "
                  f"{before['perplexity']:.0f})")
        example = _example(bert)
        if example and trainer.last_checkpoint:
            print(f"{example!r}: " + _completions(bert.fill_mask(example)[0]))
            model = f" --model-class {args.model_class}" if args.model_class else ""
            rows = os.path.join("tasks", "question")
            run = os.path.normpath(os.path.dirname(trainer.last_checkpoint) or "BERT")
            print(f"\nFill your own masks:\n  {how_to_run('fill_mask')} "
                  f"{trainer.last_checkpoint}{model} \"{example}\"\nFine-tune a classifier "
                  "(a task's rows written first; your own: label<TAB>text a line):\n  "
                  f"{python_command()} -m DLStudio.data tasks question -o {rows}\n  "
                  f"{how_to_run('finetune_bert')} --pretrained {trainer.last_checkpoint}"
                  f"{model} --train {os.path.join(rows, 'train.tsv')} "
                  f"--test {os.path.join(rows, 'test.tsv')} --checkpoints-dir "
                  f"{run}_question")
        return 0
    return run_job(run, argv)


def _example(bert):
    """A held-out sentence with its third word masked (or its last, if shorter)."""
    for sentence in bert.held_out_sentences + bert.training_sentences:
        words = sentence.split()
        if len(words) >= 2:
            words[min(2, len(words) - 1)] = "[MASK]"
            return " ".join(words)
    return None


def _completions(options):
    return ", ".join(f"{token} ({p:.2f})" for token, p in options)


def fill_mask_main(argv=None):
    """``fill_mask.py DIR N "the dog [MASK] the ball"``: the five likeliest tokens at each
    [MASK], with their probabilities; with no text, each line of standard input is one."""
    def run(argv):
        p = Parser(description="Fill the [MASK]s of a text with a TransformerBERT checkpoint.")
        p.add_argument("checkpoint", metavar="DIR|FILE")
        p.add_argument("more", nargs="*", metavar="[N] [TEXT]",
                       help="N: an epoch or 'last' (the default); TEXT: with [MASK] where a "
                            "word goes (none: read texts line by line until end of input). "
                            "DIR may be a Hugging Face BERT folder (config.json, vocab.txt, "
                            "weights)")
        p.add_argument("--top", type=positive_int, default=5)
        add_weights_argument(p)
        p.add_argument("--model-class", metavar="MODULE:CLASS",
                       help="the TransformerBERT subclass the checkpoint was trained with")
        args = p.parse_args(argv)
        bert, more = _bert_and_rest(args)
        if len(more) > 1:
            p.error(f"give one text (in quotes), not {len(more)} words")
        texts = more or (line.rstrip("\n") for line in sys.stdin)
        status = 0
        for text in texts:
            try:
                filled = bert.fill_mask(text, args.top)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                status = 1
                continue
            for n, options in enumerate(filled, 1):
                where = f" [MASK] {n}" if len(filled) > 1 else ""
                print(f"{text!r}{where}: {_completions(options)}")
        return status
    return run_job(run, argv)


def _bert_and_rest(args):
    """The BERT of ``DIR [N] ...`` (ours) or of a Hugging Face folder, and the rest."""
    if hugging_face_folder(args.checkpoint):
        return TransformerBERT.from_huggingface(args.checkpoint), list(args.more)
    path, more = checkpoint_and_rest(args, "pretrain_bert")
    return _load(path, args), more


def _load(path, args):
    """The BERT (or a GPT with a classifier: finetune_lm.py --classify) of a checkpoint,
    used as it is best used (its averaged weights where the run kept them, said on standard
    error) unless --weights says otherwise."""
    from ..checkpoints import load_checkpoint
    payload = load_checkpoint(path)
    take_best_use(args, payload, path)
    if payload.get("variant") == "GPT":
        from ..Transformers import TransformerGPT
        return TransformerGPT.from_checkpoint(path, model_class=args.model_class,
                                              weights=args.weights).model
    return TransformerBERT.from_checkpoint(path, model_class=args.model_class,
                                           weights=args.weights).model


#: The BERT paper's fine-tuning rates are 2e-5 to 5e-5 (Devlin et al. 2019, A.3).
PAPER_RATE = 3e-5


def epochs_steps(args, rows):
    """The optimiser steps of --epochs over ``rows`` rows in batches of --batch-size."""
    return args.epochs * -(-rows // args.batch_size)


def warmup_tenth(args, rows):
    """A tenth of the fine-tuning's steps (the epochs', or --max-steps where fewer)."""
    steps = epochs_steps(args, rows)
    return max(1, min(steps, args.max_steps or steps) // 10)


def finetune_parser():
    d = FINETUNE
    p = Parser(description="Fine-tune a classifier on a BERT's [CLS] vector: from a "
                           "pre-trained checkpoint, or the same model from scratch.")
    start = p.add_mutually_exclusive_group(required=True)
    start.add_argument("--pretrained", nargs="+", metavar=("DIR", "N"),
                       help="a pretrain_bert.py checkpoint (DIR [N], or FILE; its averaged "
                            "weights where the run kept them), or a Hugging Face BERT folder")
    start.add_argument("--from-scratch", nargs="*", metavar=("DIR", "N"),
                       help="fresh weights; with DIR [N]: that run's tokenizer and sizes "
                            "(the comparison pre-training is measured by), without: a "
                            "tokenizer learnt from --train")
    p.add_argument("--train", required=True, help="TSV rows: label<TAB>text[<TAB>text2]")
    p.add_argument("--test", help="held-out rows, the same format: accuracy and confusion")
    p.add_argument("--labelled", type=positive_int, default=None, metavar="N",
                   help="keep N training rows per label (chosen with --seed): scarce labels")
    p.add_argument("--learning-rate", type=positive_float, default=None,
                   help=f"default {d['learning_rate']:g} at a constant rate; {PAPER_RATE:g} "
                        "for a Hugging Face BERT, with a warm-up over a tenth of the steps "
                        "and a linear decay to zero (the BERT paper's, A.3)")
    p.add_argument("--batch-size", type=positive_int, default=d["batch_size"])
    p.add_argument("--epochs", type=positive_int, default=d["epochs"])
    p.add_argument("--dropout", type=nonnegative_float, default=0.1)
    p.add_argument("--embedding-size", type=positive_int, default=BERT["embedding_size"],
                   help="--from-scratch without DIR only")
    p.add_argument("--num-layers", type=positive_int, default=BERT["num_layers"],
                   help="--from-scratch without DIR only")
    add_run_arguments(p, "checkpoints_BERT_finetuned", "accuracy", "test accuracy")
    model_class_flag(p, "the TransformerBERT subclass the --pretrained checkpoint was "
                        "trained with (fine-tuned as that class)", example="masking:MyBERT")
    return p


def _start(args, p):
    """The BERT fine-tuning starts from, and whether its weights are pre-trained."""
    given = args.pretrained if args.pretrained is not None else args.from_scratch
    if given:
        if len(given) > 2:
            p.error("give DIR [N] or FILE")
        bert, rest = _bert_and_rest(argparse.Namespace(
            checkpoint=given[0], more=given[1:], weights=None, model_class=args.model_class))
        if rest:
            p.error(f"{rest[0]!r} is not an epoch index (or 'last')")
        return bert, args.pretrained is not None, hugging_face_folder(given[0])
    return None, False, False


def finetune_main(argv=None):
    """``finetune_bert.py``: fine-tune, then held-out accuracy and the confusion matrix."""
    def run(argv):
        p = finetune_parser()
        args = p.parse_args(argv)
        train = read_labelled_rows(args.train)
        if args.labelled:
            train = train.keep_per_label(args.labelled, args.seed)
        test = read_labelled_rows(args.test) if args.test else None
        labels = tuple(sorted(set(train.labels)))
        if len(labels) < 2:
            raise UserError(f"{args.train}: one label ({labels[0]}); a classifier needs two")
        start, pretrained, hugging_face = _start(args, p)
        how = {"dropout": args.dropout, "checkpoint_freq": args.checkpoint_freq,
               "schedule": args.schedule, "num_warmup_steps": 0}   # Adam at the given rate
        rate = args.learning_rate or FINETUNE["learning_rate"]
        if hugging_face:               # a real BERT: the paper's fine-tuning (Devlin et al.
            rate = args.learning_rate or PAPER_RATE     # 2019, A.3), warm-up and decay
            how.update(schedule="budget", num_warmup_steps=warmup_tenth(args, len(train)))
            if not (args.max_steps or args.max_minutes):     # the budget: the epochs' steps
                args.max_steps = epochs_steps(args, len(train))
            warm = how["num_warmup_steps"]
            print(f"a Hugging Face BERT: fine-tuned at {rate:g}, warming up over {warm} "
                  f"step{'s' * (warm != 1)} (a tenth), then down to zero at the end")
        dls = DLStudio(path_saved_model=os.path.join(args.checkpoints_dir,
                                                     "saved_BERT_finetuned.pt"),
                       learning_rate=rate, batch_size=args.batch_size,
                       epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
        if start is None:
            texts = train.texts + (train.seconds or [])
            bert = TransformerBERT(dl_studio=dls, sentences=texts, labels=labels,
                                   embedding_size=args.embedding_size,
                                   num_basic_encoders=args.num_layers, vocab_size=4000, **how)
        else:
            bert = start.with_labels(labels, dls, pretrained=pretrained, **how)
        what = "pre-trained" if pretrained else "from scratch"
        print(f"fine-tuning a BERT ({what}, {sum(q.numel() for q in bert.parameters()):,} "
              f"parameters) on {len(train)} rows of {args.train}: labels {', '.join(labels)}")
        trainer = bert.run_code_for_finetuning(
            train, test, args.checkpoints_dir, display_train_loss=True,
            max_minutes=args.max_minutes, max_steps=args.max_steps, ema=args.ema,
            overwrite=args.overwrite, resume=args.resume, track_accuracy=args.track_accuracy,
            precision=args.precision, compile=args.compile)
        if not dls.world.is_main:
            return 0
        if test is not None:
            report_accuracy(bert, test, labels)
        if trainer.last_checkpoint:
            print(f"\nClassify your own text:\n  {how_to_run('classify_text')} "
                  f"{trainer.last_checkpoint} \"some text\"")
        return 0
    return run_job(run, argv)


def report_accuracy(bert, rows, labels):
    """Print (and return) the accuracy of ``bert`` on LabelledRows, and the confusion."""
    unseen = sorted(set(rows.labels) - set(labels))
    if unseen:
        raise UserError(f"{rows.path}: label(s) {', '.join(map(repr, unseen))} were not in "
                        f"the training rows (the model knows {', '.join(labels)})")
    predicted = bert.classify(rows.texts, rows.seconds).argmax(-1)
    truth = torch.tensor([labels.index(label) for label in rows.labels])
    matrix = confusion_matrix(predicted, truth, len(labels))
    accuracy = 100.0 * matrix.diag().sum().item() / max(1, len(truth))
    print(f"held-out accuracy: {accuracy:.2f}% on {len(truth)} rows of {rows.path} "
          f"(the commonest label alone: "
          f"{100.0 * max(rows.labels.count(x) for x in labels) / len(truth):.1f}%)")
    print(format_confusion(matrix, labels))
    return accuracy


def classify_main(argv=None):
    """``classify_text.py DIR N TEXT`` (or ``-``: a row a line from standard input, a second
    text after a TAB): the likeliest label and every label's probability."""
    def run(argv):
        p = Parser(description="Classify texts with a fine-tuned TransformerBERT checkpoint "
                               "(or a GPT's: finetune_lm.py --classify).")
        p.add_argument("checkpoint", metavar="DIR|FILE")
        p.add_argument("more", nargs="+", metavar="[N] TEXT",
                       help="N: an epoch or 'last'; TEXT, or - to read rows from standard "
                            "input (text, or text<TAB>text2 for a pair)")
        add_weights_argument(p)
        p.add_argument("--batch-size", type=positive_int, default=256,
                       help="rows classified at once")
        p.add_argument("--model-class", metavar="MODULE:CLASS")
        args = p.parse_args(argv)
        path, more = checkpoint_and_rest(args, "finetune_bert")
        if len(more) != 1:
            p.error("give one TEXT (in quotes), or - to read rows from standard input")
        bert = _load(path, args)
        if not getattr(bert, "labels", None):
            raise UserError(f"{path} is a pre-trained model without a classifier: fine-tune "
                            f"it first ({how_to_run('finetune_bert')} --pretrained ..., or "
                            f"{how_to_run('finetune_lm')} DIR --classify ...)")
        rows = [more[0]] if more[0] != "-" else [line.rstrip("\n") for line in sys.stdin]
        rows = [r for r in rows if r.strip()]
        parts = [r.split("\t") for r in rows]
        pair = any(len(x) > 1 for x in parts)
        for number, x in enumerate(parts, 1):
            if len(x) > 2 or (pair and len(x) != 2):
                raise UserError(f"line {number}: give text, or text<TAB>text2, alike on "
                                "every line")
        probs = bert.classify([x[0] for x in parts], [x[1] for x in parts] if pair else None,
                              args.batch_size)
        for text, row in zip(rows, probs):
            best = int(row.argmax())
            print(f"{bert.labels[best]}\t" + "  ".join(
                f"{label} {q:.3f}" for label, q in zip(bert.labels, row.tolist()))
                + f"\t{text}")
        return 0
    return run_job(run, argv)
