"""Settings are described once per model kind (DLStudio.containers.settings), and data flows
one way: an archive is read once into the object the container keeps, DLStudio's names are
read-only views of it, and a checkpoint is read once and needs no archive to rebuild."""

import dataclasses
import inspect
import json
import os

import pytest
import torch

import DLStudio.checkpoints as checkpoints
import DLStudio.data as data
import DLStudio.data.vocabulary as vocabulary
from DLStudio import DLStudio, TransformerFG, TransformerGPT, visTransformer
from DLStudio.checkpoints import Restored, make_payload, save_checkpoint
from DLStudio.containers.settings import (
    GPTSettings,
    SettingError,
    TranslationSettings,
    VisionSettings,
    setting,
)
from DLStudio.data import BUNDLED_ARCHIVE, SHAPE_CLASSES
from DLStudio.data.vocabulary import TranslationData

from .conftest import ROOT

OLD = os.path.join(ROOT, "tests", "fixtures", "old_fg_checkpoint.pt")
THEN = json.load(open(os.path.join(ROOT, "tests", "fixtures", "old_fg_translations.json"),
                     encoding="utf-8"))
SENTENCES = [f"el gato {w} la casa" for w in ("ve", "come", "tiene", "busca", "deja", "mira")]


def dls():
    return DLStudio(use_gpu=False, seed=0)


def counting(monkeypatch, module, name):
    """Count the calls of ``module.name`` (and let them through)."""
    calls, real = [], getattr(module, name)

    def counted(*a, **k):
        calls.append(a)
        return real(*a, **k)
    monkeypatch.setattr(module, name, counted)
    return calls


# Settings written once. ------------------------------------------------------------------
@pytest.mark.parametrize("cls, settings, before", [
    (TransformerFG, TranslationSettings, ["dl_studio", "corpus", "vocab", "data"]),
    (TransformerGPT, GPTSettings, ["dl_studio", "sentences", "vocab"]),
    (visTransformer, VisionSettings, ["dl_studio"])])
def test_the_constructors_keywords_are_the_settings_description(cls, settings, before):
    shown = list(inspect.signature(cls).parameters)
    assert shown == before + settings.names()
    field = {f.name: f for f in dataclasses.fields(settings)}
    for name, param in inspect.signature(cls).parameters.items():
        if name in field:
            assert param.default == field[name].default


def test_an_unknown_setting_is_refused_by_name_with_the_nearest_one():
    with pytest.raises(SettingError, match="TransformerFG has no setting 'embeding_size' "
                                           r"\(did you mean 'embedding_size'\?\)"):
        TransformerFG(dl_studio=dls(), data_archive=BUNDLED_ARCHIVE, embeding_size=32)
    with pytest.raises(TypeError, match="visTransformer has no setting 'num_heads'"):
        visTransformer(dl_studio=dls(), classes=SHAPE_CLASSES, num_heads=2)


def test_a_checkpoint_records_shapes_and_compares_what_the_description_says():
    x = TransformerFG(dl_studio=dls(), data_archive=BUNDLED_ARCHIVE, embedding_size=32,
                      dropout=0.1, save_checkpoints=False)
    spec = x.model_of(*_stacks(x)).description()
    assert sorted(spec["container_args"]) == sorted(TranslationSettings.names("recorded"))
    assert "save_checkpoints" not in spec["container_args"]        # how this session runs
    assert spec["container_args"]["dropout"] == 0.1
    assert spec["shape_args"] == TranslationSettings.shape_names()
    assert "checkpoint_freq" not in spec["identity_args"]           # may change on --resume
    assert "dropout" in spec["identity_args"]
    gpt = TransformerGPT(dl_studio=dls(), sentences=SENTENCES, tokenizer="word",
                         embedding_size=16, num_basic_decoders=1, num_atten_heads=2)
    assert sorted(gpt.description()["container_args"]) == sorted(GPTSettings.names("recorded"))


def _stacks(x):
    return (x.MasterEncoder(x.dl_studio, x, num_basic_encoders=1, num_atten_heads=2),
            x.MasterDecoderWithMasking(x.dl_studio, x, num_basic_decoders=1,
                                       num_atten_heads=2))


@dataclasses.dataclass
class WithTemperature(TranslationSettings):
    temperature: float = setting(1.0, shapes=True)


class TemperatureFG(TransformerFG):
    settings_class = WithTemperature


