"""What the language-model scripts do: ``train_gpt.py``, ``interact_with_prompts.py`` and
``pretraining_experiment.py`` (DLStudio.cli does the translation and image scripts; the
conventions are the same: argv in, an exit code out, one line for an expected failure).
"""

import os
import sys

from ..data import BUNDLED_ARCHIVE, load_archive, split_pairs
from ..runtime.distributed import single_process_only
from ..runtime.studio import DLStudio
from ..Transformers import TransformerGPT
from .common import (
    Parser,
    UserError,
    add_run_arguments,
    add_since_2017_arguments,
    add_since_2023_arguments,
    add_stack_arguments,
    add_weights_argument,
    checkpoint_and_rest,
    how_to_run,
    hugging_face_folder,
    model_class_flag,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    positive_ints,
    resolve_archive,
    run_job,
    since_2017,
    since_2023,
    subclass_of,
    take_best_use,
)
from .real_models import folder_prompts, greedy_without_sampling_flags, print_batched, unescaped

__all__ = ["gpt_train_main", "prompts_main", "pretraining_main", "read_sentences", "GPT"]

#: train_gpt.py's defaults: a model that learns the bundled corpus's Spanish in minutes.
GPT = {"embedding_size": 128, "num_layers": 2, "num_atten_heads": 4, "batch_size": 64,
       "epochs": 5, "learning_rate": 1e-3, "vocab_size": 8000}


