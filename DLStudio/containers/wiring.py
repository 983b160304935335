"""The containers' wiring: a container's model, data and settings handed to the trainer
(`translation_trainer`, `image_trainer`, `language_model_trainer`; DLStudio's
run_code_for_training of each is `train_translation`, `train_images`,
`train_language_model`) and to the evaluator (`evaluate_container`, `evaluate_images`), and
a visTransformer's images given to it (`use_datasets`). The trainer and the evaluator never
read a container: what they need is read here, once."""

import os

from ..checkpoints import (
    CheckpointError,
    Restored,
    container_class,
    corpus_fits,
    corpus_of,
    load_checkpoint,
    load_into,
    refuse_saved_model_of_theirs,
    save_final,
    saved_model_paths,
    with_weights,
)
from ..data import load_corpus
from ..data.images import dataset_of, image_data
from ..data.vocabulary import TranslationData, Vocabulary
from ..evaluation.decode_and_score import (
    LENGTH_PENALTY,
    classify,
    confusion_matrix,
    evaluate_bleu,
    format_confusion,
)
from ..evaluation.visualize import plot_confusion_matrix
from ..runtime.studio import DLStudio
from ..training.kinds import ImageTrainer, LanguageModelTrainer, TranslationTrainer

__all__ = ["trainer_settings", "translation_trainer", "image_trainer",
           "language_model_trainer", "train_translation", "train_images",
           "train_language_model", "evaluate_container", "evaluate_images", "use_datasets",
           "restored_translation"]


def trainer_settings(container):
    """The Trainer options a container's constructor set."""
    return {"checkpoint_freq": container.checkpoint_freq,
            "save_checkpoints": container.save_checkpoints,
            "label_smoothing": container.label_smoothing, "title": type(container).__name__,
            "also_move": saved_model_paths(container.dl_studio.path_saved_model)}


def translation_trainer(xformer, master_encoder, master_decoder, checkpoints_dir=None,
                        **options):
    """The trainer of ``run_code_for_training``: the container's model (both embedding
    generators and these stacks), vocabulary, training split, optimiser and settings."""
    model = xformer.model_of(master_encoder, master_decoder)
    model.to(xformer.dl_studio.device)
    return TranslationTrainer(model, xformer.vocab, xformer.training_corpus,
                              xformer.make_optimizer(model.parameters()), xformer.dl_studio,
                              checkpoints_dir, held_out=xformer.held_out_corpus,
                              **trainer_settings(xformer), **options)


def own_model(container):
    """A container that is itself the model (visTransformer, TransformerGPT), on its device;
    refused first, before any checkpoint moves, when its ``path_saved_model`` holds a file
    we did not write."""
    dls = container.dl_studio
    dls.world.on_main(refuse_saved_model_of_theirs, dls.path_saved_model)
    return container.to(dls.device)


def image_trainer(vit, checkpoints_dir=None, **options):
    """The trainer of a visTransformer: itself, its images, its optimiser and settings."""
    vit = own_model(vit)
    return ImageTrainer(vit, vit.data, vit.make_optimizer(vit.parameters()), vit.dl_studio,
                        checkpoints_dir, augment=vit.augment, **trainer_settings(vit),
                        **options)


def language_model_trainer(gpt, checkpoints_dir=None, **options):
    """The trainer of a TransformerGPT: itself, its text, its optimiser and settings."""
    gpt = own_model(gpt)
    return LanguageModelTrainer(gpt, gpt.data, gpt.make_optimizer(gpt.parameters()),
                                gpt.dl_studio, checkpoints_dir, **trainer_settings(gpt),
                                **options)


def train_translation(xformer, master_encoder, master_decoder, checkpoints_dir, **options):
    """``run_code_for_training``: train every parameter (both embedding generators
    included) on the training split, then write the final model to
    ``dl_studio.path_saved_model``. Returns the trainer."""
    xformer.dl_studio.world.on_main(refuse_saved_model_of_theirs,
                                    xformer.dl_studio.path_saved_model)
    trainer = translation_trainer(xformer, master_encoder, master_decoder, checkpoints_dir,
                                  **options)
    trainer.run()
    payload = trainer.payload(trainer.last_epoch, trainer.batches_done == 0)
    trainer.world.on_main(save_final, payload, xformer.dl_studio.path_saved_model)
    return trainer


