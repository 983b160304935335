"""A TransformerBERT's wiring: its text (`text_of`), its two trainers (`masked_trainer`,
`train_masked`; `finetune`), a pre-trained BERT given a classifier (`with_labels`), its
uses (`fill`, `probabilities`, `scores`), and a Hugging Face BERT folder read into ours
(`read_huggingface`). The trainers and evaluators never read a container: what they need
is read here, once."""

import json
import os

import torch

from ..checkpoints import CheckpointError
from ..data.anki import normalize
from ..data.bert_text import (
    LabelledRows,
    MaskedText,
    SpecialTokenizer,
    mask_tokens,
    masked_once,
    read_masked_text,
)
from ..evaluation.classify_text import class_probabilities, fill_mask
from ..training.bert import ClassifierTrainer, MaskedLanguageTrainer, encode_rows, masked_scores
from .wiring import own_model, trainer_settings

__all__ = ["SpecialTokenizer", "mask_tokens", "masking", "text_of", "masked_trainer",
           "train_masked", "finetune", "with_labels", "fill", "probabilities", "scores",
           "read_huggingface", "prepared"]


def masking(bert, ids, special, generator):
    """TransformerBERT.mask_tokens: the rule with this BERT's [MASK], vocabulary, special
    ids and mask_rate."""
    vocab = bert.vocab
    return mask_tokens(ids, special, generator, vocab.mask_id, vocab.size, bert.mask_rate,
                       vocab.special_ids)


def text_of(bert, sentences, vocab, ordered):
    """The MaskedText of a TransformerBERT: its sentences, or (with none) only a tokenizer
    (a checkpoint's, a vocab.txt's) for a model that is used, not pre-trained."""
    if sentences:
        return read_masked_text(sentences, held_out_fraction=bert.held_out_fraction,
                                split_seed=bert.split_seed, tokenizer=bert.tokenizer,
                                vocab_size=bert.vocab_size, vocab=vocab,
                                max_seq_length=bert.max_seq_length, ordered=ordered)
    if vocab is None:
        raise ValueError("TransformerBERT needs sentences= to pre-train on (its tokenizer is "
                         "learnt from them) or vocab= (a SpecialTokenizer)")
    return MaskedText([], [], vocab, bert.max_seq_length or 64)


def masked_trainer(bert, checkpoints_dir=None, **options):
    """The masked-language trainer of a BERT: itself, its text, its optimiser, settings."""
    bert = own_model(bert)
    if bert.pair_task == "next" and not bert.data.ordered:
        raise ValueError("pair_task='next' pairs each line with the next: give text whose "
                         "lines run in order (sentences=..., ordered=True; --text FILE)")
    return MaskedLanguageTrainer(bert, bert.data, bert.make_optimizer(bert.parameters()),
                                 bert.dl_studio, checkpoints_dir, mask_rate=bert.mask_rate,
                                 masking=bert.mask_tokens, **trainer_settings(bert), **options)


def train_masked(bert, checkpoints_dir="checkpoints_BERT", callback=None, **options):
    """Pre-train; the final model to ``dl_studio.path_saved_model``. Returns the trainer."""
    return masked_trainer(bert, checkpoints_dir, **options).run_and_save(callback)


def prepared(bert, text):
    """A text as the model's training text was written: an archive's sentences were
    normalised (lower case, punctuation out), so a text is too, its [MASK] kept as it is;
    a byte-level BPE piece carries the space before its word, so a [MASK] takes it."""
    parts = [" ".join(p.split()) for p in text.split("[MASK]")]
    if bert.archive_text:
        parts = [normalize(p, expand=bert.lang == "en") for p in parts]
    if bert.tokenizer != "bpe":
        return " [MASK] ".join(parts).strip()
    return parts[0] + "".join("[MASK]" + (" " + p if p else "") for p in parts[1:])


def finetune(bert, train_rows, test_rows=None, checkpoints_dir="checkpoints_BERT_finetuned",
             callback=None, **options):
    """Fine-tune a BERT that has ``labels`` on LabelledRows: every layer and the classifier
    on [CLS]; the final model to ``dl_studio.path_saved_model``. Returns the trainer."""
    if not bert.labels:
        raise ValueError("this BERT has no classifier: build it with labels=(...), or "
                         "bert.with_labels(labels)")
    bert = own_model(bert)
    index = {label: i for i, label in enumerate(bert.labels)}
    train = encode_rows(bert.vocab, _rows_as_trained(bert, train_rows), index,
                        bert.max_seq_length)
    test = (None if test_rows is None else
            encode_rows(bert.vocab, _rows_as_trained(bert, test_rows), index,
                        bert.max_seq_length))
    trainer = ClassifierTrainer(bert, train, test, bert.make_optimizer(bert.parameters()),
                                bert.dl_studio, checkpoints_dir, **trainer_settings(bert),
                                **options)
    return trainer.run_and_save(callback)


