"""The translation scripts: train (seq2seq_with_transformerFG.py / PreLN), test a checkpoint,
translate your own English, the homework runner and the demo (``make demo``)."""

import os
import sys

from ..checkpoints import find_checkpoint, load_checkpoint
from ..containers.pretrained import init_from_gpt
from ..data import BUNDLED_ARCHIVE
from ..runtime.distributed import single_process_only
from ..runtime.studio import DLStudio
from ..Transformers import TransformerBase, TransformerFG, TransformerPreLN
from .common import (
    LECTURE,
    RECIPES,
    Parser,
    UserError,
    add_beam_argument,
    add_checkpoint_arguments,
    add_decoding_precision,
    add_run_arguments,
    add_since_2017_arguments,
    add_weights_argument,
    checkpoint_arguments,
    existing_file,
    how_to_run,
    hugging_face_folder,
    load_translation,
    log,
    model_class_flag,
    nonnegative_float,
    positive_float,
    positive_int,
    resolve_archive,
    run_job,
    say_how_to_test,
    since_2017,
    subclass_of,
)
from .ensemble import add_ensemble_argument, add_members_argument, train_members, with_ensemble
from .translation_folder import (
    add_folder_arguments,
    add_language_arguments,
    finetune_folder,
    folder_translator,
    languages_of,
    score_folder,
)

_VARIANTS = {"FG": TransformerFG, "PreLN": TransformerPreLN}


def training_parser(variant):
    p = Parser(
        description=f"Train Transformer{variant} for English-to-Spanish translation. With no "
                    "arguments: the lecture's configuration.")
    L = LECTURE
    data = p.add_mutually_exclusive_group()
    data.add_argument("--archive", default=L["archive"],
                      help="DLStudio archive (default: %(default)s; 'bundled': the corpus "
                           "that comes with the package)")
    data.add_argument("--pairs", metavar="FILE.tsv", type=existing_file,
                      help="your own sentence pairs instead of an archive: one "
                           "'English<TAB>Spanish' line each (Tatoeba/Anki files as they are), "
                           "curated as build-archive does")
    p.add_argument("--max-words", type=positive_int, default=None,
                   help="--pairs: keep pairs of at most this many words a side (default: "
                        "--max-seq-length minus 2)")
    p.add_argument("--epochs", type=positive_int, default=L["epochs"])
    p.add_argument("--batch-size", type=positive_int, default=L["batch_size"])
    p.add_argument("--embedding-size", type=positive_int, default=L["embedding_size"])
    p.add_argument("--num-layers", type=positive_int, default=L["num_layers"],
                   help="basic encoders and basic decoders (each)")
    p.add_argument("--num-encoder-layers", type=positive_int, default=None, metavar="N",
                   help="encoder layers, when they differ from --num-layers (a deep encoder "
                        "and a shallow decoder translate about as well, faster: Kasai et al. "
                        "2021)")
    p.add_argument("--num-decoder-layers", type=positive_int, default=None, metavar="N",
                   help="decoder layers, when they differ from --num-layers")
    p.add_argument("--num-atten-heads", type=positive_int, default=L["num_atten_heads"])
    p.add_argument("--feed-forward-size", type=positive_int, default=None, metavar="F",
                   help="the feed-forward network's hidden width (default: 2 x "
                        "--embedding-size, the lecture's; 2017's model had 4 x; swiglu's "
                        "hidden width is round(2 F / 3), for the same number of weights)")
    p.add_argument("--max-seq-length", type=positive_int, default=L["max_seq_length"],
                   help="tokens per sentence, SOS and EOS included (with BPE: pieces; it "
                        "grows to fit the longest training sentence)")
    p.add_argument("--tokenizer", choices=("word", "bpe"), default="word",
                   help="word: DLStudio's word vocabularies; bpe: byte-level subword pieces "
                        "learnt from the training split (any English sentence translates)")
    p.add_argument("--vocab-size", type=positive_int, default=8000,
                   help="BPE: pieces per language, or in all with --shared-vocab (default: "
                        "%(default)s)")
    p.add_argument("--shared-vocab", action="store_true",
                   help="BPE: one vocabulary learnt from both languages, and one matrix for "
                        "the encoder's and decoder's embeddings and the output layer "
                        "(Vaswani et al. 2017, 3.4)")
    p.add_argument("--vocab-from", choices=("archive", "training"), default="archive",
                   help="word level: the archive's vocabularies (DLStudio's) or the words of "
                        "the training split only")
    p.add_argument("--num-warmup-steps", type=positive_int, default=L["num_warmup_steps"],
                   help="FG's warm-up")
    p.add_argument("--lr-mul", type=positive_float, default=L["lr_mul"],
                   help="FG: scales the warm-up schedule")
    p.add_argument("--learning-rate", type=positive_float, default=L["learning_rate"],
                   help="PreLN: Adam's constant rate")
    p.add_argument("--dropout", type=nonnegative_float, default=0.0)
    p.add_argument("--label-smoothing", type=nonnegative_float, default=0.0)
    add_run_arguments(p, f"checkpoints_with_masking_{variant}", "bleu",
                      "BLEU on the held-out split")
    p.add_argument("--full-width-heads", action="store_true",
                   help="heads read the whole embedding, with an output projection W^O")
    p.add_argument("--tie-embeddings", action="store_true",
                   help="the output layer shares the Spanish embedding matrix")
    p.add_argument("--learned-positions", action="store_true",
                   help="the same as --positions learned (its older name)")
    add_since_2017_arguments(p)
    p.add_argument("--init-decoder-from", nargs="+", metavar=("DIR", "N"),
                   help="start the decoder from a GPT checkpoint (train_gpt.py; N: an "
                        "epoch or 'last', the default): its Spanish tokenizer, embeddings, "
                        "self-attention and feed-forward layers, output layer")
    p.add_argument("--init-encoder-from", nargs="+", metavar=("DIR", "N"),
                   help="start the encoder from a GPT checkpoint trained on English")
    p.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation")
    add_members_argument(p)
    p.add_argument("--recipe", choices=sorted(RECIPES),
                   help="a measured recipe: defaults for the flags above, which flags given "
                        "beside it still override (today30: docs/results.md's 30-minute "
                        "recipe; fast30: with averaged weights and a beam; modern30: today's "
                        "parts, the PreLN script's); the held-out evaluation then also gives "
                        "its other decodings")
    p.add_argument("--results", metavar="FILE.json",
                   help="add this run's held-out figures to a result file (docs/results/)")
    p.add_argument("--results-command", metavar="TEXT",
                   help="the command to record beside them (default: this script's)")
    model_class_flag(p, f"train this subclass of Transformer{variant} (homework)")
    add_folder_arguments(p)
    return p


