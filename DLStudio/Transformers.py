"""DLStudio's containers, as students call them: the architecture's parts (DLStudio.
architecture, the file to read for the model) plus the data, the trainer, the evaluator and
the checkpoints, wired in a few lines each.

    TransformerFG      post-LayerNorm (Vaswani et al. 2017), trained with warm-up
    TransformerPreLN   pre-LayerNorm (Xiong et al. 2020), no warm-up needed
    TransformerGPT     decoder only: a language model (Radford et al. 2018) of the same parts
    TransformerBERT    encoder only: masked-language pre-training, a classifier on [CLS]
                       (Devlin et al. 2019)
    visTransformer     an image as a sentence of patches (Dosovitskiy et al. 2020)

    >>> xformer = TransformerFG(dl_studio=dls, data_archive="en_es_xformer_8_90000.tar.gz",
    ...                         max_seq_length=10, embedding_size=256, num_warmup_steps=4000)
    >>> encoder = TransformerFG.MasterEncoder(dls, xformer, num_basic_encoders=4,
    ...                                       num_atten_heads=4)

Every nested class (``TransformerFG.AttentionHead``, ...) is the architecture's; a subclass
that overrides one gets it used everywhere (the parts are built through the container).
Constructors take DLStudio's signatures (../shared/DLSTUDIO_API.md).
"""

import inspect
import os

from .checkpoints import (
    CheckpointError,
    Restored,
    class_path,
    container_class,
    corpus_fits,
    corpus_of,
    find_checkpoint,
    load_checkpoint,
    load_into,
    with_weights,
)
from .containers import bert as bert_wiring
from .containers import hub, hub_seq2seq
from .containers.base import Container, TextModel
from .containers.settings import (
    FOLDER_SWITCHES,
    BERTSettings,
    GPTSettings,
    TranslationSettings,
    VisionSettings,
)
from .containers.wiring import (
    check_patch_count,
    evaluate_container,
    evaluate_images,
    image_classes,
    image_trainer,
    language_model_trainer,
    load_dataset_of,
    restored_translation,
    train_images,
    train_language_model,
    train_translation,
    translation_trainer,
    use_datasets,
)
from .data import load_corpus
from .data.hub_translation import FOLDER_KINDS
from .data.vocabulary import (
    DataView,
    TranslationData,
    Vocabulary,
    archive_path,
    read_text,
    tokenizer_from_state,
)
from .evaluation.classify_text import decoder_probabilities
from .evaluation.decode_and_score import LENGTH_PENALTY, classify, translate_sentences
from .evaluation.generation import LanguageModelUse
from .model.architecture import (
    EncoderDecoderParts,
    GPTParts,
    TransformerParts,
    residual,
    scaled_dot_product,
)
from .model.bert import BERTParts
from .model.decoder_head import DecoderClassifying
from .model.kv_cache import KeyValueCache
from .model.lora import LoRAAdapting
from .model.tokens import causal_mask, padding_mask
from .model.vision import VisionParts
from .runtime.studio import DLStudio
from .training.schedule import COOLDOWN, BudgetedOptim, ScheduledOptim, adam

__all__ = ["TransformerFG", "TransformerPreLN", "TransformerGPT", "TransformerBERT",
           "visTransformer",
           "TransformerBase", "TransformerParts", "KeyValueCache", "scaled_dot_product",
           "residual", "padding_mask", "causal_mask"]