def train_images(vit, model=None, checkpoint_dir=None, checkpoints_dir=None, callback=None,
                 **options):
    """``run_code_for_training_visTransformer``: train on the training images (those of
    ``dls.load_cifar_10_dataset()`` when the model has none), a checkpoint every
    ``checkpoint_freq`` epochs, the final model to ``dl_studio.path_saved_model``."""
    if model is not None and model is not vit:
        raise ValueError("visTransformer trains itself: pass the same model, or none")
    if vit.data is None and getattr(vit.dl_studio, "image_datasets", None):
        use_datasets(vit, *vit.dl_studio.image_datasets,
                     {"name": "cifar10", "dataroot": os.path.abspath(vit.dl_studio.dataroot)})
    folder = checkpoints_dir or checkpoint_dir or "checkpoints_visTrans"
    return image_trainer(vit, folder, **options).run_and_save(callback)


def train_language_model(gpt, checkpoints_dir="checkpoints_GPT", callback=None, **options):
    """``TransformerGPT.run_code_for_training``: train on the training sentences, a
    checkpoint every ``checkpoint_freq`` epochs (and at a step or time limit, Ctrl-C), the
    final model to ``dl_studio.path_saved_model`` when that is one path. Returns the trainer."""
    return language_model_trainer(gpt, checkpoints_dir, **options).run_and_save(callback)


def image_classes(given, dl_studio):
    """The class names a visTransformer is built for: its ``classes=`` setting, or
    DLStudio's. ValueError when neither names any."""
    classes = given.classes if given.classes is not None else dl_studio.classes
    if not classes:
        raise ValueError("visTransformer needs the class names: classes=(...) here or in "
                         "DLStudio(classes=...), e.g. SHAPE_CLASSES or CIFAR10_CLASSES")
    return tuple(classes)


def check_patch_count(vit, max_seq_length):
    """DLStudio scripts give max_seq_length: it must be the patches' count plus one."""
    if max_seq_length not in (None, vit.max_seq_length):
        raise ValueError(f"max_seq_length {max_seq_length} does not fit: {vit.image_size} "
                         f"images in {vit.patch_size} patches give {vit.max_seq_length} "
                         "tokens with the class token; leave max_seq_length out")


def load_dataset_of(vit, spec, download=False):
    """visTransformer.load_dataset_of: the data set a spec, or a checkpoint's ``dataset``
    entry, names (DLStudio.data.images)."""
    spec = spec.get("dataset", spec)
    vit.use_datasets(*dataset_of(spec, vit.image_size, download), spec)


def use_datasets(vit, training_set, test_set, spec=None):
    """Give a visTransformer its training and test images (`image_data` checks them
    against its classes, channels and image size); its pixel statistics come from
    training_set."""
    vit.data = image_data(training_set, test_set, vit.image_size, vit.classes,
                          vit.in_channels, spec)
    mean, std = vit.data.training_set.mean_std()
    vit.pixel_mean.copy_(mean)
    vit.pixel_std.copy_(std.clamp_min(1e-3))


def evaluate_container(xformer, master_encoder, master_decoder, result_file=None,
                       checkpoint=None, model=None, beam_width=1, show=20, print_fn=print,
                       precision="fp32", length_penalty=LENGTH_PENALTY, pairs=None):
    """``run_code_for_evaluating``: translate the held-out split (or ``pairs``), print
    ``show`` random translations beside their references, and return the BLEU scores (NLTK,
    sacreBLEU). A model read from a folder decodes as its generation_config.json says
    (``beam_width`` None: its beams; ``length_penalty`` None: its own).

    The weights are those of ``checkpoint`` when given, else those saved at
    ``dl_studio.path_saved_model`` (where training writes its final model), or, given
    ``model``, that EncoderDecoder as it is.
    """
    rules = getattr(xformer, "generation_rules", None)
    if beam_width is None:
        beam_width = 1 if rules is None else rules.num_beams
    if length_penalty is None:
        length_penalty = LENGTH_PENALTY if rules is None else rules.length_penalty
    if model is None:
        if checkpoint is None:
            saved = xformer.dl_studio.path_saved_model
            checkpoint = saved if isinstance(saved, str) else next(
                (p for k, p in saved.items() if k.startswith("encoder")), None)
        model = xformer.model_from(master_encoder, master_decoder, checkpoint)
    pairs = xformer.held_out_corpus if pairs is None else pairs
    if not pairs:
        raise ValueError("no held-out pairs: the container was built without an archive")
    result = evaluate_bleu(model, xformer.vocab, pairs, beam_width=beam_width, show=show,
                           result_file=result_file, print_fn=print_fn, precision=precision,
                           length_penalty=length_penalty, rules=rules)
    line = (f"held-out BLEU (NLTK corpus_bleu, 4-gram, smoothing method1): "
            f"{result['bleu']:.2f} on {result['sentences']} English sentences")
    if result["translatable"] < result["sentences"]:
        line += (f" ({result['sentences'] - result['translatable']} of them hold a word "
                 "outside the vocabulary or are too long: scored as empty translations)")
    if "sacrebleu" in result:
        line += f"\nsacreBLEU: {result['sacrebleu']:.2f}  ({result['signature']})"
    print_fn(line)
    return result




