"""A model's settings, described once per model kind.

Each dataclass below lists a container's keyword settings with their defaults, and says of
each what it is to a checkpoint:

    shapes     it shapes the weights: a checkpoint fits a model only when they agree
    recorded   the checkpoint keeps it (``container_args``), so the file alone rebuilds
               the model (False: how this session runs, e.g. ``save_checkpoints``)
    identity   ``--resume`` refuses a checkpoint whose run had another value (False: where
               the data lies or how often the run saves; these may change)

From that one description come the containers' keywords (``TransformerFG(dl_studio=...,
**settings)``: an unknown one is refused by name), what a checkpoint records, which of its
arguments must fit the model, and what ``--resume`` compares.

    >>> TranslationSettings.names()[:3]
    ['dataroot', 'data_archive', 'max_seq_length']
    >>> TranslationSettings.shape_names()
    ['max_seq_length', 'embedding_size', 'full_width_heads', 'tie_embeddings', 'positions',
     'shared_vocab', 'norm', 'feed_forward', 'kv_heads', 'feed_forward_size']
"""

import dataclasses
import difflib
import inspect
from dataclasses import dataclass, field

from ..data.hub_translation import FOLDER_KINDS
from ..model.architecture import POSITIONS, GPTParts, TransformerParts
from ..model.bert import BERTParts
from ..model.vision import VisionParts
from ..training.schedule import ADAM_DEFAULTS, SCHEDULES

__all__ = ["Settings", "TranslationSettings", "LayoutSettings", "GPTSettings", "VisionSettings",
           "BERTSettings", "SettingError", "setting", "FOLDER_SWITCHES"]

#: The switches only a real model's folder sets in a translation model (containers/hub_seq2seq).
FOLDER_SWITCHES = ("head_size", "gated_size", "score_scale", "output_scale", "own_output",
                   "norm_embeddings")


class SettingError(TypeError):
    """A keyword that is no setting of the model, with the nearest one."""


def _defaults(constructor):
    """The keyword defaults of one of the architecture's constructors: a setting that is a
    size or switch of the model takes its default from there, where it is written once."""
    return {name: p.default for name, p in inspect.signature(constructor).parameters.items()
            if p.default is not inspect.Parameter.empty}


MODEL = _defaults(TransformerParts.__init__)
GPT = _defaults(GPTParts.__init__)
VISION = _defaults(VisionParts.__init__)
BERT = _defaults(BERTParts.__init__)


