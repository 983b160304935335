"""DLStudio's containers, as students call them: the architecture's parts (DLStudio.
architecture, the file to read for the model) plus the data, the trainer, the evaluator and
the checkpoints, wired in a few lines each.

    TransformerFG      post-LayerNorm (Vaswani et al. 2017), trained with warm-up
    TransformerPreLN   pre-LayerNorm (Xiong et al. 2020), no warm-up needed
    TransformerGPT     decoder only: a language model (Radford et al. 2018) of the same parts
    visTransformer     an image as a sentence of patches (Dosovitskiy et al. 2020)

    >>> xformer = TransformerFG(dl_studio=dls, data_archive="en_es_xformer_8_90000.tar.gz",
    ...                         max_seq_length=10, embedding_size=256, num_warmup_steps=4000)
    >>> encoder = TransformerFG.MasterEncoder(dls, xformer, num_basic_encoders=4,
    ...                                       num_atten_heads=4)

Every nested class (``TransformerFG.AttentionHead``, ...) is the architecture's; a subclass
that overrides one gets it used everywhere (the parts are built through the container).
Constructors take DLStudio's signatures (../shared/DLSTUDIO_API.md).
"""

import os

from .architecture import (
    EncoderDecoderParts,
    GPTParts,
    TransformerParts,
    VisionParts,
    residual,
    scaled_dot_product,
)
from .checkpoints import (
    CheckpointError,
    container_class,
    container_spec,
    corpus_fits,
    corpus_of,
    find_checkpoint,
    gpt_spec,
    load_checkpoint,
    load_into,
    vit_spec,
)
from .datasets.images import dataset_of, use_datasets
from .DLStudio import DLStudio
from .evaluation import classify, evaluate_container, evaluate_images, translate_sentences
from .generation import generate_text, perplexity
from .kv_cache import KeyValueCache
from .overrides import class_path
from .schedule import ADAM_DEFAULTS, ScheduledOptim, adam
from .tokens import causal_mask, padding_mask
from .training import train_images, train_language_model, train_translation
from .vocabulary import Vocabulary, tokenizer_from_state, use_corpus, use_text

__all__ = ["TransformerFG", "TransformerPreLN", "TransformerGPT", "visTransformer",
           "TransformerBase", "TransformerParts", "KeyValueCache", "scaled_dot_product",
           "residual", "padding_mask", "causal_mask"]


class Container:
    """What every DLStudio container adds to its parts: the optimiser DLStudio's scripts
    train with, and the warm-up as DLStudio names it (``TransformerFG.ScheduledOptim``)."""

    ScheduledOptim = ScheduledOptim       # the warm-up of Vaswani et al. 2017, eq. 3

    def make_optimizer(self, params):
        """Adam (``optimizer_params``): post-LN (FG) with ``num_warmup_steps`` > 0 driven by
        the warm-up of `ScheduledOptim`; pre-LN, or FG with ``num_warmup_steps=0`` (to see
        what the warm-up is for), at ``dl_studio.learning_rate``."""
        if self.norm_first or not self.num_warmup_steps:
            return adam(params, self.dl_studio.learning_rate, self.optimizer_params)
        return self.ScheduledOptim(adam(params, 0.0, self.optimizer_params), self.lr_mul,
                                   self.embedding_size, self.num_warmup_steps)

    @classmethod
    def rebuilt(cls, path, dl_studio, model_class, base, expected):
        """``(model, payload)`` of a checkpoint of a container that is itself the model
        (visTransformer, TransformerGPT: ``base``), in eval mode on the device. ``expected``
        says what the file should have held."""
        payload = load_checkpoint(path)
        if payload.get("variant") != base.variant:
            raise CheckpointError(f"{path} holds a {payload.get('variant')} model, not "
                                  f"{expected}")
        cls = container_class(payload, path, cls, model_class, {base.variant: base})
        dls = dl_studio or DLStudio(seed=None)
        extra = ({"vocab": tokenizer_from_state(payload["tokenizer_state"])}
                 if "tokenizer_state" in payload else {})
        model = cls(dl_studio=dls, **extra, **payload["container_args"])
        load_into(model, payload)
        return model.to(dls.device).eval(), payload