def evaluate_images(vit, print_fn=print, confusion_png=None, checkpoint=None):
    """``run_code_for_evaluating_visTransformer``: accuracy and confusion matrix on the test
    images (printed; plotted to ``confusion_png`` when given), with ``checkpoint``'s weights
    loaded first when one is given.

    Returns: {"accuracy": percent, "confusion": (K, K) tensor, rows true, columns predicted}
    """
    if checkpoint is not None:
        vit.load_weights(checkpoint)
    test = vit.test_set
    if test is None:
        raise ValueError("no test images: call load_shapes_dataset() or "
                         "load_cifar_10_dataset() first")
    vit.to(vit.dl_studio.device)
    predicted = classify(vit, test.images)
    matrix = confusion_matrix(predicted, test.labels, len(vit.classes))
    accuracy = 100.0 * matrix.diag().sum().item() / max(1, len(predicted))
    print_fn(f"held-out accuracy: {accuracy:.2f}% on {len(predicted)} test images "
             f"({test.name}; chance {100 / len(vit.classes):.1f}%)")
    print_fn(format_confusion(matrix, vit.classes))
    if confusion_png:
        plot_confusion_matrix(matrix, vit.classes, confusion_png,
                              f"visTransformer: {accuracy:.1f}% on {test.name}")
    return {"accuracy": accuracy, "confusion": matrix}


def restored_translation(cls, ours, path, dl_studio, corpus, model_class, archive, weights):
    """TransformerBase.from_checkpoint (its docstring says what it does); ``ours``: the
    translation containers by variant."""
    payload = with_weights(load_checkpoint(path), weights, path)
    if payload.get("variant") not in ours:
        raise CheckpointError(f"{path} holds a {payload.get('variant')} model, not a "
                              f"translation model ({' or '.join(ours)})")
    cls = container_class(payload, path, cls, model_class, ours)
    settings = cls.settings_class.from_record(payload["container_args"])
    if archive is not None:     # a pairs file is curated again as it was recorded
        corpus = load_corpus(archive, pairs_options=settings.get("pairs_options"))
    if corpus is not None and not corpus_fits(payload, corpus):
        raise CheckpointError(f"{path} was not trained on {corpus.name}: its vocabularies"
                              " (or training split) differ; give the archive it was "
                              "trained on")
    split = cls.settings_class(**settings)
    data = TranslationData(corpus, Vocabulary.from_payload(payload),
                           reader=lambda: corpus_of(payload),
                           held_out_fraction=split.held_out_fraction,
                           split_seed=split.split_seed)
    dls = dl_studio or DLStudio(seed=None)
    xformer = cls(dl_studio=dls, data=data, **settings)
    encoder = cls.MasterEncoder(dls, xformer, **payload["encoder_config"])
    decoder = cls.MasterDecoderWithMasking(dls, xformer, **payload["decoder_config"])
    if payload.get("lora"):            # LoRA fine-tuning: the LoRAs first, then the weights
        model = xformer.model_of(encoder, decoder)
        model.add_lora(**payload["lora"])
        load_into(model, payload)
        model = model.to(dls.device).eval()
    else:
        model = xformer.model_from(encoder, decoder, payload)
    if payload.get("folder"):          # fine-tuned from a real model's folder: its rules
        from .hub_seq2seq import as_read_from
        as_read_from(xformer, model, payload["folder"])
    return Restored(xformer, model, payload)
