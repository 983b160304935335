"""The translation scripts on a Hugging Face translation folder (OPUS-MT's MarianMTModel
read into TransformerFG, T5's into TransformerPreLN: containers/hub_seq2seq):
translate_sentence.py FOLDER, test_checkpointFG.py FOLDER --archive / DIR N --against FOLDER,
and seq2seq_with_transformerFG.py (PreLN.py) --from-folder FOLDER (fine-tuning, every
weight or LoRA)."""

import os

from ..containers.hub import write_adapter
from ..containers.hub_seq2seq import layout_of
from ..data.vocabulary import TranslationData
from ..evaluation.decode_and_score import translation_loss
from ..runtime.studio import DLStudio
from ..Transformers import TransformerFG, TransformerPreLN
from .common import UserError, resolve_archive, subclass_of

__all__ = ["folder_translator", "score_folder", "finetune_folder", "add_folder_arguments",
           "folder_class", "add_language_arguments", "languages_of"]


#: Each family's names of its attention's four projections (--lora-targets' default).
ATTENTION_NAMES = {"MarianMTModel": "q_proj,k_proj,v_proj,out_proj",
                   "BartForConditionalGeneration": "q_proj,k_proj,v_proj,out_proj",
                   "MBartForConditionalGeneration": "q_proj,k_proj,v_proj,out_proj",
                   "T5ForConditionalGeneration": "q,k,v,o"}


def folder_class(path, model_class=None):
    """The container a folder is read into: TransformerFG (Marian) or TransformerPreLN (T5),
    or ``model_class`` ("module:Class"), a subclass of yours of that one."""
    base = {"FG": TransformerFG, "PreLN": TransformerPreLN}[layout_of(path)]
    return subclass_of(model_class, base) if model_class else base


def add_language_arguments(parser):
    """``--source-lang CODE --target-lang CODE``: an mBART folder's languages."""
    parser.add_argument("--source-lang", metavar="CODE",
                        help="an mBART folder: the source's language code (en_XX, de_DE ...; "
                             "by default its tokenizer_config.json's src_lang)")
    parser.add_argument("--target-lang", metavar="CODE",
                        help="an mBART folder: the target's language code (es_XX, fr_XX ...; "
                             "by default its tgt_lang); the decoder starts from it")


def languages_of(args, parser=None, folder=True):
    """(source, target) of --source-lang and --target-lang (None where not given), or None
    for neither; on a checkpoint of ours (``folder`` false) given either, the parser's
    error."""
    pair = (getattr(args, "source_lang", None), getattr(args, "target_lang", None))
    if any(pair) and not folder:
        parser.error("--source-lang and --target-lang choose an mBART folder's languages; "
                     "a checkpoint of ours translates the languages it was trained on")
    return pair if any(pair) else None


def folder_translator(parser, args):
    """(xformer, model, sentence) of ``translate_sentence.py FOLDER "sentence"``: a Hugging
    Face translation folder read into its container (or ``--model-class``, a subclass of
    yours: `folder_class`), decoding as its generation_config.json says unless --beam says
    otherwise."""
    if len(args.more) != 1:
        parser.error(f"{args.checkpoint} is a model folder: give one sentence after it "
                     f"(or -), not {' '.join(args.more)}")
    if getattr(args, "ensemble", None):
        parser.error("--ensemble averages checkpoints of ours, not a model folder")
    xformer, model, _ = folder_class(args.checkpoint, args.model_class).from_huggingface(
        args.checkpoint, languages=languages_of(args))
    return xformer, model, args.more[0]


def score_folder(parser, args, folder=None, pairs=None):
    """``test_checkpointFG.py FOLDER --archive A``: a Hugging Face translation folder
    scored on an archive's held-out split (the one a run of ours on it holds out: 5%, split
    seed 0), or on ``pairs``; its output compared as the archive writes Spanish (lower case,
    no punctuation). Returns the scores (or 0 as the script's status, without ``pairs``)."""
    folder = folder or args.checkpoint
    if pairs is None and not args.archive:
        parser.error(f"{folder} is a model folder, with no pairs of its own: give --archive "
                     "(the archive, or --pairs file, to score it on: bundled names ours)")
    if pairs is None:
        pairs = TranslationData.read(resolve_archive(args.archive))[0].held_out_pairs
    xformer, model, _ = folder_class(folder).from_huggingface(folder,
                                                              languages=languages_of(args))
    rules = xformer.generation_rules
    beam = args.beam or rules.num_beams
    print(f"\n{xformer.folder_architecture} {folder} ({len(pairs)} held-out pairs, beam "
          f"{beam}{f', length penalty {rules.length_penalty}' if beam > 1 else ''}):\n")
    result = xformer.run_code_for_evaluating(None, None, beam_width=beam, model=model,
                                             show=args.show, pairs=pairs,
                                             precision=args.precision,
                                             length_penalty=args.length_penalty)
    loss = translation_loss(model, xformer.vocab, pairs)
    print(f"held-out loss {loss['loss']:.3f} a Spanish piece, perplexity "
          f"{loss['perplexity']:.2f} (teacher-forced on the {loss['tokens']:,} pieces of "
          f"the references as the archive writes them)")
    return result if args.checkpoint != folder else 0