def _rows_as_trained(bert, rows):
    if not bert.archive_text:
        return rows
    fix = [prepared(bert, t) for t in rows.texts]
    seconds = None if rows.seconds is None else [prepared(bert, t) for t in rows.seconds]
    return LabelledRows(fix, rows.labels, seconds, rows.path)


def with_labels(bert, labels, dl_studio=None, pretrained=True, **changes):
    """A new BERT of ``bert``'s tokenizer and settings (but ``changes``: how it trains)
    with a classifier for ``labels`` (no pair-task head); every weight but the
    classifier's copied from ``bert`` when ``pretrained`` (else all fresh: the same model
    from scratch)."""
    settings = bert.settings_class.from_record(bert.settings_class.record(bert))
    settings.update(changes, labels=tuple(labels), pair_task="none")
    dls = dl_studio or bert.dl_studio
    new = type(bert)(dl_studio=dls, vocab=bert.vocab, **settings)
    if pretrained:
        mine = new.state_dict()
        theirs = {k: v for k, v in bert.state_dict().items()
                  if k in mine and not k.startswith(("classifier.", "next_sentence."))}
        missing = sorted(set(mine) - set(theirs) - {k for k in mine
                                                    if k.startswith("classifier.")})
        if missing:
            raise CheckpointError(f"the pre-trained BERT lacks {', '.join(missing[:5])}")
        new.load_state_dict(theirs, strict=False)
    return new


def fill(bert, text, top=5):
    return fill_mask(bert, bert.vocab, prepared(bert, text), top)


def probabilities(bert, texts, seconds=None, batch_size=256):
    if bert.archive_text:
        texts = [prepared(bert, t) for t in texts]
        seconds = None if seconds is None else [prepared(bert, t) for t in seconds]
    ids, segments = bert.vocab.layout(texts, seconds, bert.max_seq_length)
    return class_probabilities(bert, ids, segments, batch_size)


def scores(bert, sentences=None, seed=None):
    """Masked-token scores of the held-out sentences (or ``sentences``), masked once with
    ``seed``: by default the run's seed, as the trainer masks them (`masked_once`)."""
    sentences = bert.held_out_sentences if sentences is None else sentences
    seed = (bert.dl_studio.seed or 0) if seed is None else seed
    return masked_scores(bert, *masked_once(bert.vocab, sentences, bert.max_seq_length, seed,
                                            bert.mask_rate))


# -----------------------------------------------------------------------------------------
# A Hugging Face BERT folder, read into ours.
_LAYER = {"attention.output.dense": "self_attention.W_O",
          "attention.output.LayerNorm": "norm1", "intermediate.dense": "feed_forward.W1",
          "output.dense": "feed_forward.W2", "output.LayerNorm": "norm2"}
_TOP = {"embeddings.word_embeddings": "embeddings_generator.embedding",
        "embeddings.token_type_embeddings": "segment_embeddings",
        "embeddings.LayerNorm": "embedding_layer_norm", "pooler.dense": "pooler_layer.dense.0",
        "cls.predictions.transform.dense": "mlm_head.transform.0",
        "cls.predictions.transform.LayerNorm": "mlm_head.transform.2",
        "cls.seq_relationship": "next_sentence"}


def _hf_weights(path):
    """The state dict of a Hugging Face folder: model.safetensors, or pytorch_model.bin
    read with weights_only (tensors only: no code runs)."""
    safe, old = (os.path.join(path, n) for n in ("model.safetensors", "pytorch_model.bin"))
    if os.path.isfile(safe):
        from safetensors.torch import load_file
        return load_file(safe)
    if os.path.isfile(old):
        return torch.load(old, map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"{path} holds neither model.safetensors nor pytorch_model.bin")


def _our_name(name, H):
    """Our parameter name(s) for a Hugging Face one: a list of (our name, head or None)."""
    name = name.removeprefix("bert.")
    name = name.replace(".gamma", ".weight").replace(".beta", ".bias")   # TF-era names
    stem, _, kind = name.rpartition(".")
    if stem.startswith("encoder.layer."):
        i, _, rest = stem[len("encoder.layer."):].partition(".")
        layer = f"master_encoder.basic_encoder_arr.{i}."
        for ours, W in (("query", "WQ"), ("key", "WK"), ("value", "WV")):
            if rest == f"attention.self.{ours}":
                return [(f"{layer}self_attention.heads.{h}.{W}.{kind}", h) for h in range(H)]
        if rest in _LAYER:
            return [(f"{layer}{_LAYER[rest]}.{kind}", None)]
    if stem in _TOP:
        return [(f"{_TOP[stem]}.{kind}", None)]
    if name == "embeddings.position_embeddings.weight":
        return [("embeddings_generator.learned_positions", None)]
    if name in ("cls.predictions.bias", "cls.predictions.decoder.bias"):
        return [("mlm_head.bias", None)]
    if name in ("cls.predictions.decoder.weight", "embeddings.position_ids"):
        return []               # the word embeddings' matrix (tied); a buffer of positions
    return None