class TransformerBase(Container, EncoderDecoderParts):
    """What TransformerFG and TransformerPreLN share: the translation model's parts
    (architecture.EncoderDecoderParts), built from the sizes its archive gives, with the
    vocabularies and DLStudio's methods.

    Args (keyword-only):
        dl_studio: a ``DLStudio`` (batch size, epochs, learning rate, device, paths).
        dataroot, data_archive: the DLStudio archive, or a .tsv of pairs curated as
            ``pairs_options`` says (datasets.load_pairs_file); or ``corpus``: a Corpus; or
            ``data``: a TranslationData (corpus, split, vocabulary) read already.
        max_seq_length: tokens per sentence, SOS and EOS included (10 for 8-word sentences).
        embedding_size: M.  save_checkpoints, checkpoint_freq: every 5 epochs by default.
        num_warmup_steps, lr_mul, optimizer_params ({"beta1", "beta2", "epsilon"}): FG's
            warm-up (``ScheduledOptim``) and Adam.  masking: accepted for DLStudio scripts.
        held_out_fraction, split_seed: the held-out split, grouped by English sentence.
        tokenizer: "word" (DLStudio's) or "bpe" (``vocab_size`` subword pieces per language,
            learnt from the training split; max_seq_length then counts pieces and grows to
            fit the longest training sentence, with room); vocab_from: "archive" or
            "training" (word level); vocab: a ready Vocabulary (a checkpoint's). See
            DLStudio.data.vocabulary.
        Other designs than the lecture's, as switches: dropout (Vaswani 5.4), label_smoothing
        (5.4), full_width_heads (heads read all of M, then W^O: 3.2.2), tie_embeddings (the
        output layer shares the Spanish embeddings: Press and Wolf 2017), positions
        ("sinusoidal", "learned", today's "rope", or "relative" and "alibi" in the
        scores; learned_positions=True: "learned"), shared_vocab (with BPE: one vocabulary
        of ``vocab_size`` pieces learnt from both languages, and one matrix for the
        encoder's and decoder's embeddings and the output layer: Vaswani 3.4).
        The settings, their defaults and what a checkpoint keeps of each are described
        once, in DLStudio.containers.settings.TranslationSettings; an unknown keyword is refused.
    Attributes read by DLStudio scripts: ``vocab_en_size``, ``vocab_es_size``,
    ``en_vocab_dict``, ``es_vocab_dict``, ``es_index_2_word``, ``training_corpus``: read-only
    views of ``data``, the TranslationData the archive was read into.
    """

    variant = None        # "FG" or "PreLN"
    settings_class = TranslationSettings

    def __init__(self, *, dl_studio, corpus=None, vocab=None, data=None, **settings):
        self.take_settings(dl_studio, settings)
        if self.dataroot is None:
            self.dataroot = dl_studio.dataroot
        self.data = data if data is not None else self.read_data(corpus, vocab)
        self.max_seq_length = self.vocab.max_seq_length     # BPE: grown to fit, with room
        self.tokenizer = self.vocab.kind    # a GPT's BPE may come with word-level English
        EncoderDecoderParts.__init__(
            self, vocab_en_size=self.vocab_en_size, vocab_es_size=self.vocab_es_size,
            max_seq_length=self.max_seq_length, embedding_size=self.embedding_size,
            dropout=self.dropout, full_width_heads=self.full_width_heads,
            positions=self.positions, tie_embeddings=self.tie_embeddings,
            shared_vocab=self.shared_vocab, norm=self.norm, feed_forward=self.feed_forward,
            kv_heads=self.kv_heads, feed_forward_size=self.feed_forward_size,
            scale_embeddings=self.scale_embeddings, norm_eps=self.norm_eps,
            output_bias=self.output_bias, **self.vocab_special_ids(),
            **{name: getattr(self, name) for name in FOLDER_SWITCHES})

    __init__.__signature__ = TranslationSettings.signature(
        dl_studio=inspect.Parameter.empty, corpus=None, vocab=None, data=None)

    # DLStudio's names for the data: read-only views of ``self.data`` (a TranslationData).
    corpus = DataView("corpus")
    training_corpus = DataView("training_pairs")
    held_out_corpus = DataView("held_out_pairs")
    vocab = DataView("vocab")
    vocab_en = DataView("vocab", "vocab_en")
    vocab_es = DataView("vocab", "vocab_es")
    vocab_en_size = DataView("vocab", "vocab_en_size")
    vocab_es_size = DataView("vocab", "vocab_es_size")
    en_vocab_dict = DataView("vocab", "en_vocab_dict")
    es_vocab_dict = DataView("vocab", "es_vocab_dict")
    en_index_2_word = DataView("vocab", "en_index_2_word")
    es_index_2_word = DataView("vocab", "es_index_2_word")
    vocab_fingerprint = DataView("vocab", "fingerprint")

    def vocab_special_ids(self):
        """The ids the decoder starts from and sentences end with: DLStudio's SOS and EOS,
        or a real model's tokenizer's (data/hub_translation.py), with its pad id."""
        return {name: getattr(self.vocab, name) for name in ("start_id", "end_id", "pad_id")
                if hasattr(self.vocab, name)}

    def read_data(self, corpus=None, vocab=None):
        """The data this container trains on (a TranslationData): ``corpus``, or its
        archive (or pairs file) read once."""
        options = {"held_out_fraction": self.held_out_fraction, "split_seed": self.split_seed,
                   "tokenizer": self.tokenizer, "vocab_size": self.vocab_size,
                   "vocab_from": self.vocab_from, "max_seq_length": self.max_seq_length,
                   "shared_vocab": self.shared_vocab}
        if corpus is not None or self.data_archive is None:
            return TranslationData(corpus, vocab, **options)
        data, self.pairs_options = TranslationData.read(
            archive_path(self.dataroot, self.data_archive), pairs_options=self.pairs_options,
            vocab=vocab, **options)
        return data

    def model_of(self, master_encoder, master_decoder):
        """The EncoderDecoder of these stacks and this container's embedding generators,
        with what a checkpoint records of the container (`spec`)."""
        model = self.EncoderDecoder(self, master_encoder, master_decoder)
        model.spec = self.spec()
        return model

    # DLStudio's API beyond the model. ---------------------------------------------------
    def spec(self):
        """The container's part of a checkpoint: its settings (the archive as an absolute
        path) and its vocabularies (BPE: the merges too), so the file alone rebuilds it."""
        spec = self.described(vocab_en=list(self.vocab_en), vocab_es=list(self.vocab_es),
                              vocab_fingerprint=self.vocab_fingerprint)
        args = spec["container_args"]
        args["dataroot"] = os.path.abspath(self.dataroot)
        if self.data_archive:
            archive = archive_path(self.dataroot, self.data_archive)
            args["dataroot"], args["data_archive"] = os.path.split(os.path.abspath(archive))
        if self.vocab.kind in ("bpe",) + FOLDER_KINDS:
            spec["tokenizers"] = self.vocab.state()
        if getattr(self, "folder", None):      # read from a folder: how it generates
            spec["folder"] = {"path": self.folder, "architecture": self.folder_architecture,
                              "generation_config": self.generation_config}
        return spec

    def sentence_with_words_to_ints(self, sentences, lang):
        """Token ids (B, max_seq_length), EOS-padded (``Vocabulary.encode``)."""
        return self.vocab.encode(sentences, lang)

    def run_code_for_training(self, dls, master_encoder, master_decoder,
                              checkpoints_dir=None, **options):
        """Train; checkpoints to ``checkpoints_dir``, the final model to
        ``dls.path_saved_model``. Options: see ``Trainer``. Returns the trainer."""
        return train_translation(self, master_encoder, master_decoder,
                                 checkpoints_dir or f"checkpoints_{self.variant}", **options)

    run_code_for_training_TransformerFG = run_code_for_training
    run_code_for_training_TransformerPreLN = run_code_for_training

    def trainer(self, master_encoder, master_decoder, checkpoints_dir=None, **options):
        """A trainer of these stacks, not yet run (see containers.wiring)."""
        return translation_trainer(self, master_encoder, master_decoder, checkpoints_dir,
                                   **options)

    def model_from(self, master_encoder, master_decoder, checkpoint=None):
        """An EncoderDecoder of these stacks (on the device), with a checkpoint's weights."""
        model = self.model_of(master_encoder, master_decoder)
        if checkpoint is not None:
            load_into(model, checkpoint)
        return model.to(self.dl_studio.device).eval()

    def load_weights(self, checkpoint, master_encoder, master_decoder):
        """Copy a checkpoint's weights in, after checking they fit (else CheckpointError)."""
        return load_into(self.model_of(master_encoder, master_decoder), checkpoint)

    def run_code_for_evaluating(self, master_encoder, master_decoder, result_file=None,
                                checkpoint=None, model=None, **options):
        """Held-out translations and BLEU (see containers.wiring.evaluate_container;
        ``pairs=``: others to score on, the held-out split of another model's archive)."""
        return evaluate_container(self, master_encoder, master_decoder, result_file,
                                  checkpoint, model, **options)

    run_code_for_evaluating_TransformerFG = run_code_for_evaluating
    run_code_for_evaluating_TransformerPreLN = run_code_for_evaluating

    def run_code_for_evaluating_checkpoint(self, master_encoder, master_decoder,
                                           checkpoints_dir, checkpoint_index, result_file=None,
                                           **options):
        """Evaluate checkpoint N (an epoch, or "last") of ``checkpoints_dir`` on the held-out
        split (see checkpoints.find_checkpoint)."""
        return self.run_code_for_evaluating(
            master_encoder, master_decoder, result_file,
            checkpoint=find_checkpoint(checkpoints_dir, checkpoint_index), **options)

    generation_rules = None     # a real model's folder's (evaluation/folder_rules.py)

    def translate(self, model, sentences, beam_width=None, precision="fp32",
                  length_penalty=None):
        """Translate English sentences (raw strings or word lists); return Spanish strings.
        Greedy unless ``beam_width`` > 1; a model read from a folder by default as its
        generation_config.json says (beams, length penalty, banned and forced tokens)."""
        rules = self.generation_rules
        if beam_width is None:
            beam_width = 1 if rules is None else rules.num_beams
        if length_penalty is None:
            length_penalty = LENGTH_PENALTY if rules is None else rules.length_penalty
        return translate_sentences(model, self.vocab, sentences, beam_width, precision,
                                   length_penalty, rules)

    def run_code_for_translating_user_input(self, master_encoder, master_decoder,
                                            checkpoints_dir, checkpoint_index, sentence,
                                            beam_width=1):
        """Translate one sentence (or a list) with a checkpoint; return the Spanish."""
        model = self.model_from(master_encoder, master_decoder,
                                find_checkpoint(checkpoints_dir, checkpoint_index))
        many = not isinstance(sentence, str)
        out = self.translate(model, sentence if many else [sentence], beam_width)
        return out if many else out[0]

    @classmethod
    def from_huggingface(cls, path, dl_studio=None, dtype=None, data_archive=None,
                         languages=None, **settings):
        """A `Restored` (container, model, None) of a Hugging Face translation folder
        (TransformerFG: OPUS-MT's MarianMTModel, BART; TransformerPreLN: T5, Flan-T5,
        mBART), built of this class's nested classes, its tokenizer the folder's
        (containers/hub_seq2seq); ``data_archive``: the archive or pairs file it fine-tunes
        on (``run_code_for_training``), and ``settings`` of the training (by default Adam
        at ``dl_studio.learning_rate``, no warm-up); ``languages``: mBART's (source,
        target) codes, ("en_XX", "es_XX"), over the folder's."""
        return hub_seq2seq.read_folder(cls, path, dl_studio, dtype, data_archive, settings,
                                       languages)

    @classmethod
    def from_checkpoint(cls, path, dl_studio=None, corpus=None, model_class=None,
                        archive=None, weights="raw"):
        """A `Restored` (container, model, checkpoint) from a checkpoint file alone, read
        once: its container class (see checkpoints.container_class; a student's:
        ``model_class="module:Class"``, or ``MyFG.from_checkpoint``), the vocabulary it
        recorded, stacks built through it, weights loaded, eval mode. Its archive is read
        only when its pairs are asked for (``held_out_corpus``, to score it); ``archive``
        (a path) or ``corpus``: score on that instead, if it is the one it was trained on;
        ``weights``: "raw" (as trained) or "average" (the moving average of ema=)."""
        return restored_translation(cls, {"FG": TransformerFG, "PreLN": TransformerPreLN}, path,
                                    dl_studio, corpus, model_class, archive, weights)


