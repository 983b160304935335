"""Real translation models in the lecture's own classes: a Hugging Face folder of a
``MarianMTModel`` (Helsinki-NLP's OPUS-MT) read into a TransformerFG built of the
architecture's nested classes, with its tokenizer (data/hub_translation.py) and the
generation settings its folder gives (evaluation/folder_rules.GenerationRules). One short
module per family (marian.py) over the decoder reader's core (containers/hub/weights.py: the
weights read one tensor at a time, placed by name). Every config field maps to one of our
settings, every weight to one of our parameters; what we cannot reproduce exactly is refused
by name, every such setting at once, before anything is built.

    >>> xformer, model, _ = TransformerFG.from_huggingface("opus-mt-en-es")
    >>> xformer.translate(model, ["The cat sleeps."])
"""

import os

import torch

from ...checkpoints import Restored
from ...data.hub_tokenizer import FolderError, read_json
from ...data.vocabulary import TranslationData
from ...evaluation.folder_rules import GenerationRules
from ...runtime.studio import DLStudio
from ..hub.defaults import completed
from ..hub.weights import heads_of, hf_weights, place
from . import bart, marian, mbart, t5
from .writer import write_marian

__all__ = ["read_folder", "write_marian", "settings_of", "as_read_from", "layout_of",
           "ARCHITECTURES", "FolderError"]

FAMILIES = {arch: family for family in (marian, t5, bart, mbart)
            for arch in family.ARCHITECTURES}
ARCHITECTURES = tuple(FAMILIES)
#: The hub's best-known other translation models, with what they need that we lack.
OTHERS = {"FSMTForConditionalGeneration": "FSMT's fairseq layout",
          "M2M100ForConditionalGeneration": "M2M-100's pre-LN layout and language codes"}


class Core:
    """What every family's ``weights`` uses: a Hugging Face attention's four projections
    cut into our heads (W_Q, W_K, W_V per head; out_proj is W^O)."""

    @staticmethod
    def attention(hf, theirs, ours, heads, names=("q_proj", "k_proj", "v_proj", "out_proj")):
        for their, mine in zip(names[:3], ("WQ", "WK", "WV")):
            yield from heads_of(ours, mine, hf.pop(f"{theirs}{their}.weight"), heads)
            bias = hf.pop(f"{theirs}{their}.bias", None)
            if bias is not None:
                yield from heads_of(ours, mine, bias, heads)
        yield f"{ours}W_O.weight", hf.pop(f"{theirs}{names[3]}.weight")
        bias = hf.pop(f"{theirs}{names[3]}.bias", None)
        if bias is not None:
            yield f"{ours}W_O.bias", bias


def settings_of(config, path="the folder", layout=None, weights=None):
    """The family, our settings and the stacks' sizes for a folder's config.json, or
    FolderError naming every setting we cannot reproduce exactly (``layout``: the container
    asked for, "FG" or "PreLN", which must be the family's; ``weights``: the folder's, for
    what a family reads off them, as T5's output matrix of its own)."""
    arch = (config.get("architectures") or ["(none)"])[0]
    if arch not in FAMILIES:
        why = f" ({OTHERS[arch]})" if arch in OTHERS else ""
        raise FolderError(f"{path}: its architecture {arch}{why} is not a translation model "
                          f"we read; we read {', '.join(ARCHITECTURES)}")
    family, config = FAMILIES[arch], completed(config, arch)
    if hasattr(family, "facts"):
        config = family.facts(config, weights)
    if layout is not None and layout != family.LAYOUT:
        other = {"FG": "TransformerFG", "PreLN": "TransformerPreLN"}[family.LAYOUT]
        raise FolderError(f"{path}: a {arch} is {'post' if family.LAYOUT == 'FG' else 'pre'}"
                          f"-LN; read it with {other}.from_huggingface")
    refused = []
    settings = family.settings(config, refused)
    if refused:
        raise FolderError(f"{path}: {arch} with settings we cannot reproduce exactly: "
                          f"{'; '.join(refused)}. Nothing was loaded")
    return family, config, settings


def layout_of(path):
    """"FG" or "PreLN": the container a translation folder is read into (FolderError for a
    folder that is none we read)."""
    if not os.path.isdir(path):
        raise FolderError(f"{path} is not a folder: give the folder a model was downloaded "
                          "to (docs/real_models.md says how)")
    config = read_json(path, "config.json")
    arch = (config.get("architectures") or ["(none)"])[0]
    if arch not in FAMILIES:
        settings_of(config, path)                      # (its FolderError says why)
    return FAMILIES[arch].LAYOUT


def no_archive(path):
    def read():
        raise FolderError(f"{path} is a model read from a folder: it has no pairs of its "
                          "own; give an archive to score it on (archive=)")
    return read


