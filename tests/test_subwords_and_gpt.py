"""Subword tokens (BPE) for translation, and TransformerGPT: what a student relies on.

BPE: it round-trips the archive's text, reads sentences made of words no vocabulary holds,
stays inside its checkpoint, and its translations are scored as words. GPT: the causal mask
holds through the public API, generation with the key/value cache equals generation
without, perplexity falls as it trains, its weights start a translation decoder."""

import math
import os
import shutil
import tempfile

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu

from DLStudio import DLStudio, TransformerFG, TransformerGPT, TransformerPreLN
from DLStudio.checkpoints import CheckpointError, make_payload
from DLStudio.containers.pretrained import init_from_gpt
from DLStudio.data import BUNDLED_ARCHIVE, build_corpus, load_archive
from DLStudio.data.vocabulary import BPETokenizer, Vocabulary, WordTokenizer, with_room
from DLStudio.evaluation import evaluate_bleu, greedy_decode
from DLStudio.evaluation.generation import encode_sentences, generate, prompt_ids
from DLStudio.model.tokens import EOS_INDEX, SOS_INDEX

from .close import assert_close
from .homework_classes import WithAttentionHead

UNSEEN = "quixotic walruses juggle"    # no word of it is in the bundled corpus


@pytest.fixture(scope="module")
def corpus():
    return load_archive(BUNDLED_ARCHIVE)


@pytest.fixture(scope="module")
def spanish_bpe(corpus):
    return BPETokenizer.train([es for _, es in corpus.pairs], 2000)


def test_bpe_round_trips_every_sentence_of_the_archive(corpus, spanish_bpe):
    english = BPETokenizer.train([en for en, _ in corpus.pairs], 2000)
    for tokenizer, side in ((english, 0), (spanish_bpe, 1)):
        texts = [" ".join(pair[side].split()[1:-1]) for pair in corpus.pairs]
        assert [tokenizer.text(ids) for ids in tokenizer.ids(texts)] == texts
    assert spanish_bpe.pieces[:2] == ["SOS", "EOS"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyzáéíóúüñ¿¡0123456789", min_size=1,
                        max_size=12), min_size=1, max_size=8))
def test_bpe_round_trips_any_normalised_text(spanish_bpe, words):
    text = " ".join(words)                 # what the archive holds: words, single spaces
    assert spanish_bpe.text(spanish_bpe.ids([text])[0]) == text


@pytest.fixture(scope="module")
def bpe_model(tmp_path_factory):
    """An FG with BPE tokens, trained for 60 steps on a copy of the bundled corpus."""
    folder = tmp_path_factory.mktemp("bpe")
    archive = folder / "corpus.tar.gz"
    shutil.copy(BUNDLED_ARCHIVE, archive)
    dls = DLStudio(use_gpu=False, batch_size=64, epochs=1, seed=0,
                   path_saved_model=str(folder / "saved.pt"))
    x = TransformerFG(dl_studio=dls, data_archive=str(archive), embedding_size=32,
                      num_warmup_steps=50, tokenizer="bpe", vocab_size=1000)
    enc, dec = x.MasterEncoder(dls, x, 1, 2), x.MasterDecoderWithMasking(dls, x, 1, 2)
    trainer = x.run_code_for_training(dls, enc, dec, checkpoints_dir=str(folder / "ck"),
                                      max_steps=60)
    return folder, x, trainer


def test_bpe_translates_words_no_vocabulary_holds(bpe_model, corpus):
    folder, x, trainer = bpe_model
    assert all(w not in corpus.vocab_en for w in UNSEEN.split())
    assert x.tokenizer == "bpe" and x.max_seq_length > 10        # pieces, grown to fit
    xformer, model, _ = TransformerFG.from_checkpoint(trainer.last_checkpoint)
    src = xformer.vocab.encode([UNSEEN], "en")                  # read as pieces, none lost
    assert xformer.vocab.tokenizers["en"].text(src[0, 1:int((src[0] != 1).sum())]) == UNSEEN
    out = xformer.translate(model, [UNSEEN, "I'm hungry!"])
    by_hand = greedy_decode(model.eval(), xformer.vocab.encode([UNSEEN, "i am hungry"], "en"),
                            xformer.max_seq_length)
    assert out == [" ".join(xformer.vocab.words(ids)) for ids in by_hand]
    words = Vocabulary(corpus.vocab_en, corpus.vocab_es, 10)
    with pytest.raises(ValueError, match="quixotic"):
        words.prepare(UNSEEN)