def _whole_and_positive(value):
    """A count of something (heads, hidden units): an int >= 1, and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def setting(default=None, *, shapes=False, recorded=True, identity=True):
    """One setting: its default and what it is to a checkpoint (see the module docstring)."""
    return field(default=default, metadata={"shapes": shapes, "recorded": recorded,
                                            "identity": identity and recorded})


@dataclass
class Settings:
    """What every model kind's settings share, and what is derived from them."""

    @classmethod
    def names(cls, what=None):
        """The settings' names, in order; ``what``: only those that are "shapes",
        "recorded" or "identity"."""
        return [f.name for f in dataclasses.fields(cls) if what is None or f.metadata[what]]

    @classmethod
    def shape_names(cls):
        return cls.names("shapes")

    @classmethod
    def default(cls, name):
        """The default of the setting ``name`` (the scripts' flags take it from here)."""
        return next(f.default for f in dataclasses.fields(cls) if f.name == name)

    @classmethod
    def shape_defaults(cls):
        """What a checkpoint from before a shape setting existed was built with: its
        default (a later setting's default is the model as it was)."""
        return {f.name: f.default for f in dataclasses.fields(cls) if f.metadata["shapes"]}

    @classmethod
    def identity_defaults(cls):
        """What a run from before an identity setting existed was trained with: its default
        (so ``--resume`` of an older checkpoint compares it, and a new setting never makes
        an old run unresumable)."""
        return {f.name: f.default for f in dataclasses.fields(cls) if f.metadata["identity"]}

    @classmethod
    def checked(cls, owner, given):
        """The settings ``given`` (a dict of keywords) with the defaults for the rest; an
        unknown keyword raises SettingError naming ``owner`` and the nearest setting."""
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            near = difflib.get_close_matches(unknown[0], cls.names(), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise SettingError(f"{owner} has no setting {unknown[0]!r}{hint}; its settings "
                               f"are {', '.join(cls.names())}")
        return cls(**given)

    @classmethod
    def from_record(cls, container_args):
        """The settings a checkpoint recorded (one from before a setting existed gets its
        default; a name that is no longer a setting is left out)."""
        return {k: v for k, v in container_args.items() if k in cls.names()}

    @classmethod
    def record(cls, model):
        """What a checkpoint keeps of ``model``'s settings: their current values (a setting
        the data changed, such as a BPE model's ``max_seq_length``, as it is now)."""
        return {name: getattr(model, name) for name in cls.names("recorded")}

    @classmethod
    def identity(cls, container_args):
        """The part of a checkpoint's ``container_args`` that ``--resume`` compares."""
        keep = set(cls.names("identity"))
        return {k: v for k, v in container_args.items() if k in keep}

    def apply_to(self, model):
        """Set every setting as an attribute of ``model`` (DLStudio's scripts read them
        there: ``xformer.max_seq_length``, ``xformer.embedding_size``, ...)."""
        for name in self.names():
            setattr(model, name, getattr(self, name))

    @classmethod
    def signature(cls, **before):
        """The keyword-only signature of a constructor that takes ``before`` (name: default,
        ``inspect.Parameter.empty`` for none) and then these settings: what ``help()``
        shows for ``TransformerFG``."""
        params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
                  for name, default in before.items()]
        params += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                     default=(f.default if f.default is not dataclasses.MISSING
                                              else f.default_factory()))
                   for f in dataclasses.fields(cls)]
        return inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
                                  *params])

    def __post_init__(self):
        self.optimizer_params = dict(self.optimizer_params or ADAM_DEFAULTS)  # Adam's betas, eps
        if getattr(self, "learned_positions", None):      # the old name of positions="learned"
            if self.positions not in ("sinusoidal", "learned"):
                raise ValueError(f"learned_positions=True is positions='learned'; it cannot "
                                 f"go with positions={self.positions!r}")
            self.positions = "learned"
        if hasattr(self, "positions"):
            self.learned_positions = self.positions == "learned"    # DLStudio scripts read it
            if self.positions not in POSITIONS:
                raise ValueError(f"positions must be one of {', '.join(POSITIONS)}, got "
                                 f"{self.positions!r}")
        kv = getattr(self, "kv_heads", None)
        if kv is not None and not _whole_and_positive(kv):
            raise ValueError(f"kv_heads is a number of key/value heads (>= 1, dividing "
                             f"num_atten_heads), or None for one per head; got {kv!r}")
        F = getattr(self, "feed_forward_size", None)
        if F is not None and not _whole_and_positive(F):
            raise ValueError(f"feed_forward_size is the feed-forward network's hidden width "
                             f"(a whole number >= 1), or None for the model's own; got {F!r}")
        if getattr(self, "layout", "FG") not in ("FG", "PreLN"):
            raise ValueError(f"layout must be 'FG' or 'PreLN', got {self.layout!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got "
                             f"{self.schedule!r}")