def read_folder(cls, path, dl_studio=None, dtype=None, data_archive=None, training=None,
                languages=None):
    """A `Restored` (container, model, None) of a Hugging Face translation folder: ``cls``
    (TransformerFG or a subclass: its nested classes are used), the model in eval mode, its
    weights in ``dtype`` (float32 or bfloat16); ``data_archive``: an archive or pairs file
    to fine-tune it on (read with the folder's tokenizer), ``training``: the container's
    other settings (training's: by default no warm-up, Adam at the DLStudio's rate);
    ``languages``: an mBART folder's (source, target) codes, "en_XX", "es_XX", over its
    own (None: the folder's; the decoder starts from the target's, and a forced first token
    is it)."""
    if not os.path.isdir(path):
        raise FolderError(f"{path} is not a folder: give the folder a model was downloaded "
                          "to (docs/real_models.md says how)")
    config, weights = read_json(path, "config.json"), hf_weights(path)
    family, config, settings = settings_of(config, path, cls.variant, weights)
    stacks = settings.pop("stacks")
    languages = tuple(languages) if languages and any(languages) else None
    if languages and family is not mbart:
        raise FolderError(f"{path}: a {config['architectures'][0]} has no language codes "
                          "to choose (mBART's have): its languages are its own")
    tokenizer = family.tokenizer(path, config, languages) if languages else \
        family.tokenizer(path, config)
    sizes = family.vocab_sizes(config)
    for lang, size in zip(("en", "es"), sizes):
        if getattr(tokenizer, f"vocab_{lang}_size") > size:
            raise FolderError(f"{path}: its {'target ' if lang == 'es' else ''}vocabulary "
                              f"has {getattr(tokenizer, f'vocab_{lang}_size')} ids, more "
                              f"than the model's {size}")
    tokenizer.vocab_en_size, tokenizer.vocab_es_size = sizes
    generation = read_json(path, "generation_config.json", required=False)
    start = generation.get("decoder_start_token_id", config.get("decoder_start_token_id"))
    if languages and languages[1]:          # the target's code first, whatever the folder's
        start = tokenizer.start_id
        generation = {**generation, "decoder_start_token_id": start}
        if {**config, **generation}.get("forced_bos_token_id") is not None:
            generation["forced_bos_token_id"] = start
    if start is not None:       # (transformers 5 takes generate's settings from the file)
        tokenizer.start_id = start
    dls = dl_studio or DLStudio(seed=None)
    data, more = TranslationData(vocab=tokenizer, reader=no_archive(path)), {}
    if data_archive is not None:          # the pairs it fine-tunes on, in its own pieces
        data, options = TranslationData.read(
            data_archive, vocab=tokenizer, max_seq_length=tokenizer.max_seq_length,
            tokenizer=tokenizer.kind)
        more = {"data_archive": os.path.basename(data_archive), "pairs_options": options,
                "dataroot": os.path.dirname(os.path.abspath(data_archive))}
    more = {"num_warmup_steps": 0, "dropout": 0.0, **more, **(training or {})}
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype or torch.float32)     # built in the dtype asked: one copy
    try:
        xformer = cls(dl_studio=dls, data=data, tokenizer=tokenizer.kind, **settings, **more)
        encoder = cls.MasterEncoder(dls, xformer, stacks["num_basic_encoders"],
                                    stacks["encoder_heads"])
        decoder = cls.MasterDecoderWithMasking(dls, xformer, stacks["num_basic_decoders"],
                                               stacks["decoder_heads"])
        model = xformer.model_of(encoder, decoder)
    finally:
        torch.set_default_dtype(before)
    place(model, family.weights(weights, config, Core), path)
    left = weights.left()
    if left:
        raise FolderError(f"{path}: no place in our classes for {', '.join(left[:4])}"
                          f"{' ...' if len(left) > 4 else ''}. Nothing was loaded")
    try:                  # (transformers 5 reads generate's settings from there, over config)
        as_read_from(xformer, model, {"path": path, "architecture": config["architectures"][0],
                                      "generation_config": {**config, **generation}})
    except ValueError as e:
        raise FolderError(str(e)) from None
    model.spec = xformer.spec()              # (what a checkpoint of it records)
    return Restored(xformer, model.to(dls.device).eval(), None)


def as_read_from(xformer, model, folder):
    """Mark a container and its model as read from ``folder`` ({"path", "architecture",
    "generation_config"}: what a checkpoint of it records, containers/wiring): how it
    generates (`GenerationRules`) and, on the model, what its LoRA adapters are of."""
    for kept in (xformer, model):
        kept.folder, kept.folder_architecture = folder["path"], folder["architecture"]
    xformer.generation_config = folder["generation_config"]
    xformer.generation_rules = model.generation_rules = GenerationRules.of_folder(
        folder["generation_config"], {}, xformer.vocab.end_id, folder["path"])
