"""The teaching code is the real Transformer: parity with PyTorch's layers, masking,
batched heads, FG/PreLN symmetry, every parameter trained, warm-up, decoding."""

import math

import pytest
import torch
import torch.nn as nn

from DLStudio import DLStudio, TransformerFG, TransformerPreLN
from DLStudio.data import generate_corpus
from DLStudio.evaluation import beam_search, greedy_decode
from DLStudio.model.architecture import EncoderDecoderParts, GPTParts
from DLStudio.model.tokens import causal_mask, padding_mask
from DLStudio.model.vision import VisionParts

from .close import assert_close

VARIANTS = [TransformerFG, TransformerPreLN]


def make(cls, M=32, H=4, layers=2, corpus=None, **kw):
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=1, seed=0, learning_rate=1e-3)
    corpus = corpus or generate_corpus(300, seed=3)
    x = cls(dl_studio=dls, corpus=corpus, embedding_size=M, num_warmup_steps=50, **kw)
    enc = cls.MasterEncoder(dls, x, num_basic_encoders=layers, num_atten_heads=H)
    dec = cls.MasterDecoderWithMasking(dls, x, num_basic_decoders=layers, num_atten_heads=H)
    return dls, x, enc, dec


def parts(cls, M=32, V=50):
    """The translation model's parts from sizes alone (no data, no DLStudio): cls's layout."""
    return EncoderDecoderParts(vocab_en_size=V, vocab_es_size=V, max_seq_length=12,
                               embedding_size=M, norm_first=cls.norm_first)