@dataclass
class TranslationSettings(Settings):
    """TransformerFG's and TransformerPreLN's settings (see TransformerBase for each one's
    meaning). DLStudio's own are ``dataroot`` to ``masking``."""

    dataroot: str = setting(None, identity=False)     # None: dl_studio.dataroot
    data_archive: str = setting(None, identity=False)
    max_seq_length: int = setting(10, shapes=True)
    embedding_size: int = setting(256, shapes=True)
    save_checkpoints: bool = setting(True, recorded=False)
    num_warmup_steps: int = setting(4000)
    schedule: str = setting("warmup")      # "budget", "cooldown": to zero at its end
    optimizer_params: dict = setting(None)
    lr_mul: float = setting(1.0)
    masking: bool = setting(True, recorded=False)
    checkpoint_freq: int = setting(5, identity=False)
    held_out_fraction: float = setting(0.05)
    split_seed: int = setting(0)
    dropout: float = setting(MODEL["dropout"])
    label_smoothing: float = setting(0.0)
    full_width_heads: bool = setting(MODEL["full_width_heads"], shapes=True)
    tie_embeddings: bool = setting(MODEL["tie_embeddings"], shapes=True)
    positions: str = setting(MODEL["positions"], shapes=True)         # "learned", "rope"
    learned_positions: bool = setting(None, recorded=False)   # True: positions="learned"
    tokenizer: str = setting("word")
    vocab_size: int = setting(None)
    vocab_from: str = setting("archive")
    shared_vocab: bool = setting(MODEL["shared_vocab"], shapes=True)  # BPE: one vocab, one matrix
    norm: str = setting(MODEL["norm"], shapes=True)                   # since 2017: "rmsnorm"
    feed_forward: str = setting(MODEL["feed_forward"], shapes=True)   # "gelu", "swiglu"
    kv_heads: int = setting(MODEL["kv_heads"], shapes=True)           # G key/value heads
    feed_forward_size: int = setting(None, shapes=True)   # F, the hidden width; None: 2 M
    # what a real model's folder sets (containers/hub_seq2seq)
    scale_embeddings: bool = setting(MODEL["scale_embeddings"], shapes=True)
    norm_eps: float = setting(MODEL["norm_eps"])
    output_bias: bool = setting(MODEL["output_bias"], shapes=True)
    head_size: int = setting(MODEL["head_size"], shapes=True)         # T5's d_kv
    gated_size: int = setting(MODEL["gated_size"], shapes=True)       # T5 v1.1's d_ff
    score_scale: float = setting(MODEL["score_scale"])                # T5's 1
    output_scale: float = setting(MODEL["output_scale"])              # T5 v1.0's M^-1/2
    own_output: bool = setting(MODEL["own_output"], shapes=True)      # Flan-T5's lm_head
    norm_embeddings: bool = setting(MODEL["norm_embeddings"], shapes=True)   # BART's

    def __post_init__(self):
        super().__post_init__()
        if self.shared_vocab and self.tokenizer not in ("bpe",) + FOLDER_KINDS:
            raise ValueError("shared_vocab is one BPE vocabulary learnt from both languages: "
                             "give tokenizer='bpe' with it (--tokenizer bpe --shared-vocab)")
    pairs_options: dict = setting(None)


@dataclass
class LayoutSettings(Settings):
    """What a GPT and a visTransformer share: a layout of either kind ("PreLN", GPT-2's and
    ViT's, or "FG"), no warm-up by default, and the switches of the translation models."""

    layout: str = setting("PreLN", shapes=True)
    num_warmup_steps: int = setting(0)
    schedule: str = setting("warmup")
    lr_mul: float = setting(1.0)
    optimizer_params: dict = setting(None)
    dropout: float = setting(MODEL["dropout"])
    label_smoothing: float = setting(0.0)
    full_width_heads: bool = setting(MODEL["full_width_heads"], shapes=True)
    save_checkpoints: bool = setting(True, recorded=False)
    checkpoint_freq: int = setting(5, identity=False)
    norm: str = setting(MODEL["norm"], shapes=True)                   # since 2017: "rmsnorm"
    feed_forward: str = setting(MODEL["feed_forward"], shapes=True)   # "gelu", "swiglu"
    kv_heads: int = setting(MODEL["kv_heads"], shapes=True)           # G key/value heads


@dataclass
class GPTSettings(LayoutSettings):
    """TransformerGPT's settings (see TransformerGPT)."""

    FROM_FOLDERS = ("output_bias", "feed_forward_size", "norm_eps", "scale_embeddings",
                    "head_size", "gated_size", "rope_base", "rope_scaling")
    SINCE_2023 = ("qk_norm", "window", "nope_layers", "window_layers",    # model/
                  "window_rope_base", "norm_placement", "score_scale")    # since_2023.py

    lang: str = setting("es")
    tokenizer: str = setting("bpe")
    vocab_size: int = setting(8000)
    max_seq_length: int = setting(None, shapes=True)   # None: fitted to the training text
    embedding_size: int = setting(256, shapes=True)
    num_basic_decoders: int = setting(GPT["num_basic_decoders"], shapes=True)
    num_atten_heads: int = setting(GPT["num_atten_heads"], shapes=True)
    positions: str = setting(MODEL["positions"], shapes=True)         # "learned", "rope"
    learned_positions: bool = setting(None, recorded=False)   # True: positions="learned"
    tie_embeddings: bool = setting(MODEL["tie_embeddings"], shapes=True)
    held_out_fraction: float = setting(0.05)
    split_seed: int = setting(0)
    archive_text: bool = setting(False)   # prompts are then normalised like the archive
    # what a real model's folder sets (containers/hub.py); ``output_bias``: --no-output-bias
    output_bias: bool = setting(MODEL["output_bias"], shapes=True)
    feed_forward_size: int = setting(None, shapes=True)          # None: 2 M
    norm_eps: float = setting(MODEL["norm_eps"])
    scale_embeddings: bool = setting(MODEL["scale_embeddings"])
    head_size: int = setting(None, shapes=True)                  # None: M / H
    gated_size: int = setting(None, shapes=True)                 # None: round(2 F / 3)
    rope_base: float = setting(MODEL["rope_base"])
    rope_scaling: dict = setting(None)
    # since 2023 (model/since_2023.py): train_gpt.py's switches, and Qwen3's, Mistral's,
    # SmolLM3's, Gemma 3's and OLMo 2's folders'
    qk_norm: bool = setting(MODEL["qk_norm"], shapes=True)   # or "all_heads"
    window: int = setting(MODEL["window"])              # None: every earlier token
    nope_layers: tuple = setting(MODEL["nope_layers"])  # layers without rotary positions
    window_layers: tuple = setting(MODEL["window_layers"])        # None: every layer slides
    window_rope_base: float = setting(MODEL["window_rope_base"])  # the sliding layers' base
    norm_placement: str = setting(MODEL["norm_placement"], shapes=True)   # "output", ...
    score_scale: float = setting(MODEL["score_scale"])  # None: 1 / sqrt(s_qkv)
    labels: tuple = setting(None, shapes=True)   # a classifier's classes (model/decoder_head)