def test_a_setting_added_in_one_place_is_a_keyword_recorded_and_checked(tmp_path):
    x = TemperatureFG(dl_studio=dls(), data_archive=BUNDLED_ARCHIVE, embedding_size=32,
                      temperature=2.0)
    assert x.temperature == 2.0
    model = x.model_of(*_stacks(x))
    path = str(tmp_path / "checkpoint_0.pt")
    save_checkpoint(make_payload(model, {}), path)
    again, _, payload = TemperatureFG.from_checkpoint(path)
    assert payload["container_args"]["temperature"] == again.temperature == 2.0
    other = TemperatureFG(dl_studio=dls(), data_archive=BUNDLED_ARCHIVE, embedding_size=32)
    with pytest.raises(checkpoints.CheckpointError, match="temperature=2.0, this model has "
                                                          "temperature=1.0"):
        other.load_weights(payload, *_stacks(other))


# Data flows one way. ---------------------------------------------------------------------
def test_an_archive_is_read_once_and_split_when_first_asked(monkeypatch):
    reads = counting(monkeypatch, vocabulary, "load_corpus")
    splits = counting(monkeypatch, vocabulary, "split_pairs")
    x = TransformerFG(dl_studio=dls(), data_archive=BUNDLED_ARCHIVE, embedding_size=32)
    assert (len(reads), len(splits)) == (1, 0)     # DLStudio's word lists need no split
    held_out = x.held_out_corpus
    assert len(splits) == 1 and held_out == x.data.held_out_pairs
    assert len(x.training_corpus) + len(held_out) == len(x.corpus.pairs)
    assert (len(reads), len(splits)) == (1, 1)
    assert {en for en, _ in held_out}.isdisjoint(en for en, _ in x.training_corpus)


def test_dlstudio_s_names_are_read_only_views_of_the_data():
    x = TransformerFG(dl_studio=dls(), data_archive=BUNDLED_ARCHIVE, embedding_size=32)
    assert x.en_vocab_dict is x.data.vocab.en_vocab_dict
    assert x.vocab_es_size == len(x.es_index_2_word) == x.data.vocab.vocab_es_size
    for name in ("training_corpus", "held_out_corpus", "vocab", "en_vocab_dict",
                 "vocab_en_size"):
        with pytest.raises(AttributeError, match=f"{name} is a view of the data"):
            setattr(x, name, [])
    other = x.data.with_split(x.training_corpus[:5], x.training_corpus[5:9])
    y = TransformerFG(dl_studio=dls(), data=other, embedding_size=32)
    assert y.held_out_corpus == x.training_corpus[5:9] and y.vocab is x.vocab


def test_a_checkpoint_is_read_once_and_its_archive_only_to_be_scored_on(monkeypatch):
    loads = counting(monkeypatch, torch, "load")
    reads = counting(monkeypatch, data, "load_corpus")
    xformer, model, payload = TransformerFG.from_checkpoint(OLD)
    assert (len(loads), len(reads)) == (1, 0)
    assert xformer.translate(model, THEN["english"][:2])    # no archive needed to translate
    assert len(reads) == 0
    held_out = xformer.held_out_corpus                  # to score it: the archive, once
    assert len(reads) == 1 and held_out
    assert xformer.held_out_corpus is held_out and len(reads) == 1


def test_the_scripts_load_a_checkpoint_reading_the_file_once(monkeypatch):
    from DLStudio.cli.common import load_checkpoint_or_exit
    loads = counting(monkeypatch, torch, "load")
    xformer, model = load_checkpoint_or_exit(OLD, archive=BUNDLED_ARCHIVE)
    assert len(loads) == 1 and xformer.held_out_corpus


def test_every_from_checkpoint_returns_container_model_and_checkpoint(tmp_path):
    gpt = TransformerGPT(dl_studio=dls(), sentences=SENTENCES, tokenizer="word",
                         embedding_size=16, num_basic_decoders=1, num_atten_heads=2)
    vit = visTransformer(dl_studio=dls(), classes=SHAPE_CLASSES, patch_size=(8, 8),
                         embedding_size=16, num_basic_encoders=1, num_atten_heads=2)
    for model, cls in ((gpt, TransformerGPT), (vit, visTransformer)):
        path = str(tmp_path / f"{cls.__name__}.pt")
        save_checkpoint(make_payload(model, {}), path)
        restored = cls.from_checkpoint(path)
        assert isinstance(restored, Restored) and restored.container is restored.model
        assert restored.checkpoint["variant"] == cls.variant
        for name, value in model.state_dict().items():
            assert torch.equal(restored.model.state_dict()[name], value), name
    restored = TransformerFG.from_checkpoint(OLD)
    assert isinstance(restored, Restored) and restored.model is not restored.container
    assert restored.model.description()["vocab_fingerprint"] == restored.checkpoint[
        "vocab_fingerprint"]


def test_translation_data_needs_a_corpus_or_a_reader():
    with pytest.raises(ValueError, match="data_archive="):
        TranslationData()