def read_sentences(path):
    """The lines of a UTF-8 text file, one sentence each (blank lines skipped)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except FileNotFoundError:
        raise UserError(f"no text file {path}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path} is not UTF-8 text (byte {e.start}): give a text file, one "
                        "sentence per line") from None
    lines = [line for line in lines if line]
    if len(lines) < 2:
        raise UserError(f"{path} holds {len(lines)} sentence(s): a language model needs at "
                        "least two lines of text (one sentence per line)")
    return lines


def archive_side(archive, side):
    """One side of an archive's translation training split (its held-out sentences are
    never used, so a GPT trained on them may start a translation model of that archive)."""
    corpus = load_archive(archive)
    train, _ = split_pairs(corpus.pairs)
    return corpus, [pair[side == "es"] for pair in train]


def gpt_parser():
    d = GPT
    p = Parser(description="Train TransformerGPT, a language model, on a "
                                            "text file or one side of a DLStudio archive.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="a UTF-8 text file, one sentence per line")
    src.add_argument("--archive", help="a DLStudio archive: one side of its training split "
                                       f"(default: the bundled corpus, {BUNDLED_ARCHIVE})")
    p.add_argument("--side", choices=("es", "en"), default="es", help="with --archive")
    p.add_argument("--tokenizer", choices=("bpe", "word"), default="bpe",
                   help="bpe: pieces learnt from the training text; word: a token per word "
                        "(with --archive: the archive's word list, as the translation models)")
    p.add_argument("--vocab-size", type=positive_int, default=d["vocab_size"])
    p.add_argument("--max-seq-length", type=positive_int, default=None,
                   help="tokens the model reads at most (default: the longest training "
                        "sentence's; more for fine-tuning on prompts and completions)")
    add_stack_arguments(p, d, "GPT layers (BasicDecoderWithMasking)")
    add_since_2017_arguments(p, full_width=True)
    add_since_2023_arguments(p)
    p.add_argument("--learning-rate", type=positive_float, default=d["learning_rate"])
    p.add_argument("--batch-size", type=positive_int, default=d["batch_size"])
    p.add_argument("--epochs", type=positive_int, default=d["epochs"])
    p.add_argument("--dropout", type=nonnegative_float, default=0.0)
    p.add_argument("--no-output-bias", dest="output_bias", action="store_false",
                   help="no bias on the output layer (Llama's and GPT-2's: "
                        "save_to_huggingface.py needs it)")
    model_class_flag(p, "train this subclass of TransformerGPT (homework)",
                     "qk_norm:MyTransformer")
    add_run_arguments(p, "checkpoints_GPT", "perplexity", "held-out perplexity")
    return p


def _text_of(args):
    """(sentences, label, word list or None, archive_text) of --text or --archive."""
    if args.text:
        return read_sentences(args.text), args.text, None, False
    archive = resolve_archive(args.archive or BUNDLED_ARCHIVE)
    corpus, sentences = archive_side(archive, args.side)
    words = None
    if args.tokenizer == "word":         # the translation models' own word list
        from ..data.vocabulary import WordTokenizer
        words = WordTokenizer(corpus.vocab_es if args.side == "es" else corpus.vocab_en)
    return sentences, f"{archive} ({args.side})", words, True


def gpt_train_main(argv=None):
    """``train_gpt.py``: train, checkpoint, report held-out perplexity and continuations."""
    def run(argv):
        args = gpt_parser().parse_args(argv)
        sentences, label, words, archive_text = _text_of(args)
        dls = DLStudio(path_saved_model=os.path.join(args.checkpoints_dir, "saved_GPT.pt"),
                       learning_rate=args.learning_rate, batch_size=args.batch_size,
                       epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
        cls = subclass_of(args.model_class, TransformerGPT) if args.model_class else \
            TransformerGPT
        gpt = cls(dl_studio=dls, sentences=sentences, lang=args.side if
                             archive_text else "text", tokenizer=args.tokenizer,
                             vocab_size=args.vocab_size, vocab=words,
                             max_seq_length=args.max_seq_length,
                             embedding_size=args.embedding_size,
                             num_basic_decoders=args.num_layers,
                             num_atten_heads=args.num_atten_heads, layout=args.layout,
                             full_width_heads=args.full_width_heads, **since_2017(args),
                             **since_2023(args),
                             num_warmup_steps=args.num_warmup_steps,
                             schedule=args.schedule, dropout=args.dropout,
                             checkpoint_freq=args.checkpoint_freq, archive_text=archive_text,
                             output_bias=args.output_bias)
        n_params = sum(p.numel() for p in gpt.parameters())
        print(f"TransformerGPT ({args.layout}) on {label}: {len(gpt.training_sentences)} "
              f"training and {len(gpt.held_out_sentences)} held-out sentences; "
              f"{gpt.vocab.size} {'BPE pieces' if gpt.tokenizer == 'bpe' else 'words'}; "
              f"max_seq_length {gpt.max_seq_length}; {n_params:,} parameters; "
              f"device {dls.device}")
        before = _held_out_perplexity(gpt)
        trainer = gpt.run_code_for_training(
            args.checkpoints_dir, display_train_loss=True, max_minutes=args.max_minutes,
            max_steps=args.max_steps, ema=args.ema, overwrite=args.overwrite, resume=args.resume,
            track_perplexity=args.track_perplexity, precision=args.precision,
            compile=args.compile)
        if not dls.world.is_main:           # torchrun: rank 0 evaluates
            return 0
        after = _held_out_perplexity(gpt)
        if after is None:
            print(f"held-out perplexity: none of the {len(gpt.held_out_sentences)} held-out "
                  "sentences can be scored (each is too long, or holds a word the word-level "
                  "tokenizer never saw in training: --tokenizer bpe reads any word)")
        else:
            print(f"held-out perplexity: {after['per_piece']:.2f} per piece (untrained: "
                  f"{before['per_piece']:.0f}; {gpt.vocab.size} would be a uniform guess), "
                  f"{after['per_word']:.2f} per word, on {after['sentences']} sentences")
        known = [s for s in gpt.held_out_sentences + gpt.training_sentences
                 if not gpt.vocab.unknown(s.split())]
        prompt = " ".join(known[0].split()[:2])
        for text in gpt.generate(prompt, num_samples=3, temperature=0.8, top_k=40, seed=0):
            print(f"  {prompt!r} -> {text}")
        if trainer.last_checkpoint:
            print(f"\nContinue your own prompts:\n  {how_to_run('interact_with_prompts')} "
                  f"{trainer.last_checkpoint} \"{prompt}\"")
        return 0
    return run_job(run, argv)


def _held_out_perplexity(gpt):
    """`TransformerGPT.perplexity` of the held-out sentences, or None when none of them can
    be scored."""
    try:
        return gpt.perplexity()
    except ValueError:
        return None


def _prompt_arguments(p, args):
    """``DIR [N] [PROMPT]`` or ``FILE.pt [PROMPT]`` -> (checkpoint path, prompt or None)."""
    path, more = checkpoint_and_rest(args, "train_gpt")
    if len(more) > 1:
        p.error(f"give one prompt (in quotes), not {len(more)} words: "
                f"\"{' '.join(more)}\"")
    return path, more[0] if more else None


def prompts_main(argv=None):
    """``interact_with_prompts.py DIR N "prompt"``: continue prompts with a GPT checkpoint;
    with no prompt, each line of standard input is one."""
    def run(argv):
        p = Parser(description="Continue prompts with a TransformerGPT "
                                                "checkpoint (babyGPT's name for the job).")
        p.add_argument("checkpoint", metavar="DIR|FILE|FOLDER",
                       help="a checkpoint, or a Hugging Face model folder (config.json: GPT-2, "
                            "Llama, Mistral, SmolLM3, Qwen2, Qwen3, Gemma 3, OLMo 2; "
                            "docs/real_models.md)")
        p.add_argument("more", nargs="*", metavar="[N] [PROMPT]",
                       help="N: an epoch or 'last' (the default); PROMPT: the start of a "
                            "sentence (none: read prompts line by line until end of input)")
        p.add_argument("--temperature", type=nonnegative_float, default=None,
                       help="0: always the most likely token (greedy) (default: 0.8; a "
                            "folder: its generation_config.json's)")
        p.add_argument("--top-k", type=nonnegative_int, default=None,
                       help="sample among the k most likely tokens, 0: all (default: 40)")
        p.add_argument("--top-p", type=positive_float, default=None,
                       help="sample among the fewest likeliest tokens whose probabilities "
                            "add up to p (nucleus sampling)")
        p.add_argument("--samples", type=positive_int, default=None,
                       help="continuations per prompt (default: 3; a folder: 1, printed as "
                            "they come)")
        p.add_argument("--chat", action="store_true",
                       help="a folder of an instruct model: apply its chat template and keep "
                            "the conversation, one line of yours at a time")
        p.add_argument("--system", metavar="TEXT",
                       help="with --chat: the system message the conversation starts with")
        p.add_argument("--stop", action="append", default=[], metavar="STRING",
                       help="end a continuation where it writes STRING (not printed; "
                            "\\n: a newline); repeatable")
        p.add_argument("--repetition-penalty", type=positive_float, default=None,
                       metavar="P", help="P > 1 makes tokens already in the text less likely "
                                         "(1: off; default: 1, a folder's own)")
        p.add_argument("--bf16", action="store_true", help="a folder: its weights in bf16")
        p.add_argument("--quantize", choices=("int8", "int4"), default=None,
                       help="generate with the weights in 8 or 4 bits (weight-only "
                            "quantization: docs/performance.md)")
        p.add_argument("--adapter", metavar="DIR",
                       help="a folder: PEFT's LoRA adapter (finetune_lm.py --out DIR writes "
                            "DIR/adapter) put on its model")
        p.add_argument("--prompts", metavar="FILE|-",
                       help="prompts from a file (-: standard input), one a line (\\n in a "
                            "line: a newline), continued in batches; one line printed for "
                            "each continuation, in order (its newlines written \\n)")
        p.add_argument("--template", metavar="TEXT",
                       help="with --prompts: each prompt put in TEXT's {} (\\n: a newline), "
                            "e.g. \"English: {}\\nSpanish:\"")
        p.add_argument("--batch-size", type=positive_int, default=8,
                       help="with --prompts: prompts continued together (padded on the "
                            "left; each gives what it gives alone)")
        add_weights_argument(p)
        p.add_argument("--max-new-tokens", type=positive_int, default=None)
        p.add_argument("--seed", type=int, default=None)
        p.add_argument("--model-class", metavar="MODULE:CLASS",
                       help="the TransformerGPT subclass the checkpoint was trained with")
        args = p.parse_args(argv)
        args.stop = [unescaped(stop) for stop in args.stop]       # "\\n": a newline
        if args.template is not None and (args.prompts is None or "{}" not in args.template):
            p.error("--template wraps each of --prompts' prompts: it needs --prompts and a "
                    "{} where the prompt goes")
        if hugging_face_folder(args.checkpoint):
            return folder_prompts(p, args)
        if args.chat or args.bf16 or args.system or args.adapter:
            p.error("--chat, --system, --bf16 and --adapter are for a Hugging Face folder, "
                    "not a checkpoint")
        path, prompt = _prompt_arguments(p, args)
        gpt, _, payload = TransformerGPT.from_checkpoint(path, model_class=args.model_class,
                                                         weights=args.weights)
        take_best_use(args, payload, path)
        if args.quantize:
            gpt.quantize(args.quantize)
        options = {"num_samples": args.samples or 3,
                   "temperature": 0.8 if args.temperature is None else args.temperature,
                   "top_k": 40 if args.top_k is None else args.top_k or None,
                   "max_new_tokens": args.max_new_tokens, "seed": args.seed,
                   "top_p": args.top_p, "stop": args.stop,
                   "repetition_penalty": args.repetition_penalty or 1.0}
        greedy_without_sampling_flags(args, options)
        if args.prompts:
            if prompt is not None:
                p.error("give the prompts in --prompts' file or as PROMPT, not both")
            return print_batched(gpt, args, options)
        prompts = [prompt] if prompt is not None else (line.rstrip("\n") for line in sys.stdin)
        status = 0
        for text in prompts:
            try:
                outs = gpt.generate(text, **options)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                status = 1
                continue
            print("\n".join(f"{text!r} -> {out}" for out in outs))
        return status
    return run_job(run, argv)


def pretraining_parser():
    p = Parser(
        description="Pre-train, then fine-tune, with scarce translation pairs: N pairs of "
                    "an archive as labelled data, the Spanish (and English) of the others as "
                    "unlabelled text; every run gets the same number of optimiser steps.")
    p.add_argument("--archive", default=BUNDLED_ARCHIVE)
    p.add_argument("--results", metavar="FILE.json",
                   help="add each run's row to a result file (docs/results/pretraining.json)")
    p.add_argument("--pairs", type=positive_ints, default=[10_000], metavar="N[,N...]",
                   help="labelled pairs (several: the experiment for each, e.g. 1000,3000)")
    p.add_argument("--steps", type=positive_int, default=3000,
                   help="optimiser steps of each run, pre-training included unless "
                        "--pretraining outside")
    p.add_argument("--pretrain-steps", type=positive_int, default=1500,
                   help="runs b and c: steps of GPT pre-training")
    p.add_argument("--pretraining", choices=("inside", "outside"), default="inside",
                   help="inside: pre-training steps count in --steps; outside: they do not "
                        "(a pre-trained model is reused in practice), and every run "
                        "fine-tunes all --steps")
    p.add_argument("--runs", default="a,b",
                   help="a: from scratch; b: decoder from a GPT on the unlabelled Spanish; "
                        "c: encoder too, from a GPT on the unlabelled English")
    p.add_argument("--tokenizers", default="word,bpe", help="word, bpe or both")
    p.add_argument("--vocab-size", type=positive_int, default=8000, help="BPE pieces")
    p.add_argument("--variant", choices=("PreLN", "FG"), default="PreLN")
    p.add_argument("--embedding-size", type=positive_int, default=128)
    p.add_argument("--num-layers", type=positive_int, default=2)
    p.add_argument("--num-atten-heads", type=positive_int, default=4)
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--learning-rate", type=positive_float, default=5e-4)
    p.add_argument("--num-warmup-steps", type=positive_int, default=1000, help="FG only")
    p.add_argument("--dropout", type=nonnegative_float, default=0.1)
    p.add_argument("--label-smoothing", type=nonnegative_float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true")
    return p


def _experiment_setup(p, args):
    runs, tokenizers = args.runs.split(","), args.tokenizers.split(",")
    if not set(runs) <= {"a", "b", "c"} or not set(tokenizers) <= {"word", "bpe"}:
        p.error(f"--runs takes a, b, c and --tokenizers word, bpe (got {args.runs!r}, "
                f"{args.tokenizers!r})")
    if ({"b", "c"} & set(runs)) and args.pretraining == "inside" and \
            args.pretrain_steps >= args.steps:
        p.error(f"--pretrain-steps ({args.pretrain_steps}) must be fewer than --steps "
                f"({args.steps}): the rest of the budget fine-tunes")
    return runs, tokenizers


def pretraining_main(argv=None):
    """``pretraining_experiment.py``: the runs of each tokenizer, and a table of their
    held-out BLEU."""
    from ..data import Corpus
    from ..data.vocabulary import TranslationData, build_vocabulary
    from ..Transformers import TransformerFG, TransformerPreLN
    from .experiments import machine, pretraining_run, scarce_labels

    def run(argv):
        single_process_only("pretraining_experiment.py")
        p = pretraining_parser()
        args = p.parse_args(argv)
        runs, tokenizers = _experiment_setup(p, args)
        corpus = load_archive(resolve_archive(args.archive))
        cls = TransformerPreLN if args.variant == "PreLN" else TransformerFG
        counted = args.pretraining == "inside"
        print(f"machine: {machine()}\nTransformer{args.variant} {args.embedding_size}, "
              f"{args.num_layers}+{args.num_layers} layers; {args.steps} steps a run"
              + (", pre-training included" if counted else
                 f" of fine-tuning, after {args.pretrain_steps} of pre-training (not "
                 "counted)"), flush=True)
        rows = []
        for num_pairs in args.pairs:
            labelled, held_out, text_en, text_es = scarce_labels(corpus, num_pairs, args.seed)
            print(f"{args.archive}: {len(labelled)} labelled pairs, {len(text_es)} unlabelled "
                  f"Spanish and {len(text_en)} English sentences, "
                  f"{len({en for en, _ in held_out})} held-out English sentences", flush=True)
            text = {"en": text_en, "es": text_es}
            # Every run sees the same tokenizers, learnt from all the text any run may see.
            everything = labelled + [(en, "") for en in text_en] + [("", es) for es in text_es]
            for tokenizer in tokenizers:
                vocab = build_vocabulary(corpus, everything, tokenizer, args.vocab_size,
                                         "training")

                def make_container(vocab=vocab, labelled=labelled, held_out=held_out):
                    dls = DLStudio(use_gpu=not args.cpu, batch_size=args.batch_size,
                                   epochs=10_000, seed=args.seed,
                                   learning_rate=args.learning_rate)
                    data = TranslationData(Corpus(labelled + held_out, [], []), vocab,
                                           split=(labelled, held_out))        # this split
                    x = cls(dl_studio=dls, data=data, embedding_size=args.embedding_size,
                            num_warmup_steps=args.num_warmup_steps, dropout=args.dropout,
                            label_smoothing=args.label_smoothing, save_checkpoints=False)
                    return (x, x.MasterEncoder(dls, x, args.num_layers, args.num_atten_heads),
                            x.MasterDecoderWithMasking(dls, x, args.num_layers,
                                                       args.num_atten_heads))

                for name in runs:
                    row = pretraining_run(make_container, name, args.steps,
                                          args.pretrain_steps, text,
                                          (args.num_layers, args.num_atten_heads),
                                          report=lambda r: print(_format_row(r), flush=True),
                                          counted=counted)
                    rows.append(dict(row, tokenizer=tokenizer, pairs=len(labelled)))
        print("\n" + _table(rows))
        if args.results:
            _keep_rows(args, argv, rows)
        return 0
    return run_job(run, argv)


def _keep_rows(args, argv, rows):
    """``--results``: each run as docs/results/pretraining.json holds it."""
    from .common.results import as_typed, record
    command = as_typed("ExamplesTransformers/pretraining_experiment.py",
                       sys.argv[1:] if argv is None else argv)
    for r in rows:
        pre = r["pretrain_steps"]
        record(args.results, {
            "pretraining": args.pretraining, "pairs": r["pairs"], "run": f"{r['run']}: "
            f"{_RUNS[r['run']]}", "tokenizer": f"BPE {args.vocab_size:,}"
            if r["tokenizer"] == "bpe" else r["tokenizer"],
            "steps": f"{pre:,} + {r['finetune_steps']:,}",
            "minutes": f"{r['pretrain_minutes']:.1f} + {r['finetune_minutes']:.1f}" if pre
            else f"{r['finetune_minutes']:.1f}",
            "gpt_perplexity": ", ".join(f"{lang} {r[f'ppl_{lang}']:.1f}" for lang in ("es", "en")
                                        if f"ppl_{lang}" in r),
            "bleu": round(r["bleu"], 2), "sacrebleu": round(r["sacrebleu"], 2),
            "translatable": r["translatable"], "sentences": r["sentences"]}, command)
    print(f"rows added to {args.results}")


_RUNS = {"a": "from scratch", "b": "decoder pre-trained (GPT, Spanish)",
         "c": "encoder and decoder pre-trained"}


def _format_row(r):
    ppl = "".join(f", GPT perplexity ({lang}) {r[f'ppl_{lang}']:.1f} per piece, "
                  f"{r[f'ppl_word_{lang}']:.1f} per word" for lang in ("es", "en")
                  if f"ppl_{lang}" in r)
    return (f"run {r['run']} ({_RUNS[r['run']]}): {r['pretrain_steps']} + "
            f"{r['finetune_steps']} steps, {r['pretrain_minutes']:.1f} + "
            f"{r['finetune_minutes']:.1f} min{ppl}; held-out BLEU {r['bleu']:.2f} (sacreBLEU "
            f"{r['sacrebleu']:.2f}), {r['translatable']}/{r['sentences']} translatable")


def _table(rows):
    lines = ["| pairs | tokenizer | run | steps (pre-train + fine-tune) | minutes | held-out "
             "BLEU (sacreBLEU) | translatable |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['pairs']:,} | {r['tokenizer']} | {r['run']}: {_RUNS[r['run']]} | "
                     f"{r['pretrain_steps']} + {r['finetune_steps']} | "
                     f"{r['pretrain_minutes'] + r['finetune_minutes']:.1f} | "
                     f"{r['bleu']:.2f} ({r['sacrebleu']:.2f}) | "
                     f"{r['translatable']} / {r['sentences']} |")
    return "\n".join(lines)