def randomize(module):
    """Give LayerNorms non-trivial weights so that parity tests test them too."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))


def copy_attention(ours, theirs):
    """Our sliced heads as one PyTorch MultiheadAttention: block-diagonal input projections,
    identity output projection."""
    heads = ours.heads
    with torch.no_grad():
        W = [torch.block_diag(*[getattr(h, n).weight for h in heads]) for n in ("WQ", "WK", "WV")]
        b = [torch.cat([getattr(h, n).bias for h in heads]) for n in ("WQ", "WK", "WV")]
        theirs.in_proj_weight.copy_(torch.cat(W))
        theirs.in_proj_bias.copy_(torch.cat(b))
        theirs.out_proj.weight.copy_(torch.eye(theirs.embed_dim))
        theirs.out_proj.bias.zero_()


def copy_common(ours, theirs, norms):
    with torch.no_grad():
        theirs.linear1.load_state_dict(ours.feed_forward.W1.state_dict())
        theirs.linear2.load_state_dict(ours.feed_forward.W2.state_dict())
        for mine, other in norms:
            other.load_state_dict(mine.state_dict())


@pytest.mark.parametrize("cls", VARIANTS)
def test_encoder_layer_matches_pytorch(cls):
    torch.manual_seed(0)
    x = parts(cls)
    ours = x.BasicEncoder(None, x, 4)
    randomize(ours)
    ref = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True,
                                     norm_first=cls.norm_first)
    copy_attention(ours.self_attention, ref.self_attn)
    copy_common(ours, ref, [(ours.norm1, ref.norm1), (ours.norm2, ref.norm2)])
    src = torch.tensor([[0, 5, 6, 7, 1, 1, 1], [0, 8, 9, 10, 11, 12, 1]])
    pad = padding_mask(src)
    h = torch.randn(2, 7, 32)
    ours.eval(), ref.eval()
    got = ours(h, pad[:, None, None, :])
    want = ref(h, src_key_padding_mask=pad)
    # PyTorch's fast path returns zeros at padded positions; compare the real ones
    assert_close(got[~pad], want[~pad])


@pytest.mark.parametrize("cls", VARIANTS)
def test_decoder_layer_matches_pytorch(cls):
    torch.manual_seed(1)
    x = parts(cls)
    ours = x.BasicDecoderWithMasking(None, x, 4)
    randomize(ours)
    ref = nn.TransformerDecoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True,
                                     norm_first=cls.norm_first)
    copy_attention(ours.self_attention, ref.self_attn)
    copy_attention(ours.cross_attention, ref.multihead_attn)
    copy_common(ours, ref, [(ours.norm1, ref.norm1), (ours.norm2, ref.norm2),
                            (ours.norm3, ref.norm3)])
    src = torch.tensor([[0, 5, 6, 1, 1], [0, 8, 9, 10, 1]])
    pad = padding_mask(src)
    y, memory = torch.randn(2, 6, 32), torch.randn(2, 5, 32)
    got = ours(y, memory, causal_mask(6), pad[:, None, None, :])
    want = ref(y, memory, tgt_mask=causal_mask(6), memory_key_padding_mask=pad)
    assert_close(got, want)


@pytest.mark.parametrize("cls", VARIANTS)
def test_batched_heads_equal_each_head_on_its_slice(cls):
    torch.manual_seed(2)
    x = parts(cls)
    for attention in (x.SelfAttention(None, x, 4), x.CrossAttention(None, x, 4)):
        q, kv = torch.randn(3, 5, 32), torch.randn(3, 7, 32)
        if isinstance(attention, x.CrossAttention):
            mask = padding_mask(torch.tensor([[0, 4, 1, 1, 1, 1, 1]] * 3))[:, None, None, :]
            batched = attention(q, kv, mask)
        else:
            kv, mask = q, causal_mask(5)
            batched = attention(q, mask)
        assert attention.batched
        assert_close(batched, attention.per_head(q, kv, mask))


@pytest.mark.parametrize("cls", VARIANTS)
def test_causal_mask_future_words_do_not_move_earlier_outputs(cls):
    torch.manual_seed(3)
    x = parts(cls)
    model = x.encoder_decoder(num_basic_encoders=2, num_basic_decoders=2).eval()
    src = torch.randint(2, 50, (2, 8))
    tgt = torch.randint(2, 50, (2, 9))
    t = 4
    changed = tgt.clone()
    changed[:, t + 1:] = torch.randint(2, 50, (2, 9 - t - 1))
    a, b = model(src, tgt), model(src, changed)
    assert_close(a[:, :t + 1], b[:, :t + 1])
    assert not torch.allclose(a[:, t + 1:], b[:, t + 1:])


@pytest.mark.parametrize("cls", VARIANTS)
def test_a_container_is_the_parts_built_from_its_sizes_plus_data(cls):
    corpus = generate_corpus(300, seed=3)
    dls, x, enc, dec = make(cls, corpus=corpus)           # DLStudio(seed=0) seeds torch
    from_data = x.model_of(enc, dec).eval()
    torch.manual_seed(0)
    sizes = EncoderDecoderParts(vocab_en_size=x.vocab_en_size, vocab_es_size=x.vocab_es_size,
                                max_seq_length=x.max_seq_length, embedding_size=32,
                                norm_first=cls.norm_first)
    from_sizes = sizes.encoder_decoder(num_basic_encoders=2, num_basic_decoders=2).eval()
    theirs = from_sizes.state_dict()
    assert {k: v.equal(theirs[k]) for k, v in from_data.state_dict().items()} == \
        {k: True for k in theirs}
    src, tgt = x.vocab.encode(["she is tired"], "en"), x.vocab.encode(["ella"], "es")
    assert torch.equal(from_data(src, tgt), from_sizes(src, tgt))


def test_a_gpt_and_a_vision_transformer_are_built_and_run_from_sizes_alone():
    torch.manual_seed(6)
    gpt = GPTParts(vocab_size=30, max_seq_length=12, embedding_size=32, num_basic_decoders=2,
                   num_atten_heads=4).eval()
    ids = torch.randint(2, 30, (2, 7))
    changed = ids.clone()
    changed[:, 5:] = torch.randint(2, 30, (2, 2))
    a, b = gpt(ids), gpt(changed)
    assert a.shape == (2, 7, 30)
    assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])                          # it is causal
    vit = VisionParts(num_classes=3, patch_size=(4, 4), image_size=(8, 12), in_channels=1,
                      embedding_size=16, num_basic_encoders=1, num_atten_heads=2)
    assert vit.max_seq_length == 1 + 2 * 3
    assert vit(torch.rand(5, 1, 8, 12)).shape == (5, 3)
    with pytest.raises(ValueError, match="does not divide"):
        VisionParts(num_classes=3, patch_size=(5, 5), image_size=(8, 8), embedding_size=16)


def test_without_masking_the_decoder_sees_the_future_and_warns():
    import DLStudio.Transformers as T
    T._masking_warned = False
    torch.manual_seed(4)
    with pytest.warns(UserWarning, match="can now see the word"):
        dls, x, enc, _ = make(TransformerFG)
        dec = x.MasterDecoderWithMasking(dls, x, 2, 4, masking=False)
    model = x.EncoderDecoder(x, enc, dec).eval()
    src, tgt = torch.randint(2, 50, (1, 6)), torch.randint(2, 50, (1, 6))
    changed = tgt.clone()
    changed[0, 5] = 7 if tgt[0, 5] != 7 else 8
    assert not torch.allclose(model(src, tgt)[:, 0], model(src, changed)[:, 0])


def test_padding_mask_keeps_first_eos_only():
    ids = torch.tensor([[0, 5, 1, 1, 1], [0, 5, 6, 7, 1]])
    assert padding_mask(ids).tolist() == [[False, False, False, True, True],
                                          [False, False, False, False, False]]


def test_fg_and_preln_have_the_same_parameters():
    _, _, enc_fg, dec_fg = make(TransformerFG)
    _, _, enc_pl, dec_pl = make(TransformerPreLN)
    for fg, pl in ((enc_fg, enc_pl), (dec_fg, dec_pl)):
        names_fg = {n: p.shape for n, p in fg.named_parameters()}
        names_pl = {n: p.shape for n, p in pl.named_parameters()}
        extra = {n for n in names_pl if n.startswith("final_norm")}
        assert {n: s for n, s in names_pl.items() if n not in extra} == names_fg
        assert extra == {"final_norm.weight", "final_norm.bias"}   # Xiong et al.'s final LN


@pytest.mark.parametrize("cls", VARIANTS)
def test_every_parameter_changes_after_one_step(cls):
    torch.manual_seed(5)
    dls, x, enc, dec = make(cls)
    trainer = x.trainer(enc, dec)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    assert any(n.startswith("embeddings_generator_en") for n in before)
    assert any(n.startswith("embeddings_generator_es") for n in before)
    for _ in range(2):   # FG's first step has a tiny rate; two steps leave no doubt
        src, tgt = next(iter(trainer.batches(0)))
        trainer.train_step(src, tgt)
    unchanged = [n for n, p in trainer.model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []


def test_warmup_schedule_values():
    opt = TransformerFG.ScheduledOptim(torch.optim.Adam([nn.Parameter(torch.zeros(1))]),
                                       lr_mul=2.0, d_model=256, n_warmup_steps=4000)
    assert opt.lr_at(1) == pytest.approx(2 * 256 ** -0.5 * 4000 ** -1.5)
    assert opt.lr_at(4000) == pytest.approx(2 * 256 ** -0.5 * 4000 ** -0.5)
    assert opt.lr_at(2000) == pytest.approx(opt.lr_at(4000) / 2)
    assert opt.lr_at(16000) == pytest.approx(opt.lr_at(4000) / 2)
    lrs = [opt.lr_at(s) for s in range(1, 8000, 100)]
    assert max(lrs) == pytest.approx(opt.lr_at(4001), rel=1e-3)
    for _ in range(3):
        opt.step()
    assert opt.param_groups[0]["lr"] == opt.lr_at(3)


def test_embeddings_are_scaled_words_plus_sinusoids():
    dls, x, _, _ = make(TransformerFG)
    emb = x.embeddings_generator_en
    ids = torch.tensor([[0, 5, 1]])
    pe = emb.sinusoids(10, 32, 10000.0)
    assert_close(pe[3, 0::2], torch.sin(3 / 10000.0 ** (torch.arange(0, 32, 2) / 32)))
    assert_close(emb(ids), emb.embedding(ids) * 32 ** 0.5 + pe[:3])


@pytest.mark.parametrize("cls", VARIANTS)
def test_beam_width_one_is_greedy(cls):
    torch.manual_seed(6)
    dls, x, enc, dec = make(cls)
    randomize(dec)
    model = x.EncoderDecoder(x, enc, dec).eval()
    src = x.sentence_with_words_to_ints([en for en, _ in x.held_out_corpus[:8]], "en")
    assert torch.equal(greedy_decode(model, src, 10), beam_search(model, src, 10, beam_width=1))


class TableModel:
    """A decoder whose next-word probabilities are a table of prefixes (ids after SOS):
    A = 2 (0.6) leads only to weak continuations, B = 3 (0.4) to a certain EOS."""

    TABLE = {(): {2: 0.6, 3: 0.4}, (2,): {1: 0.3, 4: 0.35, 5: 0.35}, (3,): {1: 1.0},
             (2, 4): {1: 1.0}, (2, 5): {1: 1.0}}

    def encode(self, src):
        return torch.zeros(src.size(0), 1, 1), torch.zeros(src.size(0), 1, 1, 1, dtype=bool)

    def decoding(self):
        import contextlib
        return contextlib.nullcontext([])

    def decode(self, ys, memory, cross_mask, keep):
        logits = torch.full((ys.size(0), 6), -1e9)
        for row, prefix in enumerate(ys[:, 1:].tolist()):
            for word, p in self.TABLE.get(tuple(w for w in prefix if w != 1), {1: 1.0}).items():
                logits[row, word] = math.log(p)
        return logits


def test_beam_search_finds_the_sentence_greedy_misses():
    src = torch.zeros(2, 3, dtype=torch.long)
    greedy = greedy_decode(TableModel(), src, 6)
    beam = beam_search(TableModel(), src, 6, beam_width=2)
    assert greedy[0].tolist()[:3] == [2, 4, 1]            # A (0.6), then 0.35, then EOS
    assert beam[0].tolist()[:2] == [3, 1]     # B (0.4), then EOS (1.0): 0.4 > 0.6 x 0.35


def test_overridden_nested_class_is_the_one_that_runs():
    calls = []

    class MyFG(TransformerFG):
        class AttentionHead(TransformerFG.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                calls.append(x.shape)
                return super().forward(x, mask, memory)

    torch.manual_seed(7)
    dls, x, enc, dec = make(MyFG)
    model = x.EncoderDecoder(x, enc, dec)
    src = torch.randint(2, 50, (2, 6))
    out = model(src, src)
    # 2 encoder layers + 2 decoder self-attentions + 2 cross-attentions, 4 heads each, each
    # on its (B, T, 8) slice: the override reaches cross-attention too (the contract)
    assert len(calls) == 24 and calls[0] == torch.Size([2, 6, 8])
    assert out.shape == (2, 6, x.vocab_es_size)
    assert not enc.basic_encoder_arr[0].self_attention.batched
    assert not dec.basic_decoder_arr[0].cross_attention.batched
    assert type(dec.basic_decoder_arr[0].cross_attention.heads[0]) is MyFG.AttentionHead


def test_unknown_words_and_long_sentences_get_messages():
    _, x, _, _ = make(TransformerFG)
    with pytest.raises(ValueError, match="'zzyzx'"):
        x.sentence_with_words_to_ints(["i zzyzx"], "en")
    with pytest.raises(ValueError, match="at most 8"):
        x.sentence_with_words_to_ints(["i " * 9], "en")


def test_sentence_with_words_to_ints_pads_with_eos():
    _, x, _, _ = make(TransformerFG)
    ids = x.sentence_with_words_to_ints(["SOS i EOS"], "en")
    assert ids.shape == (1, 10)
    assert ids[0].tolist() == [0, x.en_vocab_dict["i"]] + [1] * 8


@pytest.mark.parametrize("cls", VARIANTS)
def test_incremental_decoding_equals_rerunning_the_prefix(cls):
    torch.manual_seed(8)
    dls, x, enc, dec = make(cls)
    randomize(dec)
    model = x.EncoderDecoder(x, enc, dec).eval()
    with model.decoding() as caches:                  # our classes: every attention caches
        assert len(caches) == 2 * len(dec.basic_decoder_arr)
    src = x.sentence_with_words_to_ints([en for en, _ in x.held_out_corpus[:8]], "en")
    memory, cross_mask = model.encode(src)
    ys = torch.randint(2, x.vocab_es_size, (8, 6))
    ys[:, 0] = 0
    with model.decoding() as caches:
        assert len(caches) == 2 * 2                    # self and cross, in each of 2 layers
        steps = [model.decode_newest(ys[:, :t + 1], memory, cross_mask) for t in range(6)]
    for t, step in enumerate(steps):
        full = model.decode(ys[:, :t + 1], memory, cross_mask)[:, -1]
        assert_close(step, full)
    assert all(type(a.kv_cache).__name__ == "_NoCache"          # gone again after decoding
               for d in dec.basic_decoder_arr for a in (d.self_attention, d.cross_attention))
    cached = greedy_decode(model, src, 10)
    beam = beam_search(model, src, 10, beam_width=3)
    import DLStudio.model.kv_cache as kv_cache
    original = kv_cache.attached_to_decoder
    try:
        kv_cache.attached_to_decoder = lambda *args: kv_cache.attached([])     # no cache
        assert torch.equal(greedy_decode(model, src, 10), cached)
        assert torch.equal(beam_search(model, src, 10, beam_width=3), beam)
    finally:
        kv_cache.attached_to_decoder = original


# --- the other designs, as switches ------------------------------------------------------
def test_full_width_heads_with_output_projection_match_pytorch():
    torch.manual_seed(9)
    dls, x, _, _ = make(TransformerPreLN, full_width_heads=True)
    ours = x.BasicEncoder(dls, x, 4)
    randomize(ours)
    ref = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True,
                                     norm_first=True)
    heads = ours.self_attention.heads
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat(
            [torch.cat([getattr(h, n).weight for h in heads]) for n in ("WQ", "WK", "WV")]))
        ref.self_attn.in_proj_bias.copy_(torch.cat(
            [torch.cat([getattr(h, n).bias for h in heads]) for n in ("WQ", "WK", "WV")]))
        ref.self_attn.out_proj.load_state_dict(ours.self_attention.W_O.state_dict())
    copy_common(ours, ref, [(ours.norm1, ref.norm1), (ours.norm2, ref.norm2)])
    h = torch.randn(2, 7, 32)
    assert_close(ours(h, causal_mask(7)), ref(h, src_mask=causal_mask(7)))
    attn = ours.self_attention
    assert_close(attn(h), attn.W_O(attn.per_head(h, h, None)))


def test_tied_output_layer_shares_the_spanish_embeddings():
    dls, x, enc, dec = make(TransformerFG, tie_embeddings=True)
    model = x.EncoderDecoder(x, enc, dec)
    assert dec.out.weight is x.embeddings_generator_es.embedding.weight
    _, x2, enc2, dec2 = make(TransformerFG)
    untied = sum(p.numel() for p in x2.EncoderDecoder(x2, enc2, dec2).parameters())
    assert untied - sum(p.numel() for p in model.parameters()) == x.vocab_es_size * 32


def test_learned_positions_replace_the_sinusoids():
    _, x, _, _ = make(TransformerFG, learned_positions=True)
    emb = x.embeddings_generator_es
    ids = torch.tensor([[0, 5, 6]])
    assert_close(emb(ids), emb.embedding(ids) * 32 ** 0.5 + emb.learned_positions[:3])
    assert any(p is emb.learned_positions for p in emb.parameters())


def test_dropout_is_active_in_training_only():
    torch.manual_seed(10)
    _, x, enc, dec = make(TransformerFG, dropout=0.3)
    model = x.EncoderDecoder(x, enc, dec)
    src = torch.randint(2, 50, (2, 6))
    model.train()
    assert not torch.equal(model(src, src), model(src, src))
    model.eval()
    assert torch.equal(model(src, src), model(src, src))


def test_label_smoothing_is_the_smoothed_cross_entropy():
    torch.manual_seed(11)
    _, x, enc, dec = make(TransformerFG, label_smoothing=0.1)
    trainer = x.trainer(enc, dec)
    trainer.model.eval()
    src, tgt = next(iter(trainer.batches(0)))
    labels, keep = tgt[:, 1:], ~padding_mask(tgt[:, 1:])
    logp = torch.log_softmax(trainer.model(src, tgt[:, :-1], keep), dim=-1)
    nll = -logp.gather(1, labels[keep][:, None]).mean()
    expected = 0.9 * nll + 0.1 * (-logp.mean(dim=1)).mean()
    assert_close(trainer.loss_on_batch(src, tgt), expected)


@pytest.mark.parametrize("switch", ["full_width_heads", "tie_embeddings", "learned_positions"])
def test_every_parameter_is_trained_with_each_switch(switch):
    torch.manual_seed(12)
    dls, x, enc, dec = make(TransformerPreLN, **{switch: True})
    trainer = x.trainer(enc, dec)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    src, tgt = next(iter(trainer.batches(0)))
    trainer.train_step(src, tgt)
    assert [n for n, p in trainer.model.named_parameters() if torch.equal(p, before[n])] == []