def test_a_bpe_checkpoint_keeps_its_tokenizer_when_the_archive_is_gone(bpe_model):
    folder, x, trainer = bpe_model
    moved = folder / "elsewhere.pt"
    shutil.copy(trainer.last_checkpoint, moved)
    os.rename(folder / "corpus.tar.gz", folder / "gone.tar.gz")
    try:
        xformer, model, _ = TransformerFG.from_checkpoint(str(moved))
        assert xformer.held_out_corpus == []      # nothing to score on: the archive is gone
    finally:
        os.rename(folder / "gone.tar.gz", folder / "corpus.tar.gz")
    assert xformer.vocab.fingerprint == x.vocab.fingerprint   # it needed no archive
    ids = xformer.vocab.encode([UNSEEN], "en")
    assert torch.equal(ids, x.vocab.encode([UNSEEN], "en"))


def test_bpe_translations_are_scored_as_words_against_word_references(bpe_model):
    folder, x, trainer = bpe_model
    vocab = x.vocab
    pieces = vocab.encode(["SOS el gato quiere la manzana EOS"], "es")[0]
    assert len(pieces) > 0 and vocab.words(pieces[1:]) == "el gato quiere la manzana".split()
    result = evaluate_bleu(trainer.model, vocab, x.held_out_corpus[:50])
    by_hand = greedy_decode(trainer.model.eval(), vocab.encode(
        [en for en, _, _ in result["translations"]], "en"), vocab.max_seq_length)
    for (en, hypothesis, references), ids in zip(result["translations"], by_hand):
        assert hypothesis == vocab.tokenizers["es"].text(
            [int(i) for i in ids[:list(ids).index(1) if 1 in ids else None]]).split()
        assert references == [es.split()[1:-1] for e, es in x.held_out_corpus if e == en]
    assert result["bleu"] == pytest.approx(100 * corpus_bleu(
        [r for _, _, r in result["translations"]], [h for _, h, _ in result["translations"]],
        smoothing_function=SmoothingFunction().method1))


def test_a_training_split_vocabulary_counts_what_it_cannot_translate():
    pairs = [(f"i see {w}", f"veo {w}") for w in ("cats", "dogs", "birds", "cows", "fish",
                                                     "rats", "ants", "bees", "owls", "hens")]
    corpus = build_corpus(pairs * 4)
    dls = DLStudio(use_gpu=False, seed=0, batch_size=8)
    words = TransformerPreLN(dl_studio=dls, corpus=corpus, embedding_size=16,
                             held_out_fraction=0.3, vocab_from="training")
    bpe = TransformerPreLN(dl_studio=dls, corpus=corpus, embedding_size=16,
                           held_out_fraction=0.3, tokenizer="bpe", vocab_size=300)
    counts = {}
    for x in (words, bpe):
        model = x.model_from(x.MasterEncoder(dls, x, 1, 2),
                             x.MasterDecoderWithMasking(dls, x, 1, 2))
        result = evaluate_bleu(model, x.vocab, x.held_out_corpus)
        counts[x.tokenizer] = (result["translatable"], result["sentences"])
    assert counts["word"][0] == 0 < counts["word"][1]    # every held-out animal is unseen
    assert counts["bpe"][0] == counts["bpe"][1]


# ---------------------------------------------------------------------------------------
def make_gpt(cls=TransformerGPT, sentences=None, steps=0, **options):
    dls = DLStudio(use_gpu=False, seed=0, batch_size=64, epochs=50, learning_rate=1e-3,
                   path_saved_model=os.path.join(tempfile.mkdtemp(), "saved.pt"))
    sentences = sentences or [es for _, es in load_archive(BUNDLED_ARCHIVE).pairs[:3000]]
    settings = dict(dl_studio=dls, sentences=sentences, tokenizer="bpe", vocab_size=600,
                    embedding_size=32, num_basic_decoders=2, num_atten_heads=2,
                    archive_text=True, save_checkpoints=False)
    gpt = cls(**{**settings, **options})
    if steps:
        gpt.run_code_for_training(None, max_steps=steps)
    return gpt.eval()