def parse_training_args(variant, argv):
    """The training flags; with ``--recipe NAME``, the recipe's values are the defaults."""
    p = training_parser(variant)
    args = p.parse_args(argv)
    if args.recipe:
        recipe = RECIPES[args.recipe]
        if recipe.get("variant", variant) != variant:
            raise UserError(
                f"--recipe {args.recipe} trains Transformer{recipe['variant']}, and this script "
                f"trains Transformer{variant}: run seq2seq_with_transformer{recipe['variant']}.py "
                f"--recipe {args.recipe}")
        p.set_defaults(**{k: v for k, v in recipe.items() if k not in ("also_score", "variant")})
        args = p.parse_args(argv)
    given = {a.split("=")[0] for a in argv or sys.argv[1:] if a.startswith("--")}
    fg_only = sorted(given & {"--num-warmup-steps", "--lr-mul"})
    if variant == "PreLN" and fg_only:
        print(f"note: {' and '.join(fg_only)} set FG's warm-up; PreLN has none and trains at "
              f"Adam's constant --learning-rate ({args.learning_rate:g})")
    return args


def recipe_scores(args, xformer, trainer):
    """A recipe's other decodings of the held-out split, after its greedy raw score: each
    (weights, beam width, length penalty) it names. Returns them with their BLEU."""
    from .common.results import scored_decoding
    scores = []
    for weights, beam, alpha in RECIPES[args.recipe].get("also_score", ()) if args.recipe \
            else ():
        model = trainer.average if weights == "average" else trainer.model
        if model is None:
            continue                        # no average: the run had no --ema
        scores.append(scored_decoding(model.eval(), xformer, weights, beam, alpha))
    return scores


def record_run(args, argv, variant, xformer, trainer, greedy, scores):
    """``--results FILE``: the run's figures, added to the result file."""
    from .common.results import as_typed, record
    command = args.results_command or as_typed(
        f"ExamplesTransformers/seq2seq_with_transformer{variant}.py",
        sys.argv[1:] if argv is None else argv)
    record(args.results, {
        "recipe": args.recipe, "variant": variant, "seed": args.seed,
        "precision": args.precision,
        "training_pairs": len(xformer.training_corpus),
        "held_out_pairs": len(xformer.held_out_corpus), "budget_minutes": args.max_minutes,
        "steps": trainer.step,
        "train_minutes": round(trainer.seconds_trained() / 60, 1),
        "greedy_bleu": round(greedy["bleu"], 2), "other_decodings": scores}, command)
    print(f"figures added to {args.results}")