def add_folder_arguments(parser):
    """The training script's flags for fine-tuning a real model's folder."""
    parser.add_argument("--from-folder", metavar="FOLDER",
                        help="fine-tune a Hugging Face translation model (OPUS-MT's folder) "
                             "on --archive or --pairs, its sizes and tokenizer its own (the "
                             "size and tokenizer flags do not apply); Adam at "
                             "--learning-rate, no warm-up")
    parser.add_argument("--lora-rank", type=int, default=0, metavar="R",
                        help="with --from-folder: LoRA of rank R on --lora-targets, every "
                             "other weight frozen; the adapter is written as PEFT writes one "
                             "(CHECKPOINTS_DIR/adapter; 0: every weight learns)")
    parser.add_argument("--lora-targets", default=None,
                        help="with --lora-rank: the modules, by the folder's names (Marian's "
                             "q_proj, k_proj, v_proj, out_proj in self- and cross-attention, "
                             "fc1, fc2; T5's q, k, v, o, wi or wi_0 and wi_1, wo; by "
                             "default the four attention projections)")
    add_language_arguments(parser)


def finetune_folder(variant, args, archive):
    """``seq2seq_with_transformerFG.py --from-folder FOLDER --archive A``: the folder's model
    trained on the archive's pairs through the trainer (checkpoints, --resume, budgets,
    progress), scored on its held-out split; with --lora-rank, its adapter written."""
    layout = layout_of(args.from_folder)
    if variant != layout:
        raise UserError(f"--from-folder {args.from_folder} is a {layout} model: use "
                        f"seq2seq_with_transformer{layout}.py")
    if args.lora_rank < 0:
        raise UserError(f"--lora-rank is a rank (>= 1), or 0 for every weight; got "
                        f"{args.lora_rank}")
    cls = folder_class(args.from_folder, args.model_class)
    dls = DLStudio(path_saved_model=os.path.join(args.checkpoints_dir, f"saved_{layout}.pt"),
                   learning_rate=args.learning_rate, batch_size=args.batch_size,
                   epochs=args.epochs, use_gpu=not args.cpu, seed=args.seed)
    xformer, model, _ = cls.from_huggingface(
        args.from_folder, dls, data_archive=archive, languages=languages_of(args),
        checkpoint_freq=args.checkpoint_freq,
        label_smoothing=args.label_smoothing, dropout=args.dropout, schedule=args.schedule)
    how = "every weight learns"
    if args.lora_rank:
        targets = [t for t in (args.lora_targets or ATTENTION_NAMES[
            xformer.folder_architecture]).split(",") if t]
        learns = model.add_lora(rank=args.lora_rank, alpha=2 * args.lora_rank,
                                targets=targets)
        how = f"LoRA of rank {args.lora_rank} on {', '.join(targets)}: {learns:,} weights learn"
    print(f"{xformer.folder_architecture} {args.from_folder} fine-tuned on {archive}: "
          f"{len(xformer.training_corpus)} training pairs, {len(xformer.held_out_corpus)} "
          f"held out; {sum(p.numel() for p in model.parameters()):,} parameters; {how}; "
          f"device {dls.device}")
    trainer = xformer.run_code_for_training(
        dls, model.encoder, model.decoder, display_train_loss=True,
        checkpoints_dir=args.checkpoints_dir, max_minutes=args.max_minutes,
        max_steps=args.max_steps, overwrite=args.overwrite, resume=args.resume,
        track_bleu=args.track_bleu, precision=args.precision)
    if not dls.world.is_main:
        return trainer
    if args.lora_rank:
        out = write_adapter(model, os.path.join(args.checkpoints_dir, "adapter"))
        print(f"the adapter, as PEFT writes one: {out} (PeftModel.from_pretrained("
              f"AutoModelForSeq2SeqLM.from_pretrained({args.from_folder!r}), {out!r}))")
    if not args.no_eval:
        xformer.run_code_for_evaluating(None, None, model=model.eval(), show=5)
    return trainer