class TransformerBase(Container, EncoderDecoderParts):
    """What TransformerFG and TransformerPreLN share: the translation model's parts
    (architecture.EncoderDecoderParts), built from the sizes its archive gives, with the
    vocabularies and DLStudio's methods.

    Args (keyword-only):
        dl_studio: a ``DLStudio`` (batch size, epochs, learning rate, device, paths).
        dataroot, data_archive: the DLStudio archive, or a .tsv of pairs curated as
            ``pairs_options`` says (datasets.load_pairs_file); or ``corpus``: a Corpus.
        max_seq_length: tokens per sentence, SOS and EOS included (10 for 8-word sentences).
        embedding_size: M.  save_checkpoints, checkpoint_freq: every 5 epochs by default.
        num_warmup_steps, lr_mul, optimizer_params ({"beta1", "beta2", "epsilon"}): FG's
            warm-up (``ScheduledOptim``) and Adam.  masking: accepted for DLStudio scripts.
        held_out_fraction, split_seed: the held-out split, grouped by English sentence.
        tokenizer: "word" (DLStudio's) or "bpe" (``vocab_size`` subword pieces per language,
            learnt from the training split; max_seq_length then counts pieces and grows to
            fit the longest training sentence, with room); vocab_from: "archive" or
            "training" (word level); vocab: a ready Vocabulary (a checkpoint's). See
            DLStudio.vocabulary.
        Other designs than the lecture's, as switches: dropout (Vaswani 5.4), label_smoothing
        (5.4), full_width_heads (heads read all of M, then W^O: 3.2.2), tie_embeddings (the
        output layer shares the Spanish embeddings: Press and Wolf 2017), learned_positions.
    Attributes read by DLStudio scripts: ``vocab_en_size``, ``vocab_es_size``,
    ``en_vocab_dict``, ``es_vocab_dict``, ``es_index_2_word``, ``training_corpus``.
    """

    variant = None        # "FG" or "PreLN"

    def __init__(self, *, dl_studio, dataroot=None, data_archive=None, max_seq_length=10,
                 embedding_size=256, save_checkpoints=True, num_warmup_steps=4000,
                 optimizer_params=None, lr_mul=1.0, masking=True, checkpoint_freq=5,
                 held_out_fraction=0.05, split_seed=0, dropout=0.0, label_smoothing=0.0,
                 full_width_heads=False, tie_embeddings=False, learned_positions=False,
                 corpus=None, tokenizer="word", vocab_size=None, vocab_from="archive",
                 vocab=None, pairs_options=None):
        if embedding_size % 2:
            raise ValueError(f"embedding_size must be even (sin/cos pairs), got {embedding_size}")
        self.dl_studio, self.masking, self.save_checkpoints = dl_studio, masking, save_checkpoints
        self.dataroot = dataroot if dataroot is not None else dl_studio.dataroot
        self.data_archive, self.max_seq_length = data_archive, max_seq_length
        self.embedding_size, self.num_warmup_steps = embedding_size, num_warmup_steps
        self.optimizer_params = dict(optimizer_params or ADAM_DEFAULTS)
        self.lr_mul, self.checkpoint_freq = lr_mul, checkpoint_freq
        self.held_out_fraction, self.split_seed = held_out_fraction, split_seed
        self.label_smoothing = label_smoothing
        self.tokenizer, self.vocab_size, self.vocab_from = tokenizer, vocab_size, vocab_from
        self.pairs_options = pairs_options
        self.class_path = class_path(type(self))
        self.use_corpus(corpus, vocab)
        EncoderDecoderParts.__init__(
            self, vocab_en_size=self.vocab_en_size, vocab_es_size=self.vocab_es_size,
            max_seq_length=self.max_seq_length, embedding_size=embedding_size, dropout=dropout,
            full_width_heads=full_width_heads, learned_positions=learned_positions,
            tie_embeddings=tie_embeddings)

    def model_of(self, master_encoder, master_decoder):
        """The EncoderDecoder of these stacks and this container's embedding generators,
        with what a checkpoint records of the container (`spec`)."""
        model = self.EncoderDecoder(self, master_encoder, master_decoder)
        model.spec = self.spec()
        return model

    # DLStudio's API beyond the model. ---------------------------------------------------
    def spec(self):
        """The container's part of a checkpoint (DLStudio.checkpoints)."""
        return container_spec(self)

    def use_corpus(self, corpus=None, vocab=None):
        """Read the archive (or take ``corpus``): training/held-out split, vocabularies."""
        use_corpus(self, corpus, vocab)

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
        """Held-out translations and BLEU (see evaluation.evaluate_container)."""
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

    def translate(self, model, sentences, beam_width=1, precision="fp32"):
        """Translate English sentences (raw strings or word lists); return Spanish strings."""
        return translate_sentences(model, self.vocab, sentences, beam_width, precision)

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
    def from_checkpoint(cls, path, dl_studio=None, corpus=None, model_class=None):
        """``(xformer, model)`` from a checkpoint file alone: its container class (see
        checkpoints.container_class; a student's: ``model_class="module:Class"``, or
        ``MyFG.from_checkpoint``), stacks built through it, weights loaded, eval mode."""
        ours = {"FG": TransformerFG, "PreLN": TransformerPreLN}
        payload = load_checkpoint(path)
        if payload.get("variant") not in ours:
            raise CheckpointError(f"{path} holds a {payload.get('variant')} model, not a "
                                  f"translation model ({' or '.join(ours)})")
        cls = container_class(payload, path, cls, model_class, ours)
        if corpus is not None and not corpus_fits(payload, corpus):
            raise CheckpointError(f"{path} was not trained on {corpus.name}: its vocabularies"
                                  " (or training split) differ; give the archive it was "
                                  "trained on")
        dls = dl_studio or DLStudio(seed=None)
        xformer = cls(dl_studio=dls, corpus=corpus or corpus_of(payload),
                      vocab=Vocabulary.from_payload(payload), **payload["container_args"])
        encoder = cls.MasterEncoder(dls, xformer, **payload["encoder_config"])
        decoder = cls.MasterDecoderWithMasking(dls, xformer, **payload["decoder_config"])
        return xformer, xformer.model_from(encoder, decoder, payload)


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


