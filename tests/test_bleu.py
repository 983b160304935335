"""BLEU on hand-made sentences, pinned to values worked out by hand from the definition
(Papineni et al. 2002): clipped n-gram precisions p_1..p_4, their geometric mean, and the
brevity penalty exp(1 - r / c) when the hypothesis is shorter than the closest reference.
NLTK's method1 puts 0.1 in place of a zero count; sacreBLEU's exp smoothing puts 1 / (2 t)
for the first order with no match (t: that order's n-grams in the hypothesis)."""

import math

import pytest

from DLStudio.evaluation import bleu_scores, held_out_references


def w(text):
    return text.split()


def test_one_reference_by_hand():
    # a b c d vs a b c e: p1 = 3/4, p2 = 2/3, p3 = 1/2, p4 = 0/1; same length, no penalty
    result = bleu_scores([w("a b c d")], [[w("a b c e")]])
    assert result["bleu"] == pytest.approx(100 * (3 / 4 * 2 / 3 * 1 / 2 * 0.1) ** 0.25)
    assert result["sacrebleu"] == pytest.approx(100 * (3 / 4 * 2 / 3 * 1 / 2 * 1 / 2) ** 0.25)


def test_several_references_clip_against_the_best_one_for_each_ngram():
    # a b c d vs {a b c e, b c d f}: every unigram, bigram and trigram is in some reference
    result = bleu_scores([w("a b c d")], [[w("a b c e"), w("b c d f")]])
    assert result["bleu"] == pytest.approx(100 * 0.1 ** 0.25)
    assert result["sacrebleu"] == pytest.approx(100 * 0.5 ** 0.25)
    single = bleu_scores([w("a b c d")], [[w("a b c e")]])
    assert result["bleu"] > single["bleu"]


def test_the_brevity_penalty():
    result = bleu_scores([w("a b c d")], [[w("a b c d e f")]])
    assert result["bleu"] == pytest.approx(100 * math.exp(1 - 6 / 4))
    assert result["sacrebleu"] == pytest.approx(100 * math.exp(1 - 6 / 4))


def test_a_perfect_corpus_and_a_variable_number_of_references():
    hyps = [w("el gato come pan"), w("yo corro hoy mucho")]
    refs = [[w("el gato come pan"), w("un gato come pan")], [w("yo corro hoy mucho")]]
    result = bleu_scores(hyps, refs)
    assert result["bleu"] == pytest.approx(100) and result["sacrebleu"] == pytest.approx(100)
    assert "nrefs:var" in result["signature"]
    assert "nrefs:1" in bleu_scores(hyps[1:], refs[1:])["signature"]


def test_the_held_out_references_are_every_translation_of_an_english_sentence():
    pairs = [("SOS i eat EOS", "SOS yo como EOS"), ("SOS you run EOS", "SOS tú corres EOS"),
             ("SOS i eat EOS", "SOS como yo EOS")]
    refs = held_out_references(pairs)
    assert list(refs) == ["SOS i eat EOS", "SOS you run EOS"]
    assert refs["SOS i eat EOS"] == [["yo", "como"], ["como", "yo"]]