class TransformerFG(TransformerBase):
    """The Transformer of Vaswani et al. 2017: LayerNorm after each residual sum (post-LN),
    trained with Adam and the learning-rate warm-up of `ScheduledOptim`.

    Example:
        >>> xformer = TransformerFG(dl_studio=dls, dataroot="./data/",
        ...     data_archive="en_es_xformer_8_90000.tar.gz", max_seq_length=10,
        ...     embedding_size=256, num_warmup_steps=4000)
        >>> encoder = TransformerFG.MasterEncoder(dls, xformer, num_basic_encoders=4,
        ...                                       num_atten_heads=4)

    ClassPath: DLStudio.Transformers.TransformerFG
    """

    variant = "FG"
    norm_first = False


class TransformerPreLN(TransformerBase):
    """The pre-LN Transformer of Xiong et al. 2020: LayerNorm before each sublayer, inside
    the residual branch, and a final LayerNorm after each stack. Stable without warm-up:
    Adam at ``dl_studio.learning_rate``.

    ClassPath: DLStudio.Transformers.TransformerPreLN
    """

    variant = "PreLN"
    norm_first = True


class TransformerGPT(TextModel, LanguageModelUse, LoRAAdapting, DecoderClassifying, GPTParts):
    """A decoder-only language model (GPT: Radford et al. 2018): it predicts each next token
    of a sentence from the tokens before it, and so can continue a prompt. It is built from
    the translation models' own classes; there is no attention code of its own:

        token ids ──> EmbeddingsGenerator ──> MasterDecoderWithMasking ──────────> logits
        (B, T)        token + position code    N x BasicDecoderWithMasking:          (B, T, V)
                                               causal SelfAttention, FeedForward     next token

    With no encoder there is no memory and no cross-attention, so a GPT layer is the encoder
    layer (BasicEncoder) given the causal mask, and the stack with its output layer is the
    translation decoder's MasterDecoderWithMasking called without memory. Pre-trained on
    Spanish, its weights initialise a translation decoder (containers.pretrained.init_from_gpt).

    Args (keyword-only): dl_studio; sentences: the text, one sentence per string (split into
        training and held-out by held_out_fraction, split_seed); lang: what language they
        are in (a label: "es", "en", ...); tokenizer: "bpe" (``vocab_size`` pieces learnt
        from the training sentences) or "word"; vocab: a ready tokenizer instead (a
        translation model's, a checkpoint's); max_seq_length: tokens per sentence with SOS
        and EOS (grows to fit the longest sentence); embedding_size (M),
        num_basic_decoders (N), num_atten_heads (H); layout "PreLN" (GPT-2's, the default) or
        "FG"; the other switches as in TransformerFG.
    Shape: ids (B, T) -> logits (B, T, V), or (N, V) where ``keep`` (B, T) is True

    ClassPath: DLStudio.Transformers.TransformerGPT
    """

    variant = "GPT"

    settings_class = GPTSettings

    def __init__(self, *, dl_studio, sentences=None, vocab=None, **settings):
        self.take_settings(dl_studio, settings)
        self.data = read_text(sentences or [], held_out_fraction=self.held_out_fraction,
                              split_seed=self.split_seed, tokenizer=self.tokenizer,
                              vocab_size=self.vocab_size, vocab=vocab,
                              max_seq_length=self.max_seq_length)
        self.max_seq_length, self.tokenizer = self.data.max_seq_length, self.vocab.kind
        GPTParts.__init__(
            self, vocab_size=self.vocab.size, lang=self.lang,
            num_basic_decoders=self.num_basic_decoders, num_atten_heads=self.num_atten_heads,
            norm_first=self.layout == "PreLN", max_seq_length=self.max_seq_length,
            embedding_size=self.embedding_size, dropout=self.dropout,
            full_width_heads=self.full_width_heads, positions=self.positions,
            tie_embeddings=self.tie_embeddings, norm=self.norm, feed_forward=self.feed_forward,
            kv_heads=self.kv_heads, **{k: getattr(self, k) for k in
                                       GPTSettings.FROM_FOLDERS + GPTSettings.SINCE_2023})
        if self.labels:                   # a classifier on the last token (decoder_head.py)
            self.add_classifier(self.labels)

    __init__.__signature__ = GPTSettings.signature(
        dl_studio=inspect.Parameter.empty, sentences=None, vocab=None)

    # Training, scoring and generation (its text: a TextData, vocabulary.read_text). ------
    def run_code_for_training(self, checkpoints_dir="checkpoints_GPT", **options):
        """Train on the training sentences (see containers.wiring.train_language_model)."""
        return train_language_model(self, checkpoints_dir, **options)

    def trainer(self, checkpoints_dir=None, **options):
        """A trainer of this GPT on its text, not yet run (see containers.wiring)."""
        return language_model_trainer(self, checkpoints_dir, **options)

    @classmethod
    def from_checkpoint(cls, path, dl_studio=None, model_class=None, weights="raw"):
        """A `Restored` (gpt, gpt, checkpoint) from a checkpoint file alone, in eval mode on
        the device."""
        return cls.rebuilt(path, dl_studio, model_class, TransformerGPT,
                           "a language model (TransformerGPT): train one with train_gpt.py",
                           weights)

    @classmethod
    def from_huggingface(cls, path, dl_studio=None, dtype=None, adapter=None):
        """A Hugging Face folder (GPT-2, Llama, Mistral, SmolLM3, Qwen2, Qwen3, Gemma 3,
        OLMo 2) as a TransformerGPT of this class's nested classes, eval mode, fp32
        (``dtype``: torch.bfloat16), with PEFT's LoRA ``adapter`` folder on it where given:
        containers.hub."""
        gpt = hub.read_folder(cls, path, dl_studio, dtype)
        return gpt if adapter is None else hub.read_adapter(gpt, adapter)

    def classify(self, texts, seconds=None, batch_size=64):
        """With a classifier (``add_classifier``, finetune_lm.py --classify): each label's
        probability for each text (or pair), (N, K) (classify_text.decoder_probabilities)."""
        return decoder_probabilities(self, texts, seconds, batch_size)