@dataclass
class VisionSettings(LayoutSettings):
    """visTransformer's settings (see visTransformer)."""

    patch_size: tuple = setting(VISION["patch_size"], shapes=True)
    embedding_size: int = setting(128, shapes=True)
    num_basic_encoders: int = setting(VISION["num_basic_encoders"], shapes=True)
    num_atten_heads: int = setting(VISION["num_atten_heads"], shapes=True)
    image_size: tuple = setting(None, shapes=True)     # None: dl_studio.image_size, (32, 32)
    classes: tuple = setting(None, shapes=True)        # None: dl_studio.classes
    in_channels: int = setting(VISION["in_channels"], shapes=True)
    augment: bool = setting(False)          # True or "shifts_flips"; "shifts": no flips
    tokenizer: str = setting("patches", shapes=True)   # "conv": model/small_images.py
    pooling: str = setting("class_token", shapes=True)  # "sequence": model/small_images.py
    conv_layers: int = setting(2, shapes=True)          # tokenizer="conv": its layers
    max_seq_length: int = setting(None, recorded=False)  # DLStudio's; must be N_p + 1


@dataclass
class BERTSettings(LayoutSettings):
    """TransformerBERT's settings (see TransformerBERT). BERT's own values are the defaults
    (Devlin et al. 2019): post-LN ("FG"), GELU, F = 4 M, learned positions, no sqrt(M)
    scaling, LayerNorm after the embeddings with epsilon 1e-12, the MLM head's transform
    and the pooler; ``labels``: the classifier's classes (None: pre-training only)."""

    layout: str = setting("FG", shapes=True)
    lang: str = setting("text")
    tokenizer: str = setting("bpe")            # "bpe", "word" or "wordpiece" (a vocab.txt)
    vocab_size: int = setting(8000)
    max_seq_length: int = setting(None, shapes=True)   # None: fitted to the training text
    embedding_size: int = setting(256, shapes=True)
    num_basic_encoders: int = setting(BERT["num_basic_encoders"], shapes=True)
    num_atten_heads: int = setting(BERT["num_atten_heads"], shapes=True)
    positions: str = setting("learned", shapes=True)   # or "sinusoidal" (2017), "rope"
    feed_forward: str = setting("gelu", shapes=True)
    feed_forward_size: int = setting(None, shapes=True)   # None: 4 M
    norm_eps: float = setting(1e-12)
    scale_embeddings: bool = setting(False)
    embedding_norm: bool = setting(BERT["embedding_norm"], shapes=True)
    mlm_transform: bool = setting(BERT["mlm_transform"], shapes=True)
    pooler: bool = setting(BERT["pooler"], shapes=True)
    pair_task: str = setting("none", shapes=True)      # "next": the next-sentence head too
    mask_rate: float = setting(0.15)
    labels: tuple = setting(None, shapes=True)
    held_out_fraction: float = setting(0.05)
    split_seed: int = setting(0)
    archive_text: bool = setting(False)   # texts are then normalised like the archive

    def __post_init__(self):
        super().__post_init__()
        choices = {"pair_task": ("none", "next"),
                   "tokenizer": ("bpe", "word", "wordpiece")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got "
                                 f"{getattr(self, name)!r}")
        if not 0 < self.mask_rate < 1:
            raise ValueError(f"mask_rate is a fraction of the tokens, got {self.mask_rate}")
