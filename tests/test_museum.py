"""Each exhibit of the bug museum shows its signature effect, and the correct model does not:
the exhibits stay honest (structural checks of what each bug does, not 'costs X BLEU')."""

import math

import pytest
import torch

from DLStudio import DLStudio
from DLStudio import museum as m
from DLStudio.data import generate_corpus
from DLStudio.data.images import SHAPE_CLASSES

from .close import assert_close


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(300, seed=5)


def build(cls, corpus, seed=0, warmup=20):
    torch.manual_seed(seed)
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=seed)
    x = cls(dl_studio=dls, corpus=corpus, embedding_size=32, num_warmup_steps=warmup)
    enc = x.MasterEncoder(dls, x, 1, 2)
    dec = x.MasterDecoderWithMasking(dls, x, 1, 2)
    return x, x.EncoderDecoder(x, enc, dec).eval()


def test_every_exhibit_is_a_subclass_of_the_correct_model():
    for name, (cls, what, _) in m.EXHIBITS.items():
        assert issubclass(cls, (m.Correct, m.CorrectViT)) and cls not in (m.Correct,
                                                                          m.CorrectViT), name
        assert what


@pytest.mark.parametrize("cls, moves", [(m.Correct, True), (m.UntrainedEmbeddings, False)])
def test_untrained_embeddings_never_change(corpus, cls, moves):
    x, model = build(cls, corpus)
    before = model.embeddings_generator_en.embedding.weight.clone()
    trainer = x.trainer(model.encoder, model.decoder, max_steps=3)
    trainer.run()
    after = trainer.model.embeddings_generator_en.embedding.weight
    assert (not torch.equal(before, after)) == moves


def test_without_the_causal_mask_a_later_word_changes_earlier_outputs(corpus):
    for cls, leaks in ((m.Correct, False), (m.NoCausalMask, True)):
        x, model = build(cls, corpus)
        src = x.vocab.encode(["SOS i eat EOS"], "en")
        tgt = x.vocab.encode([corpus.pairs[0][1]], "es")[:, :6]
        changed = tgt.clone()
        changed[0, 4] = (changed[0, 4] + 7) % x.vocab_es_size            # a later word
        with torch.no_grad():
            a, b = model(src, tgt)[0, :4], model(src, changed)[0, :4]    # positions 0..3
        assert (not torch.allclose(a, b, atol=1e-6)) == leaks, cls.__name__


def test_without_the_padding_mask_the_padding_changes_the_encoding(corpus):
    for cls, leaks in ((m.Correct, False), (m.NoPaddingMask, True)):
        x, model = build(cls, corpus)
        src = x.vocab.encode([corpus.pairs[1][0]], "en")                 # (1, T) EOS-padded
        n = int((src[0] != src[0, -1]).sum()) + 1                        # up to the first EOS
        with torch.no_grad():
            short = model.encode(src[:, :n + 1])[0][0, :n]
            long_ = model.encode(src)[0][0, :n]                          # more padding
        assert (not torch.allclose(short, long_, atol=1e-5)) == leaks, cls.__name__


def test_without_scaling_the_scores_are_sqrt_s_qkv_times_larger(corpus):
    x, model = build(m.NoScaling, corpus)
    _, correct = build(m.Correct, corpus)
    correct.load_state_dict(model.state_dict())                # the same weights
    src = x.vocab.encode([corpus.pairs[2][0]], "en")
    for net in (model, correct):
        for a in net.encoder.basic_encoder_arr[0].self_attention.modules():
            a.record_attention = True
    with torch.no_grad():
        model.encode(src), correct.encode(src)
    bug = model.encoder.basic_encoder_arr[0].self_attention.attention_weights
    ok = correct.encoder.basic_encoder_arr[0].self_attention.attention_weights
    s = model.encoder.basic_encoder_arr[0].self_attention.qkv_size
    # softmax(sqrt(s) z) against softmax(z): over the real keys (padding is masked in both),
    # the centred log-weights are sqrt(s) times as large: the softmax is that much sharper.
    n = int((ok[0, 0, 0] > 0).sum())
    def centred(w):
        logs = w[..., :n].log()
        return logs - logs.mean(dim=-1, keepdim=True)
    assert_close(centred(bug), math.sqrt(s) * centred(ok))
    assert bug.max() > ok.max()

def test_no_warmup_starts_at_the_peak_rate(corpus):
    x, model = build(m.NoWarmup, corpus, warmup=400)
    ok, _ = build(m.Correct, corpus, warmup=400)
    bug = x.make_optimizer(model.parameters())
    right = ok.make_optimizer(model.parameters())
    assert bug.lr_at(1) == pytest.approx(right.lr_at(400))     # the peak, from step one
    assert right.lr_at(1) < right.lr_at(400) / 100


def test_evaluation_on_training_sentences_scores_sentences_it_trained_on(corpus):
    x, _ = build(m.TrainingSentences, corpus)
    ok, _ = build(m.Correct, corpus)
    trained = {en for en, _ in x.training_corpus}
    assert all(en in trained for en, _ in x.held_out_corpus)           # the bug
    assert not any(en in trained for en, _ in ok.held_out_corpus)      # the split
    assert x.honest_held_out == ok.held_out_corpus