def test_a_gpt_position_never_sees_a_later_token():
    gpt = make_gpt()
    ids = prompt_ids(gpt, "ellos no comen la manzana roja")
    changed = ids.clone()
    t = 4
    changed[0, t] = (changed[0, t] + 7) % gpt.vocab.size
    a, b = gpt(ids), gpt(changed)                                        # (1, T, V)
    assert_close(a[:, :t], b[:, :t])
    assert not torch.allclose(a[:, t:], b[:, t:])


@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (1.0, None), (0.8, 5)])
def test_generation_with_the_cache_equals_generation_without(temperature, top_k):
    gpt = make_gpt(steps=30)
    ids = prompt_ids(gpt, "el").repeat(6, 1)
    outs = [generate(gpt, ids, temperature=temperature, top_k=top_k, use_cache=cache,
                     generator=torch.Generator().manual_seed(1)) for cache in (True, False)]
    assert torch.equal(*outs)
    assert outs[0].size(1) > ids.size(1)


def test_a_students_head_in_a_gpt_runs_and_generates_without_the_cache():
    class MyGPT(TransformerGPT):
        AttentionHead = WithAttentionHead.AttentionHead
    gpt = make_gpt(MyGPT, steps=10)
    heads = gpt.master_decoder.basic_decoder_arr[0].self_attention.heads
    assert isinstance(heads[0], WithAttentionHead.AttentionHead)
    with gpt.decoding() as caches:
        assert caches == []
    ids = prompt_ids(gpt, "ellos")
    assert generate(gpt, ids).size(1) > 1


def test_perplexity_falls_as_the_gpt_trains_on_the_bundled_corpus():
    gpt = make_gpt()
    before = gpt.perplexity()
    gpt.run_code_for_training(None, max_steps=150)
    after = gpt.perplexity()
    assert after["per_piece"] < before["per_piece"] / 5
    fitted = [s for s in gpt.held_out_sentences
              if len(gpt.vocab.ids([s])[0]) + 2 <= gpt.max_seq_length]
    assert after["sentences"] == len(fitted)           # the same log-likelihood, two units:
    assert after["pieces"] == sum(len(ids) + 1 for ids in gpt.vocab.ids(fitted))   # + EOS
    assert after["words"] == sum(len(s.split()) + 1 for s in fitted)
    assert math.log(after["per_word"]) * after["words"] == pytest.approx(
        math.log(after["per_piece"]) * after["pieces"])


def test_word_level_perplexity_is_the_same_per_piece_and_per_word():
    sentences = [es for _, es in load_archive(BUNDLED_ARCHIVE).pairs[:500]]
    gpt = make_gpt(sentences=sentences, tokenizer="word")
    result = gpt.perplexity()
    assert result["per_piece"] == pytest.approx(result["per_word"])


def test_stray_bytes_of_an_early_model_stay_on_one_line(spanish_bpe):
    newline = spanish_bpe.ids(["a\nb"])[0][1]
    first_byte_of_n_tilde = spanish_bpe.hf.token_to_id("Ã")            # 0xC3 alone
    text = spanish_bpe.text([*spanish_bpe.ids(["el"])[0], newline, first_byte_of_n_tilde])
    assert text.startswith("el") and "\n" not in text and "\ufffd" in text


def test_generation_stops_at_max_seq_length_on_an_untrained_model():
    gpt = make_gpt()
    with torch.no_grad():
        gpt.master_decoder.out.bias[1] = -1e4            # EOS never wins: as long as it can be
    out = gpt.generate("el", temperature=0.0)
    assert len(out) == 1
    ids = generate(gpt, prompt_ids(gpt, "el"))
    assert ids.size(1) == gpt.max_seq_length
    with pytest.raises(ValueError, match="shorter"):
        gpt.generate(" ".join(["el"] * gpt.max_seq_length))