class visTransformer(Container, VisionParts):
    """A vision transformer (Dosovitskiy et al. 2020): an image is read as a sentence of
    patches by the translation models' own encoder classes, and classified from a class token.

        image ──> PatchEmbeddingGenerator ──────────> MasterEncoder ──> class token ──> Linear
        (B, C, H, W)  patches, W_E, class token,       (N x BasicEncoder,  its output   (B, K)
                      positions: (B, 1 + N_p, M)        FG or PreLN)       (B, M)

    Shapes add C channels, H x W image, P_h x P_w patch, N_p = (H / P_h)(W / P_w), K classes.
    ``layout`` ("PreLN", the default, or "FG") picks where LayerNorm sits and whether the
    optimiser warms up, as for translation.

    Args (keyword-only; DLStudio's names): dl_studio; patch_size (P_h, P_w), dividing
        image_size (H, W; default dl_studio.image_size or (32, 32)); embedding_size (M);
        num_basic_encoders (N); num_atten_heads (H); classes (default dl_studio.classes);
        in_channels (C); layout; augment (random shifts and flips of training images;
        "shifts": shifts only); tokenizer, pooling, conv_layers (VisionParts);
        num_warmup_steps, lr_mul, optimizer_params, dropout, label_smoothing,
        full_width_heads, save_checkpoints, checkpoint_freq: as in TransformerFG;
        max_seq_length: accepted for DLStudio scripts, must be N_p + 1.
    Shape: images (B, C, H, W), floats in [0, 1] -> logits (B, K)
    Example:
        >>> vit = visTransformer(dl_studio=dls, patch_size=(8, 8), embedding_size=128,
        ...                      num_basic_encoders=4, num_atten_heads=4, classes=SHAPE_CLASSES)
        >>> vit.load_shapes_dataset()
        >>> vit.run_code_for_training_visTransformer(dls, vit, checkpoint_dir="ck_vit")

    ClassPath: DLStudio.Transformers.visTransformer
    """

    variant = "visTransformer"

    settings_class = VisionSettings

    def __init__(self, *, dl_studio, **settings):
        given = self.take_settings(dl_studio, settings)
        self.classes = image_classes(given, dl_studio)
        VisionParts.__init__(
            self, num_classes=len(self.classes), patch_size=self.patch_size,
            image_size=tuple(self.image_size or dl_studio.image_size or (32, 32)),
            in_channels=self.in_channels, num_basic_encoders=self.num_basic_encoders,
            num_atten_heads=self.num_atten_heads, norm_first=self.layout == "PreLN",
            embedding_size=self.embedding_size, dropout=self.dropout,
            full_width_heads=self.full_width_heads, norm=self.norm,
            feed_forward=self.feed_forward, kv_heads=self.kv_heads, tokenizer=self.tokenizer,
            pooling=self.pooling, conv_layers=self.conv_layers)
        check_patch_count(self, given.max_seq_length)
        self.data = None                            # an ImageData, once images are given

    __init__.__signature__ = VisionSettings.signature(dl_studio=inspect.Parameter.empty)

    # Its images: read-only views of ``self.data`` (an ImageData), None before any is given.
    training_set = property(lambda self: self.data and self.data.training_set)
    test_set = property(lambda self: self.data and self.data.test_set)
    dataset_spec = property(lambda self: self.data and self.data.spec)

    # DLStudio's API beyond the model: delegates to the modules that do the work. -------
    def description(self):
        """What rebuilds this model: its settings and its data set (DLStudio.checkpoints)."""
        return self.described(dataset=self.dataset_spec)

    def use_datasets(self, training_set, test_set, spec=None):
        """Train on ``training_set`` (its pixel statistics too), test on ``test_set``: two
        ImageSets, or any torch Datasets of (image, label) (resized to ``image_size``)."""
        use_datasets(self, training_set, test_set, spec)

    def load_shapes_dataset(self, num_train=10_000, num_test=2_000, seed=0):
        """Our own shapes, training and test images drawn with different seeds."""
        self.load_dataset_of({"name": "shapes", "num_train": num_train, "num_test": num_test,
                              "seed": seed})

    def load_cifar_10_dataset(self, download=False):
        """CIFAR-10 from ``dl_studio.dataroot`` (ImageDataError says where to put it)."""
        self.load_dataset_of({"name": "cifar10",
                              "dataroot": os.path.abspath(self.dl_studio.dataroot)}, download)

    def load_image_folder(self, root, test_fraction=0.2, seed=0):
        """Your pictures, a sub-folder per class; ``classes=folder_classes(root)`` fits."""
        self.load_dataset_of({"name": "folder", "dataroot": os.path.abspath(root), "seed": seed,
                              "test_fraction": test_fraction, "channels": self.in_channels})

    def load_dataset_of(self, spec, download=False):
        """Load the data set that a spec, or a checkpoint's ``dataset`` entry, names."""
        load_dataset_of(self, spec, download)

    def run_code_for_training_visTransformer(self, dls=None, model=None, checkpoint_dir=None,
                                             **options):
        """Train (see containers.wiring.train_images); ``dls`` and ``model`` are accepted for
        DLStudio scripts. Returns the ``ImageTrainer``."""
        return train_images(self, model, checkpoint_dir, **options)

    def trainer(self, checkpoints_dir=None, **options):
        """A trainer of this model on its images, not yet run (see containers.wiring)."""
        return image_trainer(self, checkpoints_dir, **options)

    def load_weights(self, checkpoint):
        """Copy a checkpoint's weights in, after checking it was built like this model."""
        return load_into(self, checkpoint)

    @classmethod
    def from_checkpoint(cls, path, dl_studio=None, model_class=None, weights="raw"):
        """Rebuild a visTransformer with its weights from a checkpoint file alone: a
        `Restored` (vit, vit, checkpoint), the model in eval mode on the device."""
        return cls.rebuilt(path, dl_studio, model_class, visTransformer, "a visTransformer",
                           weights)

    def predict(self, images, batch_size=500):
        """Class indices of uint8 (N, C, H, W) images (or floats in [0, 1])."""
        return classify(self, images, batch_size)

    def run_code_for_evaluating_visTransformer(self, checkpoint=None, **options):
        """Test accuracy and confusion matrix (see containers.wiring.evaluate_images)."""
        return evaluate_images(self, checkpoint=checkpoint, **options)