def recipe_decoding(args):
    """The decoding a recipe reports last ({"beam", "length_penalty"}), which a checkpoint
    with averaged weights records as its best use; None: greedy."""
    scored = RECIPES[args.recipe].get("also_score") if args.recipe else None
    return {"beam": scored[-1][1], "length_penalty": scored[-1][2]} if scored else None


def _longest(vocab):
    n = getattr(vocab, "longest_training_sentence", None)
    return "" if n is None or vocab.kind == "word" else \
        f" (the longest training sentence is {n}; twice that, for words never seen)"


def _vocabularies(xformer):
    if xformer.shared_vocab:
        return f"one vocabulary of {xformer.vocab_en_size} BPE pieces for both languages"
    return (f"vocabularies {xformer.vocab_en_size} / {xformer.vocab_es_size} "
            f"{'words' if xformer.tokenizer == 'word' else 'BPE pieces'}")


def _gpt_checkpoints(args):
    """``--init-decoder-from`` / ``--init-encoder-from DIR [N]``: side -> (path, payload)."""
    found = {}
    for side, given in (("decoder", args.init_decoder_from),
                        ("encoder", args.init_encoder_from)):
        if given and args.shared_vocab:
            raise UserError(f"--init-{side}-from and --shared-vocab do not go together: a "
                            "GPT's embeddings are of its own tokenizer, learnt from one "
                            "language, and a shared vocabulary is learnt from both, so its "
                            "pieces have other ids. Start from the GPT without --shared-vocab, "
                            "or train with --shared-vocab from scratch")
        if given:
            if len(given) > 2:
                raise UserError(f"--init-{side}-from takes DIR and at most one N, not "
                                f"{' '.join(given)}")
            path = find_checkpoint(given[0], given[1] if len(given) > 1 else None,
                                   how_to_run("train_gpt"))
            found[side] = (path, load_checkpoint(path))
    return found


def _data_for_gpts(gpts, archive, args, pairs_options=None):
    """When a GPT starts a stack: the corpus, read once as the container reads it, its
    pairs file's settings, and the translation vocabulary: the GPT's tokenizer for its
    language (its embeddings are of those tokens), the other language's as --tokenizer
    says, learnt from the training split the container makes. Without a GPT: (None,
    pairs_options, None), and the container reads the data itself."""
    if not gpts:
        return None, pairs_options, None
    from ..data import split_pairs
    from ..data.vocabulary import build_vocabulary, read_corpus, tokenizer_from_state
    given = {}
    for side, (path, payload) in gpts.items():
        if payload.get("variant") != "GPT":
            raise UserError(f"{path} holds a {payload.get('variant')} model, not a GPT "
                            "(train one with train_gpt.py)")
        given["es" if side == "decoder" else "en"] = tokenizer_from_state(
            payload["tokenizer_state"])
    corpus, pairs_options = read_corpus(archive, args.max_seq_length, args.tokenizer,
                                        pairs_options)
    vocab = build_vocabulary(corpus, split_pairs(corpus.pairs)[0], args.tokenizer,
                             args.vocab_size, args.vocab_from, args.max_seq_length, given)
    return corpus, pairs_options, vocab