@pytest.mark.slow
def test_a_gpt_starts_a_translation_decoder_and_the_rest_stays():
    dls = DLStudio(use_gpu=False, seed=0)
    x = TransformerPreLN(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=32,
                         tokenizer="bpe", vocab_size=600)
    dec = x.MasterDecoderWithMasking(dls, x, 2, 2)
    gpt = make_gpt(vocab=x.vocab.tokenizers["es"], steps=5)
    cross = [p.clone() for p in dec.basic_decoder_arr[0].cross_attention.parameters()]
    copied = init_from_gpt(x, dec, make_payload(gpt, {}), "decoder")
    assert copied > 0
    gpt_layer, layer = gpt.master_decoder.basic_decoder_arr[1], dec.basic_decoder_arr[1]
    for ours, theirs in ((layer.self_attention, gpt_layer.self_attention),
                         (layer.feed_forward, gpt_layer.feed_forward),
                         (layer.norm3, gpt_layer.norm2)):
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a, b)
    assert torch.equal(x.embeddings_generator_es.embedding.weight,
                       gpt.embeddings_generator.embedding.weight)
    assert all(torch.equal(a, b) for a, b in
               zip(cross, dec.basic_decoder_arr[0].cross_attention.parameters()))
    other = make_gpt(steps=0)                           # its own tokenizer: refused
    with pytest.raises(CheckpointError, match="tokenizer"):
        init_from_gpt(x, dec, make_payload(other, {}), "decoder")


def test_a_gpt_run_resumed_ends_where_an_uninterrupted_one_does(tmp_path):
    sentences = [es for _, es in load_archive(BUNDLED_ARCHIVE).pairs[:400]]

    def run(folder, **options):
        dls = DLStudio(use_gpu=False, seed=0, batch_size=64, epochs=2, learning_rate=1e-3)
        gpt = TransformerGPT(dl_studio=dls, sentences=sentences, tokenizer="word",
                             embedding_size=16, num_basic_decoders=1, num_atten_heads=2,
                             dropout=0.1, checkpoint_freq=1)
        gpt.run_code_for_training(str(folder), **options)
        return gpt

    whole = run(tmp_path / "whole")
    run(tmp_path / "cut", max_steps=4)
    resumed = run(tmp_path / "cut", resume=True)
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def test_a_word_level_gpt_names_the_words_a_prompt_holds_that_it_never_saw():
    gpt = make_gpt(sentences=[es for _, es in load_archive(BUNDLED_ARCHIVE).pairs[:300]],
                   tokenizer="word")
    with pytest.raises(ValueError, match="xyzzy"):
        gpt.generate("el xyzzy")
    assert WordTokenizer.train(["SOS b a EOS", "a c"]).pieces == ["SOS", "EOS", "a", "b", "c"]


def test_no_held_out_sentence_of_a_gpt_is_a_training_sentence():
    """Split by distinct sentence, as the translation pairs are: every copy of a held-out
    sentence is held out (the real archive repeats its Spanish sentences)."""
    sentences = [es for _, es in load_archive(BUNDLED_ARCHIVE).pairs[:2000]]
    sentences = sentences + sentences[::3]                          # many repeated
    gpt = make_gpt(sentences=sentences, tokenizer="word", held_out_fraction=0.2)
    held, trained = set(gpt.held_out_sentences), set(gpt.training_sentences)
    assert held and trained and not held & trained
    assert len(gpt.held_out_sentences) + len(gpt.training_sentences) == len(sentences)
    distinct = {" ".join(s.split()[1:-1]) for s in sentences}
    assert abs(len(held) - 0.2 * len(distinct)) <= 1


def test_a_gpt_fits_its_sequence_length_to_its_training_sentences_only():
    sentences = [f"la casa {w} es roja" for w in ("grande", "vieja", "nueva", "bonita")] * 3
    long_one = "el perro de mi vecino come manzanas rojas y verdes todos los dias"
    for seed in range(50):                          # a seed that holds the long one out
        gpt = make_gpt(sentences=sentences + [long_one], split_seed=seed, vocab_size=300,
                       held_out_fraction=0.2)
        if long_one in gpt.held_out_sentences:
            break
    assert long_one in gpt.held_out_sentences
    longest = max(len(ids) for ids in gpt.vocab.ids(gpt.training_sentences)) + 2
    assert gpt.max_seq_length == with_room(longest, "bpe")
    scored = gpt.perplexity(gpt.held_out_sentences + sentences[:1])
    assert (scored["sentences"], scored["skipped"]) == (1, 1)     # the long one cannot be


MARKER_LIKE = "EOSINA vio SOS y eos en la sos de EOS"