def _casing(path):
    """Whether the folder's tokenizer lowercases and strips accents: Hugging Face keeps
    ``do_lower_case`` and ``strip_accents`` in tokenizer_config.json (never in
    config.json); without that file, BertTokenizer's defaults (lowercase, accents as case)."""
    settings = {}
    name = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(name):
        with open(name, encoding="utf-8") as f:
            settings = json.load(f)
    return {"lowercase": bool(settings.get("do_lower_case", True)),
            "strip_accents": settings.get("strip_accents")}


def _next_sentence_rows(tensor):
    """Hugging Face's next-sentence head says 0 for "B follows A" and 1 for "B is random";
    ours says 1 for "B follows A" (is_next): its two rows are swapped when read."""
    return tensor.flip(0)


def read_huggingface(cls, path, dls):
    """A TransformerBERT (``cls``) of a Hugging Face BERT folder. A setting we do not have
    (an activation other than GELU, relative positions) or a weight we cannot place is
    refused by name."""
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    arch = (config.get("architectures") or ["BertModel"])[0]
    if config.get("is_decoder") or config.get("add_cross_attention") or arch == "BertLMHeadModel":
        raise CheckpointError(f"{path}: a BERT decoder ({arch}, is_decoder "
                              f"{bool(config.get('is_decoder'))}): each position attends only "
                              "to those before it, where TransformerBERT attends both ways; "
                              "give an encoder's folder (BertModel, BertForMaskedLM, "
                              "BertForPreTraining)")
    act = config.get("hidden_act", "gelu")
    if act != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(f"{path}: hidden_act {act!r}, position_embedding_type "
                              f"{config.get('position_embedding_type')!r}: ours are 'gelu' "
                              "and 'absolute'")
    weights = _hf_weights(path)
    decoder = weights.get("cls.predictions.decoder.weight")
    words = weights.get("bert.embeddings.word_embeddings.weight",
                        weights.get("embeddings.word_embeddings.weight"))
    if decoder is not None and words is not None and not torch.equal(decoder, words):
        raise CheckpointError(f"{path}: cls.predictions.decoder.weight is not the word "
                              "embeddings' matrix (an untied output layer): ours ties the two, "
                              "so this model cannot be read into TransformerBERT")
    tok = SpecialTokenizer.from_vocab_txt(os.path.join(path, "vocab.txt"),
                                          **_casing(path))
    M, H = config["hidden_size"], config["num_attention_heads"]
    has = {".".join(k.removeprefix("bert.").split(".")[:2]) for k in weights}
    bert = cls(dl_studio=dls, vocab=tok, tokenizer="wordpiece",
               max_seq_length=config["max_position_embeddings"], embedding_size=M,
               num_basic_encoders=config["num_hidden_layers"], num_atten_heads=H,
               full_width_heads=True, feed_forward_size=config["intermediate_size"],
               norm_eps=config.get("layer_norm_eps", 1e-12), pooler="pooler.dense" in has,
               pair_task="next" if "cls.seq_relationship" in has else "none")
    mine, placed = bert.state_dict(), {"mlm_head.decoder.weight"}     # (tied)
    s = M // H
    for name, tensor in weights.items():
        targets = _our_name(name, H)
        if targets is None:
            raise CheckpointError(f"{path}: no place in TransformerBERT for {name} "
                                  f"{tuple(tensor.shape)}")
        for ours, head in targets:
            part = tensor if head is None else tensor[head * s:(head + 1) * s]
            if ours.startswith("next_sentence."):
                part = _next_sentence_rows(part)
            if ours not in mine or mine[ours].shape != part.shape:
                raise CheckpointError(f"{path}: {name} {tuple(tensor.shape)} does not fit "
                                      f"{ours} {tuple(mine[ours].shape) if ours in mine else ''}")
            mine[ours].copy_(part)
            placed.add(ours)
    unplaced = sorted(set(mine) - placed)
    if unplaced:
        raise CheckpointError(f"{path} has no weights for {', '.join(unplaced[:4])}"
                              f"{' ...' if len(unplaced) > 4 else ''}")
    return bert.to(dls.device).eval()
