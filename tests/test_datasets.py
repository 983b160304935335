import gzip
import os
import pickle
import subprocess
import sys

import pytest

from DLStudio.data import (
    BUNDLED_ARCHIVE,
    ArchiveError,
    archive_bytes,
    curate_pairs,
    expand_contractions,
    generate_corpus,
    load_archive,
    normalize,
    save_archive,
    split_pairs,
)
from DLStudio.data.synth import NOUNS, adjective_form, conjugate, noun_phrase

from .conftest import REAL_ARCHIVE, ROOT


def write_pickle(path, obj):
    with gzip.open(path, "wb") as f:
        pickle.dump(obj, f)
    return str(path)


class Payload:
    """Unpickling this runs code: it creates the file named in its argument."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def good_tuple():
    return ({0: ["SOS i eat EOS", "SOS yo como EOS"]}, ["SOS", "EOS", "eat", "i"],
            ["SOS", "EOS", "como", "yo"])


def test_round_trip(tmp_path, tiny_corpus):
    path = tmp_path / "a.tar.gz"
    save_archive(tiny_corpus, path)
    back = load_archive(path)
    assert back.pairs == tiny_corpus.pairs
    assert back.vocab_en == ["SOS", "EOS", "eat", "i", "run", "we", "you"]


def test_crafted_archive_is_refused_and_its_code_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = write_pickle(tmp_path / "evil.tar.gz", Payload(str(marker)))
    with pytest.raises(ArchiveError, match="run code"):
        load_archive(path)
    assert not marker.exists()
    # the CLI too: exit code 1, a message, no traceback, no payload
    out = subprocess.run([sys.executable, "-m", "DLStudio.data", "inspect", path],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 1
    assert "run code" in out.stderr and "Traceback" not in out.stderr
    assert not marker.exists()


def test_crafted_payload_nested_inside_a_valid_looking_tuple(tmp_path):
    marker = tmp_path / "pwned"
    ds, ven, ves = good_tuple()
    ds[1] = ["SOS i eat EOS", Payload(str(marker))]
    with pytest.raises(ArchiveError):
        load_archive(write_pickle(tmp_path / "evil.tar.gz", (ds, ven, ves)))
    assert not marker.exists()


@pytest.mark.parametrize("mutate, message", [
    (lambda t: [t], "expected the tuple"),
    (lambda t: (t[0], t[1]), "expected the tuple"),
    (lambda t: ({}, t[1], t[2]), "non-empty dict"),
    (lambda t: (t[0], ["EOS", "SOS", "eat", "i"], t[2]), "start with 'SOS', 'EOS'"),
    (lambda t: ({0: ["i eat EOS", "SOS yo como EOS"]}, t[1], t[2]), "not wrapped"),
    (lambda t: ({0: ["SOS i eat EOS", "SOS yo bebo EOS"]}, t[1], t[2]), "'bebo' is missing"),
    (lambda t: ({0: ["SOS i eat", "SOS yo como EOS"]}, t[1], t[2]), "not wrapped"),
])
def test_validation_messages(tmp_path, mutate, message):
    path = write_pickle(tmp_path / "bad.tar.gz", mutate(good_tuple()))
    with pytest.raises(ArchiveError, match=message):
        load_archive(path)


def test_not_gzip_and_damaged_gzip(tmp_path):
    plain = tmp_path / "plain.tar.gz"
    plain.write_bytes(pickle.dumps(good_tuple()))
    with pytest.raises(ArchiveError, match="not a gzip file"):
        load_archive(plain)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(gzip.compress(pickle.dumps(good_tuple()))[:30])
    with pytest.raises(ArchiveError, match="damaged|not a readable"):
        load_archive(cut)


def test_missing_file_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="build-archive"):
        load_archive(tmp_path / "nothing.tar.gz")


def test_sentence_too_long_for_max_seq_length(tmp_path):
    path = write_pickle(tmp_path / "a.tar.gz", good_tuple())
    assert load_archive(path, max_seq_length=4).pairs
    with pytest.raises(ArchiveError, match="max_seq_length=3"):
        load_archive(path, max_seq_length=3)


def test_split_is_deterministic_grouped_and_leak_free():
    corpus = generate_corpus(600, seed=1)
    pairs = corpus.pairs + [(corpus.pairs[0][0], "SOS otra traducción EOS")]
    train, held = split_pairs(pairs, 0.2, seed=7)
    assert (train, held) == split_pairs(pairs, 0.2, seed=7)
    assert split_pairs(pairs, 0.2, seed=8) != (train, held)
    assert len(train) + len(held) == len(pairs)
    assert not {en for en, _ in train} & {en for en, _ in held}
    # a sentence with two translations keeps both on the same side
    side = held if corpus.pairs[0] in held else train
    assert (corpus.pairs[0][0], "SOS otra traducción EOS") in side
    assert 0.15 < len({en for en, _ in held}) / len({en for en, _ in pairs}) < 0.25


def test_contractions_and_normalisation():
    assert expand_contractions("i'm sure they'll come but she can't") == \
        "i am sure they will come but she cannot"
    assert expand_contractions("don't touch tom's car we've won't") == \
        "do not touch tom's car we have will not"
    assert normalize("¿Dónde está el U.S. Post-Office?") == "dónde está el u s post office"
    assert normalize("¡No lo sé!") == "no lo sé"
    assert normalize("I'm Tom’s friend.", expand=True) == "i am tom's friend"


def test_converter_on_a_small_tsv(tmp_path, caplog):
    tsv = tmp_path / "spa.txt"
    tsv.write_text("Go.\tVe.\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
                   "I'm hungry!\t¡Tengo hambre!\tCC-BY\n"
                   "Don't go.\tNo te vayas.\tCC-BY\n"
                   "This sentence has far too many words to be kept here.\tNo.\tCC-BY\n"
                   "I'm hungry!\t¡Tengo hambre!\tCC-BY\n", encoding="utf-8")
    from DLStudio.data import read_tsv_pairs
    corpus = curate_pairs(read_tsv_pairs(tsv), max_words=8, num_pairs=10, seed=0)
    assert sorted(corpus.pairs) == sorted([("SOS go EOS", "SOS ve EOS"),
                                           ("SOS i am hungry EOS", "SOS tengo hambre EOS"),
                                           ("SOS do not go EOS", "SOS no te vayas EOS")])
    assert "only 3 pairs" in caplog.text
    out = tmp_path / "out.tar.gz"
    res = subprocess.run([sys.executable, "-m", "DLStudio.data", "build-archive", str(tsv),
                          "-o", str(out), "--pairs", "2"], capture_output=True, text=True,
                         cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert len(load_archive(out).pairs) == 2
    res = subprocess.run([sys.executable, "-m", "DLStudio.data", "build-archive", str(tsv),
                          "-o", str(out), "--pairs", "3"], capture_output=True, text=True,
                         cwd=ROOT)                  # again: the first archive is kept
    assert res.returncode == 0 and "it moved to" in res.stdout, res.stderr
    assert len(load_archive(out).pairs) == 3
    assert len(load_archive(tmp_path / "previous" / "out.tar.gz").pairs) == 2


@pytest.mark.parametrize("verb, tense, person, form", [
    ("hablar", "present", "1p", "hablamos"), ("comer", "past", "3p", "comieron"),
    ("vivir", "future", "2s", "vivirás"), ("encontrar", "present", "3s", "encuentra"),
    ("encontrar", "present", "1p", "encontramos"), ("buscar", "past", "1s", "busqué"),
    ("dormir", "past", "3s", "durmió"), ("ir", "past", "1s", "fui"),
    ("tener", "future", "1s", "tendré"), ("hacer", "past", "3s", "hizo"),
    ("estar", "present", "2s", "estás"), ("oír", "present", "1s", "oigo"),
])
def test_conjugation(verb, tense, person, form):
    assert conjugate(verb, tense, person) == form


def test_agreement_in_noun_phrases():
    noun = {n.en: n for n in NOUNS}
    assert noun_phrase(noun["apple"], "the", True, ("red", "rojo")) == \
        (["the", "red", "apples"], ["las", "manzanas", "rojas"])
    assert noun_phrase(noun["apple"], "a", False, ("old", "viejo")) == \
        (["an", "old", "apple"], ["una", "manzana", "vieja"])
    assert noun_phrase(noun["car"], "this", True) == (["these", "cars"], ["estos", "coches"])
    assert noun_phrase(noun["house"], "our", False) == (["our", "house"], ["nuestra", "casa"])
    assert adjective_form("feliz", "f", True) == "felices"
    assert adjective_form("joven", "m", True) == "jóvenes"


def test_generated_sentences_follow_the_grammar():
    pairs = {en[4:-4]: es[4:-4] for en, es in generate_corpus(20000, seed=0).pairs}
    # spot checks on sentences the generator produced
    for en, es in pairs.items():
        words = en.split()
        if words[:3] == ["she", "will", "be"]:
            assert es.split()[:2] == ["ella", "estará"]
            assert es.split()[2].endswith(("a", "e", "l", "z")) or es.split()[2] == "solo"
        if "yesterday" in words:
            assert "ayer" in es.split() and "will" not in words
        if words[:1] == ["did"]:
            assert "no" not in es.split()[:1]
        assert len(words) <= 8 and len(es.split()) <= 8


def test_bundled_corpus_is_ours_and_regenerates_byte_for_byte():
    corpus = load_archive(BUNDLED_ARCHIVE, max_seq_length=10)
    assert len(corpus.pairs) == 20000
    assert len(corpus.vocab_en) >= 502 and len(corpus.vocab_es) >= 502
    with open(BUNDLED_ARCHIVE, "rb") as f:
        assert f.read() == archive_bytes(generate_corpus(20000, seed=0))


def test_cli_inspect_bundled():
    out = subprocess.run([sys.executable, "-m", "DLStudio.data", "inspect", BUNDLED_ARCHIVE],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "sentence pairs:    20000" in out.stdout


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(REAL_ARCHIVE), reason="real archive not present")
def test_cli_inspect_real_archive():
    out = subprocess.run([sys.executable, "-m", "DLStudio.data", "inspect", REAL_ARCHIVE],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "sentence pairs:    90000" in out.stdout and "English 11063" in out.stdout


def test_cli_bad_arguments_give_usage_not_traceback(tmp_path):
    out = subprocess.run([sys.executable, "-m", "DLStudio.data", "synth", "-o",
                          str(tmp_path / "x"), "--pairs", "zero"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "usage" in out.stderr and "Traceback" not in out.stderr