def test_teacher_forcing_reads_the_answer(corpus):
    """The 'translation' of teacher-forced decoding follows the reference it is handed: give
    it another sentence's reference and its output changes; hand it the model's own greedy
    translation and it gives that translation back (a real decoder feeds its own words)."""
    x, model = build(m.TeacherForcing, corpus)
    pairs = corpus.pairs[:20]
    swapped = [(en, pairs[(i + 1) % len(pairs)][1]) for i, (en, _) in enumerate(pairs)]
    from DLStudio.evaluation import evaluate_bleu
    forced = m.teacher_forced_translations(model, x.vocab, pairs)[0]
    forced_swapped = m.teacher_forced_translations(model, x.vocab, swapped)[0]
    assert sum(forced[en] != forced_swapped[en] for en, _ in pairs) >= len(pairs) // 2
    k = x.max_seq_length - 2                   # the words a reference can hold
    greedy = [(en, h[:k]) for en, h, _ in evaluate_bleu(model, x.vocab, pairs)["translations"]]
    own = [(en, " ".join(["SOS", *h, "EOS"])) for en, h in greedy]
    forced_own = m.teacher_forced_translations(model, x.vocab, own)[0]
    assert [forced_own[en][:len(h)] for en, h in greedy] == [h for _, h in greedy]
    assert sum(len(h) for _, h in greedy) > 2 * len(greedy)

def test_a_teacher_forced_model_that_copies_scores_full_marks(corpus):
    """The measure rewards a model for predicting the reference's next word from the
    reference: a model that has memorised the pairs scores 100 on them."""
    x, model = build(m.Correct, corpus)
    pairs = corpus.pairs[:8]

    class Oracle(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))

        def forward(self, src, tgt_in):
            nxt = torch.roll(tgt_in, -1, dims=1)
            nxt[:, -1] = x.vocab.es_vocab_dict["EOS"]
            return torch.nn.functional.one_hot(nxt, x.vocab_es_size).float()

    tf = m.teacher_forced_bleu(Oracle(), x.vocab, [(en, es) for en, es in pairs])
    assert tf > 99


def test_a_frozen_class_token_never_changes():
    for cls, moves in ((m.CorrectViT, True), (m.FrozenClassToken, False)):
        torch.manual_seed(0)
        dls = DLStudio(use_gpu=False, batch_size=16, epochs=1, seed=0, learning_rate=1e-3)
        vit = cls(dl_studio=dls, patch_size=(8, 8), embedding_size=16, num_basic_encoders=1,
                  num_atten_heads=2, classes=SHAPE_CLASSES)
        vit.load_shapes_dataset(64, 16)
        before = vit.patch_embedding_generator.class_token.clone()
        vit.trainer(None, max_steps=3).run()
        after = vit.patch_embedding_generator.class_token
        assert (not torch.equal(before, after)) == moves, cls.__name__


def test_a_museum_run_compares_the_same_budget(tmp_path, capsys):
    row = m.run_exhibit("no_causal_mask", steps=4, archive=str(_archive(tmp_path)),
                        sizes={"embedding_size": 16, "num_layers": 1, "batch_size": 16})
    assert row["steps"] == 4 and len(row["losses"][0]) == len(row["losses"][1]) == 4
    assert "| no_causal_mask |" in m.format_rows([row])
    with pytest.raises(ValueError, match="no exhibit"):
        m.run_exhibit("no_such_bug")


def _archive(tmp_path):
    from DLStudio.data import save_archive
    path = tmp_path / "tiny.tar.gz"
    save_archive(generate_corpus(300, seed=5), path)
    return path



def test_a_decoder_without_its_causal_mask_is_decoded_by_re_reading_the_prefix(corpus):
    """Word-by-word decoding with cached keys and values assumes the causal mask; without it
    every earlier position sees the newest word, so each step must read the whole prefix."""
    from DLStudio.evaluation import greedy_decode
    from DLStudio.model.tokens import SOS_INDEX
    torch.manual_seed(0)
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0)
    x = m.NoCausalMask(dl_studio=dls, corpus=corpus, embedding_size=32, num_warmup_steps=20)
    model = x.EncoderDecoder(x, x.MasterEncoder(dls, x, 2, 2),
                             x.MasterDecoderWithMasking(dls, x, 2, 2)).eval()
    src = x.vocab.encode([en for en, _ in corpus.pairs[:6]], "en")
    with torch.no_grad():                     # greedy by hand: the whole prefix every step
        ys = torch.full((len(src), 1), SOS_INDEX)
        for _ in range(x.max_seq_length - 1):
            ys = torch.cat([ys, model(src, ys)[:, -1].argmax(-1, keepdim=True)], dim=1)
    decoded = greedy_decode(model, src, x.max_seq_length, stop_at_eos=False)
    assert torch.equal(decoded, ys[:, 1:])
    with model.decoding() as caches:          # beam search takes the same path
        assert caches == []