def test_text_keeps_words_that_look_like_markers_and_none_encodes_a_special_id():
    text = [MARKER_LIKE, "la sosa y el eosina", "SOS es una señal"] * 4
    bpe = BPETokenizer.train(text + ["el gato come"] * 4, 400)
    for sentence in text[:3]:
        ids = bpe.ids([sentence])[0]
        assert SOS_INDEX not in ids and EOS_INDEX not in ids, sentence
        assert bpe.text(ids) == sentence
    gpt = make_gpt(sentences=text + ["el gato come", "la casa es roja"] * 4)
    assert MARKER_LIKE in gpt.training_sentences + gpt.held_out_sentences
    assert "SOS es una señal" in gpt.training_sentences + gpt.held_out_sentences
    ids, _ = encode_sentences(gpt.vocab, [MARKER_LIKE], gpt.max_seq_length)
    inside = ids[0, 1:int((ids[0] != EOS_INDEX).sum())]
    assert SOS_INDEX not in inside and EOS_INDEX not in inside


def test_a_word_tokenizer_reads_marker_like_words_and_refuses_the_markers_by_name():
    words = WordTokenizer.train(["EOSINA vio la sos", "eos y sosa"])
    ids = words.ids(["EOSINA vio la sos eos"])[0]
    assert SOS_INDEX not in ids and EOS_INDEX not in ids
    assert words.text(ids) == "EOSINA vio la sos eos"
    assert words.unknown(["la", "SOS", "EOS"]) == ["SOS", "EOS"]
    vocab = Vocabulary(words, words, 10)
    with pytest.raises(ValueError, match="'EOS'"):
        vocab.encode(["la EOS vio"], "en")
    assert vocab.prepare("La sos vio") == ["la", "sos", "vio"]


def test_bpe_pieces_read_back_as_the_words_and_the_explorer_draws_every_piece(bpe_model):
    """A piece that continues a word is shown with ## (as BERT writes them); the attention
    pictures have one row and column per piece, not per word."""
    from DLStudio.evaluation.explorer_page import translation_view
    _, x, trainer = bpe_model
    english = x.vocab.tokenizers["en"]
    ids = x.vocab.token_ids([UNSEEN], "en")[0]
    shown = english.readable(ids)
    assert shown[0] == "SOS" and shown[-1] == "EOS" and len(shown) == len(ids)
    assert len(shown) > len(UNSEEN.split()) + 2                 # some words are several pieces
    assert " ".join(shown[1:-1]).replace(" ##", "") == UNSEEN
    view = translation_view(trainer.model.eval(), x.vocab, UNSEEN)
    assert view["tokens"]["source"] == shown
    for layer in view["maps"]["encoder"]["layers"]:
        assert [len(head) for head in layer] == [len(ids)] * len(layer)
        assert all(len(row) == len(ids) for head in layer for row in head)


def test_a_held_out_perplexity_that_cannot_be_computed_is_recorded_missing(tmp_path, caplog):
    """Every held-out sentence holds a word the word-level tokenizer never saw: the run
    still writes its checkpoints, each recording the score as missing, with one warning."""
    from DLStudio.checkpoints import checkpoint_files, load_checkpoint
    sentences = [es for _, es in load_archive(BUNDLED_ARCHIVE).pairs[:300]]
    dls = DLStudio(use_gpu=False, seed=0, batch_size=64, epochs=2, learning_rate=1e-3)
    gpt = TransformerGPT(dl_studio=dls, sentences=sentences, tokenizer="word",
                         embedding_size=16, num_basic_decoders=1, num_atten_heads=2,
                         checkpoint_freq=1)
    gpt.data.held_out_sentences = [s.replace(s.split()[0], "xyzzy", 1)
                                   for s in gpt.held_out_sentences]
    with caplog.at_level("WARNING"):
        gpt.run_code_for_training(str(tmp_path / "ck"), track_perplexity=True)
    files = checkpoint_files(tmp_path / "ck")
    assert len(files) == 2
    for path in files:
        rows = load_checkpoint(path)["held_out_perplexity"]
        assert rows and rows[-1][2] is None
    said = [r.getMessage() for r in caplog.records if "perplexity" in r.getMessage()]
    assert len(said) == 1 and "unknown word" in said[0]