def train_main(variant, argv=None):
    """``seq2seq_with_transformer{FG,PreLN}.py``: train, checkpoint, evaluate."""
    def run(argv):
        args = parse_training_args(variant, argv)
        if args.members > 1:
            return train_members(variant, args, argv, training_parser(variant))
        if args.max_words and not args.pairs:
            raise UserError("--max-words goes with --pairs (an archive is curated already)")
        archive = args.pairs or resolve_archive(args.archive)
        if args.from_folder:               # a real model (OPUS-MT), fine-tuned on the pairs
            trainer = finetune_folder(variant, args, archive)
            say_how_to_test(f"test_checkpoint{variant}", trainer, args.model_class)
            return 0
        if args.lora_rank:
            raise UserError("--lora-rank fine-tunes a real model: give --from-folder FOLDER")
        pairs_options = None
        if args.pairs:
            pairs_options = {"max_words": args.max_words or args.max_seq_length - 2}
        cls = _VARIANTS[variant]
        if args.model_class:
            cls = subclass_of(args.model_class, cls)
        dls = DLStudio(dataroot=os.path.dirname(archive) or ".",
                       path_saved_model=os.path.join(args.checkpoints_dir, f"saved_{variant}.pt"),
                       learning_rate=args.learning_rate, batch_size=args.batch_size,
                       epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
        gpts = _gpt_checkpoints(args)
        corpus, pairs_options, vocab = _data_for_gpts(gpts, archive, args, pairs_options)
        xformer = cls(dl_studio=dls, data_archive=archive, corpus=corpus,
                      max_seq_length=args.max_seq_length,
                      embedding_size=args.embedding_size, num_warmup_steps=args.num_warmup_steps,
                      schedule=args.schedule,
                      lr_mul=args.lr_mul, checkpoint_freq=args.checkpoint_freq,
                      dropout=args.dropout, label_smoothing=args.label_smoothing,
                      full_width_heads=args.full_width_heads,
                      tie_embeddings=args.tie_embeddings,
                      feed_forward_size=args.feed_forward_size,
                      learned_positions=args.learned_positions, tokenizer=args.tokenizer,
                      vocab_size=args.vocab_size if args.tokenizer == "bpe" else None,
                      vocab_from=args.vocab_from, shared_vocab=args.shared_vocab,
                      pairs_options=pairs_options, vocab=vocab, **since_2017(args))
        encoder = cls.MasterEncoder(dls, xformer,
                                    num_basic_encoders=args.num_encoder_layers or args.num_layers,
                                    num_atten_heads=args.num_atten_heads)
        decoder = cls.MasterDecoderWithMasking(dls, xformer,
                                               num_basic_decoders=args.num_decoder_layers
                                               or args.num_layers,
                                               num_atten_heads=args.num_atten_heads)
        for side, (path, payload) in gpts.items():
            stack = decoder if side == "decoder" else encoder
            n = init_from_gpt(xformer, stack, payload, side)
            print(f"the {side} starts from the GPT {path}: {n:,} of its numbers copied")
        n_params = sum(p.numel() for p in xformer.EncoderDecoder(xformer, encoder, decoder)
                       .parameters())
        print(f"{cls.__name__} on {archive}: {len(xformer.training_corpus)} training "
              f"pairs, {len(xformer.held_out_corpus)} held out; "
              f"{_vocabularies(xformer)}; max_seq_length "
              f"{xformer.max_seq_length} {xformer.vocab.unit}{_longest(xformer.vocab)}; "
              f"{n_params:,} parameters; "
              f"device {dls.device}")
        trainer = xformer.run_code_for_training(
            dls, encoder, decoder, display_train_loss=True, checkpoints_dir=args.checkpoints_dir,
            max_minutes=args.max_minutes, max_steps=args.max_steps,
            ema=args.ema, decoding=recipe_decoding(args), overwrite=args.overwrite,
            resume=args.resume, track_bleu=args.track_bleu,
            precision=args.precision, compile=args.compile)
        if not dls.world.is_main:           # torchrun: rank 0 evaluates
            return 0
        if not args.no_eval:
            greedy = xformer.run_code_for_evaluating(
                encoder, decoder, show=10,
                result_file=os.path.join(args.checkpoints_dir, "held_out_translations.txt"))
            scores = recipe_scores(args, xformer, trainer)
            if args.results:
                record_run(args, argv, variant, xformer, trainer, greedy, scores)
        say_how_to_test(f"test_checkpoint{variant}", trainer, args.model_class)
        return 0
    return run_job(run, argv)


def test_checkpoint_main(variant, argv=None):
    """``test_checkpoint{FG,PreLN}.py DIR N`` (or ``DIR last``, ``FILE.pt``): held-out
    translations and BLEU."""
    def run(argv):
        p = Parser(description="Translate held-out sentences with a "
                                                "checkpoint and score it with BLEU.")
        add_checkpoint_arguments(p, folder=True)
        p.add_argument("--archive", help="the archive (or --pairs file) it was trained on, "
                                         "if it has moved")
        add_language_arguments(p)
        add_beam_argument(p)
        add_weights_argument(p)
        p.add_argument("--show", type=int, default=20, help="translations to print")
        p.add_argument("--result-file", help="write every held-out translation here")
        p.add_argument("--against", metavar="FOLDER",
                       help="a Hugging Face translation folder (OPUS-MT) scored on the same "
                            "held-out sentences, its BLEU printed beside the checkpoint's")
        add_decoding_precision(p)
        add_ensemble_argument(p)
        model_class_flag(p, "the container class the checkpoint was trained with, when it "
                             "is a subclass of your own")
        args = p.parse_args(argv)
        if hugging_face_folder(args.checkpoint):     # OPUS-MT on an archive's held-out split
            return score_folder(p, args)
        languages_of(args, p, folder=bool(args.against))
        path = checkpoint_arguments(p, args)
        xformer, first = load_translation(path, args.archive, args.model_class, args=args)
        model = with_ensemble(args, xformer, first)
        if variant and xformer.variant != variant:
            log.warning("note: this is a Transformer%s checkpoint", xformer.variant)
        if not xformer.held_out_corpus:
            raise UserError("the archive this checkpoint was trained on is not where it was: "
                            "give it with --archive")
        beam = f"beam {args.beam}" + (f", length penalty {args.length_penalty}"
                                      if args.beam > 1 else "")
        print(f"Transformer{xformer.variant} checkpoint {path} "
              f"({len(xformer.held_out_corpus)} held-out pairs, {beam}):\n")
        ours = xformer.run_code_for_evaluating(first.encoder, first.decoder,
                                               result_file=args.result_file,
                                               beam_width=args.beam, checkpoint=None,
                                               show=args.show, model=model,
                                               precision=args.precision,
                                               length_penalty=args.length_penalty)
        if args.against:
            theirs = score_folder(p, args, args.against, xformer.held_out_corpus)
            print(f"\nOn the same {ours['sentences']} English sentences: this checkpoint "
                  f"{ours['bleu']:.2f}, {args.against} {theirs['bleu']:.2f} (NLTK BLEU)")
        return 0
    return run_job(run, argv)


def translate_main(argv=None):
    """``translate_sentence.py DIR N "sentence"`` (or ``FILE.pt "sentence"``; ``-`` reads
    standard input)."""
    def run(argv):
        p = Parser(description="Translate English with any checkpoint, or a real "
                                "translation model's folder.")
        add_checkpoint_arguments(p, sentence=True, folder=True)
        add_language_arguments(p)
        add_beam_argument(p)
        add_weights_argument(p)
        add_decoding_precision(p)
        add_ensemble_argument(p)
        model_class_flag(p, "the container class the checkpoint was trained with, when it "
                             "is a subclass of your own")
        args = p.parse_args(argv)
        if hugging_face_folder(args.checkpoint):     # a real model's folder (OPUS-MT)
            xformer, model, sentence = folder_translator(p, args)
        else:
            languages_of(args, p, folder=False)
            path, sentence = checkpoint_arguments(p, args, sentence=True)
            xformer, model = load_translation(path, model_class=args.model_class, args=args)
            model = with_ensemble(args, xformer, model)
        if sentence != "-":
            print(xformer.translate(model, [sentence], args.beam, args.precision,
                                    args.length_penalty)[0])
            return 0
        lines = [line.rstrip("\n") for line in sys.stdin]
        status, prepared = 0, []
        for line in lines:      # check every line first; a bad one gets its message
            try:
                prepared.append(xformer.vocab.prepare(line) if line.strip() else None)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                prepared.append(None)
                status = 1
        todo = [words for words in prepared if words]
        done = iter(xformer.translate(model, todo, args.beam, args.precision,
                                      args.length_penalty)) if todo \
            else iter(())
        for words in prepared:  # one translation per input line, in order
            print(next(done) if words else "")
        return status
    return run_job(run, argv)


# ---------------------------------------------------------------------------------------
# Homework: a subclass that changes one nested class, trained beside the unmodified model.
#: The homework scripts' sizes: small enough for a few minutes on a laptop CPU.
HOMEWORK = {"epochs": 3, "batch_size": 64, "embedding_size": 128, "num_layers": 2,
            "num_atten_heads": 4, "num_warmup_steps": 400}


def homework_main(homework_class, argv=None, report=None):
    """``homework_*.py``: train the standard container and ``homework_class`` the same way
    on the same data, print what each measured, then ``report(row)`` of the homework's.
    (``homework_class`` subclasses TransformerFG or TransformerPreLN.)"""
    from ..checkpoints import class_path
    from .experiments import compare_containers, format_comparison

    def run(argv):
        single_process_only(f"homework script for {homework_class.__name__}")
        h = HOMEWORK
        from .common import jobs
        script = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        p = Parser(description=f"Train {homework_class.__name__} beside the unmodified model "
                               "and compare them.",
                   prog=how_to_run(script) if jobs.launcher else None)   # dlstudio SCRIPT
        p.add_argument("--archive", default=BUNDLED_ARCHIVE)
        p.add_argument("--epochs", type=positive_int, default=h["epochs"])
        p.add_argument("--max-steps", type=positive_int, default=None)
        for name in ("batch_size", "embedding_size", "num_layers", "num_atten_heads",
                     "num_warmup_steps"):
            p.add_argument("--" + name.replace("_", "-"), type=positive_int, default=h[name])
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--out", default="homework_run", help="folder for the checkpoints")
        p.add_argument("--cpu", action="store_true")
        args = p.parse_args(argv)
        base = TransformerPreLN if issubclass(homework_class, TransformerPreLN) else TransformerFG
        settings = {k: v for k, v in vars(args).items() if k not in ("archive", "out", "cpu")}
        rows = compare_containers([base, homework_class], resolve_archive(args.archive),
                                  args.out, use_gpu=not args.cpu, **settings)
        print(f"\nThe same data, seed, sizes and {rows[0]['steps']} steps for each; held-out "
              "BLEU with greedy decoding:\n" + format_comparison(rows))
        if report:
            report(rows[1])
        if args.max_steps is None:         # whole epochs: checkpoint_<last epoch>.pt exists
            print(f"\nScore its checkpoint again (or translate_sentence with the same "
                  f"flag):\n  {how_to_run(f'test_checkpoint{base.variant}')} "
                  f"{rows[1]['checkpoints_dir']} {rows[1]['last_epoch']} "
                  f"--model-class {class_path(homework_class)}")
        return 0
    return run_job(run, argv)


# ---------------------------------------------------------------------------------------
# make demo: a few minutes of training on the bundled corpus, then translation and BLEU.
DEMO_SENTENCES = ["I will visit my grandmother tomorrow.", "Did the boys eat the red apples?",
                  "She is not tired today.", "We went to the beach last week."]


def demo_main(argv=None):
    """``demo.py`` (``make demo``): train TransformerFG on the bundled corpus, score it on the
    held-out split and translate sentences of our own."""
    import time

    from ..checkpoints import checkpoint_path, list_checkpoints

    p = Parser(description="Train TransformerFG on the bundled corpus for a "
                                            "few minutes, then translate sentences it has "
                                            "never seen and score them with BLEU.")
    p.add_argument("--epochs", type=positive_int, default=10)
    p.add_argument("--out", default="demo_run")
    p.add_argument("--archive", default=BUNDLED_ARCHIVE)
    p.add_argument("--embedding-size", type=positive_int, default=128)
    p.add_argument("--num-layers", type=positive_int, default=2)
    args = p.parse_args(argv)
    ckpt_dir = os.path.join(args.out, "checkpoints_FG")
    start = time.time()
    print(f"== Training TransformerFG on the bundled corpus ({args.archive})")
    status = train_main("FG", ["--archive", args.archive, "--epochs", str(args.epochs),
                               "--embedding-size", str(args.embedding_size),
                               "--num-layers", str(args.num_layers),
                               "--batch-size", "64", "--num-warmup-steps", "400",
                               "--checkpoints-dir", ckpt_dir, "--overwrite", "--no-eval"])
    if status:
        return status
    last = list_checkpoints(ckpt_dir)[-1]
    print(f"\n== Training took {time.time() - start:.0f} s. Checkpoints: "
          f"{list_checkpoints(ckpt_dir)}; loss curve: {ckpt_dir}/train_loss.png")
    print(f"\n== {how_to_run('test_checkpointFG')} {ckpt_dir} {last}")
    status = test_checkpoint_main("FG", [ckpt_dir, str(last), "--show", "12"])
    if status:
        return status
    print("\n== Sentences of our own:")
    xformer, model, _ = TransformerBase.from_checkpoint(checkpoint_path(ckpt_dir, last))
    for english in DEMO_SENTENCES:
        try:
            spanish = xformer.translate(model, [english])[0]
        except ValueError as e:      # another archive may not know every word of ours
            spanish = f"(not translated: {e})"
        print(f"  {english:40s} -> {spanish}")
    print(f"\n== Demo finished in {time.time() - start:.0f} s\n\nTranslate a sentence of "
          f"your own:\n  {how_to_run('translate_sentence')} {ckpt_dir} {last} "
          f'"{DEMO_SENTENCES[2]}"')
    return 0