class TransformerGPT(Container, GPTParts):
    """A decoder-only language model (GPT: Radford et al. 2018): it predicts each next token
    of a sentence from the tokens before it, and so can continue a prompt. It is built from
    the translation models' own classes; there is no attention code of its own:

        token ids ──> EmbeddingsGenerator ──> MasterDecoderWithMasking ──────────> logits
        (B, T)        token + position code    N x BasicDecoderWithMasking:          (B, T, V)
                                               causal SelfAttention, FeedForward     next token

    With no encoder there is no memory and no cross-attention, so a GPT layer is the encoder
    layer (BasicEncoder) given the causal mask, and the stack with its output layer is the
    translation decoder's MasterDecoderWithMasking called without memory. Pre-trained on
    Spanish, its weights initialise a translation decoder (DLStudio.checkpoints.init_from_gpt).

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

    def __init__(self, *, dl_studio, sentences=None, lang="es", tokenizer="bpe",
                 vocab_size=8000, vocab=None, max_seq_length=None, embedding_size=256,
                 num_basic_decoders=4, num_atten_heads=4, layout="PreLN", num_warmup_steps=0,
                 lr_mul=1.0, optimizer_params=None, dropout=0.0, label_smoothing=0.0,
                 full_width_heads=False, learned_positions=False, tie_embeddings=False,
                 held_out_fraction=0.05, split_seed=0, save_checkpoints=True,
                 checkpoint_freq=5, archive_text=False):
        if layout not in ("FG", "PreLN"):
            raise ValueError(f"layout must be 'FG' or 'PreLN', got {layout!r}")
        self.dl_studio, self.layout = dl_studio, layout
        self.tokenizer, self.vocab_size = tokenizer, vocab_size
        self.max_seq_length = max_seq_length
        self.num_warmup_steps, self.lr_mul = num_warmup_steps, lr_mul
        self.optimizer_params = dict(optimizer_params or ADAM_DEFAULTS)
        self.label_smoothing = label_smoothing
        self.held_out_fraction, self.split_seed = held_out_fraction, split_seed
        self.save_checkpoints, self.checkpoint_freq = save_checkpoints, checkpoint_freq
        self.class_path = class_path(type(self))
        self.archive_text = archive_text   # prompts are then normalised like the archive
        self.use_text(sentences or [], vocab)
        GPTParts.__init__(
            self, vocab_size=self.vocab.size, lang=lang, num_basic_decoders=num_basic_decoders,
            num_atten_heads=num_atten_heads, norm_first=layout == "PreLN",
            max_seq_length=self.max_seq_length, embedding_size=embedding_size, dropout=dropout,
            full_width_heads=full_width_heads, learned_positions=learned_positions,
            tie_embeddings=tie_embeddings)

    # The text, training, scoring and generation. -----------------------------------------
    def use_text(self, sentences, vocab=None):
        """Split ``sentences`` into training and held-out, learn (or take) the tokenizer."""
        use_text(self, sentences, vocab)

    def description(self):
        """What rebuilds this model (see DLStudio.checkpoints)."""
        return gpt_spec(self)

    def run_code_for_training(self, checkpoints_dir="checkpoints_GPT", **options):
        """Train on the training sentences (see training.train_language_model)."""
        return train_language_model(self, checkpoints_dir, **options)

    def perplexity(self, sentences=None):
        """Perplexity on the held-out sentences (or ``sentences``), per piece and per word."""
        return perplexity(self, self.held_out_sentences if sentences is None else sentences)

    def generate(self, prompt, **options):
        """Continue ``prompt`` (a string); see generation.generate_text for the options."""
        return generate_text(self, prompt, **options)

    def load_weights(self, checkpoint):
        return load_into(self, checkpoint)

    @classmethod
    def from_checkpoint(cls, path, dl_studio=None, model_class=None):
        """``(gpt, payload)`` from a checkpoint file alone, in eval mode on the device."""
        return cls.rebuilt(path, dl_studio, model_class, TransformerGPT,
                              "a language model (TransformerGPT): train one with train_gpt.py")


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
        in_channels (C); layout; augment (random shifts and flips of training images);
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

    def __init__(self, *, dl_studio, patch_size=(8, 8), embedding_size=128,
                 num_basic_encoders=4, num_atten_heads=4, image_size=None, classes=None,
                 in_channels=3, layout="PreLN", num_warmup_steps=0, lr_mul=1.0,
                 optimizer_params=None, dropout=0.0, label_smoothing=0.0,
                 full_width_heads=False, augment=False, save_checkpoints=True,
                 checkpoint_freq=5, max_seq_length=None):
        if layout not in ("FG", "PreLN"):
            raise ValueError(f"layout must be 'FG' or 'PreLN', got {layout!r}")
        classes = classes if classes is not None else dl_studio.classes
        if not classes:
            raise ValueError("visTransformer needs the class names: classes=(...) here or in "
                             "DLStudio(classes=...), e.g. SHAPE_CLASSES or CIFAR10_CLASSES")
        self.dl_studio, self.classes, self.layout = dl_studio, tuple(classes), layout
        self.num_warmup_steps, self.lr_mul = num_warmup_steps, lr_mul
        self.optimizer_params = dict(optimizer_params or ADAM_DEFAULTS)
        self.label_smoothing, self.augment = label_smoothing, augment
        self.save_checkpoints, self.checkpoint_freq = save_checkpoints, checkpoint_freq
        VisionParts.__init__(
            self, num_classes=len(self.classes), patch_size=patch_size,
            image_size=tuple(image_size or dl_studio.image_size or (32, 32)),
            in_channels=in_channels, num_basic_encoders=num_basic_encoders,
            num_atten_heads=num_atten_heads, norm_first=layout == "PreLN",
            embedding_size=embedding_size, dropout=dropout, full_width_heads=full_width_heads)
        if max_seq_length not in (None, self.max_seq_length):
            raise ValueError(f"max_seq_length {max_seq_length} does not fit: {self.image_size} "
                             f"images in {self.patch_size} patches give {self.max_seq_length}"
                             " tokens with the class token; leave max_seq_length out")
        self.training_set = self.test_set = self.dataset_spec = None
        self.class_path = class_path(type(self))

    # DLStudio's API beyond the model: delegates to the modules that do the work. -------
    def description(self):
        """What rebuilds this model (see DLStudio.checkpoints)."""
        return vit_spec(self)

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
        spec = spec.get("dataset", spec)
        self.use_datasets(*dataset_of(spec, self.image_size, download), spec)

    def run_code_for_training_visTransformer(self, dls=None, model=None, checkpoint_dir=None,
                                             **options):
        """Train (see training.train_images); ``dls`` and ``model`` are accepted for DLStudio
        scripts. Returns the ``ImageTrainer``."""
        return train_images(self, model, checkpoint_dir, **options)

    def load_weights(self, checkpoint):
        """Copy a checkpoint's weights in, after checking it was built like this model."""
        return load_into(self, checkpoint)

    @classmethod
    def from_checkpoint(cls, path, dl_studio=None, model_class=None):
        """Rebuild a visTransformer with its weights from a checkpoint file alone.
        Returns ``(vit, payload)``; the model is in eval mode on the device."""
        return cls.rebuilt(path, dl_studio, model_class, visTransformer,
                              "a visTransformer")

    def predict(self, images, batch_size=500):
        """Class indices of uint8 (N, C, H, W) images (or floats in [0, 1])."""
        return classify(self, images, batch_size)

    def run_code_for_evaluating_visTransformer(self, checkpoint=None, **options):
        """Test accuracy and confusion matrix (see evaluation.evaluate_images)."""
        if checkpoint is not None:
            self.load_weights(checkpoint)
        return evaluate_images(self, **options)