class TransformerBERT(TextModel, BERTParts):
    """BERT (Devlin et al. 2019): the translation models' encoder, reading both ways, with a
    masked-language head (pre-training) and a classifier on [CLS] (fine-tuning). Built of
    the same nested classes (architecture.py; BERT's own parts in model/bert.py), so a
    subclass's AttentionHead or SelfAttention is used here too.

        [CLS] text [SEP] ──> EmbeddingsGenerator + segments ──> MasterEncoder ──> MLM head
                             (learned positions, LayerNorm)     N x BasicEncoder   (masked)
                                                                 ──> [CLS] ──> classifier

    Args (keyword-only): dl_studio; sentences: text to pre-train on (split by
        held_out_fraction, split_seed; ``ordered``: the lines run in order, for
        pair_task="next"); vocab: a ready SpecialTokenizer (a checkpoint's, a vocab.txt's);
        labels: the classifier's classes (fine-tuning); tokenizer "bpe" | "word" (learnt
        from the sentences, ``vocab_size``) | "wordpiece"; embedding_size (M),
        num_basic_encoders (N), num_atten_heads (H); BERT's switches (feed_forward,
        feed_forward_size, positions, norm_eps, scale_embeddings, embedding_norm,
        mlm_transform, pooler: BERTSettings, each BERT's by default); mask_rate (0.15);
        layout "FG" (post-LN, BERT's) or "PreLN"; the other switches as in TransformerFG.
    Shape: ids (B, T), segments (B, T) -> MLM logits (B, T, V), or see BERTParts.forward

    ClassPath: DLStudio.Transformers.TransformerBERT
    """

    variant = "BERT"
    settings_class = BERTSettings
    tokenizer_of = staticmethod(bert_wiring.SpecialTokenizer.from_state)

    def __init__(self, *, dl_studio, sentences=None, vocab=None, ordered=False, **settings):
        self.take_settings(dl_studio, settings)
        self.data = bert_wiring.text_of(self, sentences, vocab, ordered)
        self.max_seq_length, self.tokenizer = self.data.max_seq_length, self.vocab.kind
        self.labels = None if self.labels is None else tuple(self.labels)
        M = self.embedding_size
        BERTParts.__init__(
            self, vocab_size=self.vocab.size, pad_id=self.vocab.pad_id, lang=self.lang,
            num_basic_encoders=self.num_basic_encoders, num_atten_heads=self.num_atten_heads,
            num_classes=len(self.labels or ()), embedding_norm=self.embedding_norm,
            mlm_transform=self.mlm_transform, pooler=self.pooler,
            next_sentence=self.pair_task == "next", norm_first=self.layout == "PreLN",
            max_seq_length=self.max_seq_length, embedding_size=M, dropout=self.dropout,
            full_width_heads=self.full_width_heads,
            positions=self.positions, feed_forward=self.feed_forward,
            feed_forward_size=self.feed_forward_size or 4 * M, norm_eps=self.norm_eps,
            scale_embeddings=self.scale_embeddings, norm=self.norm, kv_heads=self.kv_heads)

    __init__.__signature__ = BERTSettings.signature(
        dl_studio=inspect.Parameter.empty, sentences=None, vocab=None, ordered=False)

    # Pre-training, fine-tuning and use (its text: a MaskedText, data.bert_text). ---------
    def run_code_for_pretraining(self, checkpoints_dir="checkpoints_BERT", **options):
        """Masked-language pre-training on its sentences, a checkpoint every
        ``checkpoint_freq`` epochs (see containers.bert.train_masked). Returns the trainer."""
        return bert_wiring.train_masked(self, checkpoints_dir, **options)

    run_code_for_training = run_code_for_pretraining

    def trainer(self, checkpoints_dir=None, **options):
        """A masked-language trainer of this BERT on its text, not yet run."""
        return bert_wiring.masked_trainer(self, checkpoints_dir, **options)

    def run_code_for_finetuning(self, train_rows, test_rows=None,
                                checkpoints_dir="checkpoints_BERT_finetuned", **options):
        """Train the classifier on [CLS] (and every layer) on LabelledRows; returns the
        trainer (see containers.bert.finetune)."""
        return bert_wiring.finetune(self, train_rows, test_rows, checkpoints_dir, **options)

    def with_labels(self, labels, dl_studio=None, pretrained=True, **changes):
        """A BERT of this one's tokenizer and settings (``changes``: other settings of how
        it trains) with a classifier for ``labels``; its weights this one's but the new
        classifier's (``pretrained=False``: all fresh)."""
        return bert_wiring.with_labels(self, labels, dl_studio, pretrained, **changes)

    def mask_tokens(self, ids, special, generator):
        """The corruption pre-training applies to every batch (data.bert_text.mask_tokens
        with this model's [MASK], vocabulary and mask_rate); a subclass's is used instead.
        Shape: ids, special (B, T) -> corrupted ids (B, T), selected (B, T) bool"""
        return bert_wiring.masking(self, ids, special, generator)

    def fill_mask(self, text, top=5):
        """The ``top`` likeliest tokens at each [MASK] of ``text``, with probabilities."""
        return bert_wiring.fill(self, text, top)

    def classify(self, texts, seconds=None, batch_size=256):
        """Every label's probability for each text (or pair): a (B, K) tensor."""
        return bert_wiring.probabilities(self, texts, seconds, batch_size)

    def masked_scores(self, sentences=None, seed=None):
        """Masked-token accuracy and perplexity of the held-out sentences (or
        ``sentences``), masked once with ``seed`` (the run's, as the trainer masks them)."""
        return bert_wiring.scores(self, sentences, seed)

    @classmethod
    def from_checkpoint(cls, path, dl_studio=None, model_class=None, weights="raw"):
        """A `Restored` (bert, bert, checkpoint) from a checkpoint file alone, in eval mode
        on the device."""
        return cls.rebuilt(path, dl_studio, model_class, TransformerBERT,
                           "a BERT (TransformerBERT): pre-train one with pretrain_bert.py",
                           weights)

    @classmethod
    def from_huggingface(cls, path, dl_studio=None):
        """A Hugging Face BERT folder (config.json, vocab.txt, model.safetensors or
        pytorch_model.bin) as a TransformerBERT with full-width heads, in eval mode (see
        containers.bert.read_huggingface)."""
        return bert_wiring.read_huggingface(cls, path, dl_studio or DLStudio(seed=None))
