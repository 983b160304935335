"""The changes since 2017 as switches of the same classes (model/since_2017.py): RMSNorm,
rotary positions, SwiGLU and grouped-query attention against their definitions (and torch's
RMSNorm), models built with them, trained, saved and rebuilt, decoding with the cache equal to
decoding without, a student's subclass used everywhere, and the 2017 model unchanged when
they are off."""

import contextlib
import math
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from DLStudio import DLStudio, TransformerBERT, TransformerFG, TransformerGPT, TransformerPreLN
from DLStudio.checkpoints import checkpoint_path
from DLStudio.data import generate_corpus
from DLStudio.evaluation.decode_and_score import beam_search, greedy_decode
from DLStudio.evaluation.explorer_page import translation_view
from DLStudio.evaluation.generation import generate
from DLStudio.model.architecture import scaled_dot_product
from DLStudio.model.overrides import OverrideError
from DLStudio.model.since_2017 import RMSNorm, RotaryEmbedding, SwiGLU
from DLStudio.model.tokens import EOS_INDEX, SOS_INDEX

from .close import assert_close


def test_rmsnorm_is_torchs_given_the_same_weight():
    if not hasattr(nn, "RMSNorm"):
        pytest.skip("torch.nn.RMSNorm came with torch 2.4; this torch is older")
    x = torch.randn(3, 5, 16, dtype=torch.float64) * 3 + 1
    ours, theirs = RMSNorm(16, eps=1e-5).double(), nn.RMSNorm(16, eps=1e-5).double()
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    assert_close(ours(x), theirs(x), dtype=torch.float32)     # ours averages in float32
    assert not torch.allclose(ours(x + 1), ours(x))           # no centring: a shift shows


def test_swiglu_is_its_equation_with_the_relu_blocks_weights_within_1_percent():
    class Sizes:
        embedding_size, feed_forward_size, feed_forward = 256, None, "relu"
    block, relu = SwiGLU(None, Sizes), TransformerFG.FeedForward(None, Sizes)
    count = [sum(p.numel() for p in m.parameters()) for m in (block, relu)]
    assert block.W1.out_features == round(2 * 512 / 3)
    assert abs(count[0] - count[1]) / count[1] < 0.01
    x = torch.randn(2, 3, 256)
    want = block.W2(F.silu(block.W1(x)) * block.V(x))
    assert torch.equal(block(x), want)


def model(cls=TransformerPreLN, heads=2, **switches):
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=3, seed=0, learning_rate=2e-3)
    x = cls(dl_studio=dls, corpus=generate_corpus(200, seed=4), embedding_size=16,
            num_warmup_steps=10, **switches)
    return x, x.MasterEncoder(dls, x, 1, heads), x.MasterDecoderWithMasking(dls, x, 1, heads)


def test_the_switches_build_train_save_and_rebuild(tmp_path):
    x, enc, dec = model(norm="rmsnorm", feed_forward="swiglu")
    layer = enc.basic_encoder_arr[0]
    assert isinstance(layer.norm1, RMSNorm) and isinstance(enc.final_norm, RMSNorm)
    assert isinstance(layer.feed_forward, SwiGLU)
    assert isinstance(dec.basic_decoder_arr[0].feed_forward, SwiGLU)
    trainer = x.run_code_for_training(x.dl_studio, enc, dec, str(tmp_path / "ck"))
    assert sum(trainer.train_losses[-3:]) < sum(trainer.train_losses[:3])
    again, model_again, _ = TransformerPreLN.from_checkpoint(
        checkpoint_path(str(tmp_path / "ck"), 2))
    assert (again.norm, again.feed_forward) == ("rmsnorm", "swiglu")
    src = x.vocab.encode(["she is tired"], "en")
    tgt = x.vocab.encode(["ella"], "es")
    mine = x.model_from(enc, dec)
    assert torch.equal(mine(src, tgt), model_again(src, tgt))


def test_resume_refuses_another_norm(tmp_path):
    x, enc, dec = model()
    x.run_code_for_training(x.dl_studio, enc, dec, str(tmp_path / "ck"), max_steps=2)
    x, enc, dec = model(norm="rmsnorm")
    with pytest.raises(ValueError, match="norm"):
        x.run_code_for_training(x.dl_studio, enc, dec, str(tmp_path / "ck"), resume=True)


def test_a_students_rmsnorm_and_swiglu_are_used_everywhere():
    class MyFG(TransformerFG):
        class RMSNorm(TransformerFG.RMSNorm):
            pass

        class SwiGLU(TransformerFG.SwiGLU):
            pass

    x, enc, dec = model(MyFG, norm="rmsnorm", feed_forward="swiglu")
    norms = [m for m in list(enc.modules()) + list(dec.modules()) if isinstance(m, RMSNorm)]
    blocks = [m for m in list(enc.modules()) + list(dec.modules()) if isinstance(m, SwiGLU)]
    assert norms and all(type(m) is MyFG.RMSNorm for m in norms)
    assert blocks and all(type(m) is MyFG.SwiGLU for m in blocks)


def test_a_gpt_takes_them_too_and_an_unknown_one_is_refused():
    dls = DLStudio(use_gpu=False, seed=0)
    gpt = TransformerGPT(dl_studio=dls, sentences=["la casa es roja", "el perro come"] * 5,
                         tokenizer="word", embedding_size=16, num_basic_decoders=1,
                         num_atten_heads=2, norm="rmsnorm", feed_forward="swiglu")
    assert isinstance(gpt.master_decoder.final_norm, RMSNorm)
    with pytest.raises(ValueError, match="feed_forward must be one of relu, gelu, gelu_tanh, "
                                         "silu, swiglu, geglu"):
        model(feed_forward="reglu")


# ---------------------------------------------------------------------------------------
# Rotary positions and grouped-query attention.
def test_rotary_turns_each_pair_by_its_angle_and_keeps_the_length():
    rope, x = RotaryEmbedding(8, base=100.0), torch.randn(2, 5, 8, dtype=torch.float64)
    out = rope.double()(x, offset=3)
    for m in range(5):
        for i in range(4):
            a = (m + 3) * 100.0 ** (-2 * i / 8)
            turn = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]],
                                dtype=torch.float64)
            assert_close(out[:, m, 2 * i:2 * i + 2], x[:, m, 2 * i:2 * i + 2] @ turn.T,
                         dtype=torch.float32)            # its angles: a float32 table
    assert_close(out.norm(dim=-1), x.norm(dim=-1), dtype=torch.float32)   # the same length
    with pytest.raises(ValueError, match="must be even"):
        RotaryEmbedding(7)


def test_rotary_scores_depend_only_on_the_offset_between_positions():
    rope, q, k = RotaryEmbedding(16), torch.randn(6, 16), torch.randn(6, 16)

    def scores(shift):
        return rope(q, offset=shift) @ rope(k, offset=shift).T                # (T, T)
    assert_close(scores(0), scores(7))     # every position moved by 7
    assert_close(scores(0), scores(250))
    assert not torch.allclose(scores(0), q @ k.T, atol=1e-2)   # positions do change them
    # one pair of words at positions (m, n) scores as at (m + 5, n + 5), not as at (m, n + 5)
    s = rope(q[:1], offset=3) @ rope(k[:1], offset=1).T
    assert_close(s, rope(q[:1], offset=8) @ rope(k[:1], offset=6).T)
    assert not torch.allclose(s, rope(q[:1], offset=3) @ rope(k[:1], offset=6).T, atol=1e-3)


def test_rope_turns_self_attention_only_and_adds_no_code_to_the_words():
    x, enc, dec = model(positions="rope")
    ids = x.vocab.encode(["she is tired"], "en")
    emb = x.embeddings_generator_en
    assert torch.equal(emb(ids), emb.embedding(ids) * emb.scale)
    layer = dec.basic_decoder_arr[0]
    assert isinstance(enc.basic_encoder_arr[0].self_attention.rotary, RotaryEmbedding)
    assert layer.self_attention.heads[0].rotary is layer.self_attention.rotary
    assert layer.cross_attention.rotary is None and layer.cross_attention.heads[0].rotary is None


def translations(x, enc, dec, beam):
    model = x.EncoderDecoder(x, enc, dec).eval()
    src = x.vocab.encode([en for en, _ in x.held_out_corpus[:12]], "en")
    with torch.no_grad():
        decode = (lambda: greedy_decode(model, src, 10)) if beam == 1 else \
            (lambda: beam_search(model, src, 10, beam_width=beam))
        cached = decode()
        model.decoding = lambda *a: contextlib.nullcontext([])   # each step re-reads all
        return cached, decode()


# H = 4 heads where keys and values are grouped: G = 2 is two query heads a key/value head
SWITCHED = [{"positions": "rope"}, {"full_width_heads": True, "kv_heads": 2, "heads": 4},
            {"full_width_heads": True, "kv_heads": 1, "positions": "rope", "heads": 4},
            {"positions": "relative"},
            {"full_width_heads": True, "kv_heads": 2, "positions": "alibi", "heads": 4}]


@pytest.mark.parametrize("switches", SWITCHED)
@pytest.mark.parametrize("beam", [1, 3])
def test_decoding_with_the_cache_equals_decoding_without(switches, beam):
    x, enc, dec = model(TransformerFG, save_checkpoints=False, **switches)
    groups = {layer.self_attention.group for layer in dec.basic_decoder_arr}
    assert groups == {4 // switches.get("kv_heads", 4)}                  # grouped, where asked
    x.run_code_for_training(x.dl_studio, enc, dec, None, max_steps=5)
    torch.manual_seed(1)
    with torch.no_grad():     # an early model's long, varied output: every position decoded
        for p in [*enc.parameters(), *dec.parameters()]:
            p.add_(0.5 * torch.randn_like(p))
        dec.out.bias[EOS_INDEX] = -1e4
    cached, uncached = translations(x, enc, dec, beam)
    assert torch.equal(cached, uncached)
    assert cached.size(1) >= 9 and len(set(cached.flatten().tolist())) > 1
    # and each step's logits, from the newest word and the cache, are the whole pass's
    whole_model = x.EncoderDecoder(x, enc, dec).eval()
    src = x.vocab.encode([en for en, _ in x.held_out_corpus[:4]], "en")
    ys = torch.cat([torch.full((4, 1), SOS_INDEX), cached[:4]], dim=1)          # (4, 10)
    with torch.no_grad(), whole_model.decoding() as caches:
        assert caches
        memory, cross_mask = whole_model.encode(src)
        steps = torch.stack([whole_model.decode_newest(ys[:, :t + 1], memory, cross_mask)
                             for t in range(ys.size(1))], dim=1)
    with torch.no_grad():
        whole = whole_model.decode(ys, memory, cross_mask)
    assert_close(steps, whole)


def test_a_gpt_with_rope_and_one_key_value_head_generates_the_same_with_the_cache():
    dls = DLStudio(use_gpu=False, seed=0, learning_rate=2e-3, batch_size=16)
    gpt = TransformerGPT(dl_studio=dls, sentences=["la casa es roja", "el perro come pan",
                                                   "la niña lee un libro"] * 8,
                         tokenizer="word", embedding_size=16, num_basic_decoders=2,
                         num_atten_heads=4, positions="rope", kv_heads=1,
                         full_width_heads=True, save_checkpoints=False)
    gpt.run_code_for_training(None, max_steps=20)
    gpt.eval()
    ids = torch.tensor([[SOS_INDEX]] * 3)
    outs = [generate(gpt, ids, temperature=1.0, use_cache=cache,
                     generator=torch.Generator().manual_seed(2)) for cache in (True, False)]
    assert torch.equal(*outs) and outs[0].size(1) > 2


def test_kv_heads_equal_to_the_heads_is_todays_attention_to_the_bit():
    """G = H: every group is one head, so grouped_heads, run on a model's attentions, shares
    nothing and changes no output (the container skips it at G = H: the same model)."""
    from DLStudio.model.since_2017 import grouped_heads
    for full_width in (False, True):
        torch.manual_seed(3)
        x, enc, dec = model(TransformerFG, heads=4, full_width_heads=full_width)
        net = x.model_from(enc, dec).eval()
        src, tgt = torch.randint(3, 20, (4, 7)), torch.randint(3, 20, (4, 6))
        with torch.no_grad():
            before = net(src, tgt)
            attentions = [m for m in net.modules() if hasattr(m, "heads") and hasattr(m, "group")]
            for attention in attentions:
                assert grouped_heads(attention.heads, 4) == 1
                assert len({id(h.WK) for h in attention.heads}) == 4
            assert torch.equal(net(src, tgt), before)
        torch.manual_seed(3)
        same_seed = model(TransformerFG, heads=4, full_width_heads=full_width, kv_heads=4)
        with torch.no_grad():
            assert torch.equal(same_seed[0].model_from(*same_seed[1:]).eval()(src, tgt), before)


def four_heads(**switches):
    """A translation model of M = 16 and H = 4 heads (s_qkv = 4), full-width heads."""
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0)
    x = TransformerFG(dl_studio=dls, corpus=generate_corpus(200, seed=4), embedding_size=16,
                      full_width_heads=True, **switches)
    return x.model_from(x.MasterEncoder(dls, x, 1, 4), x.MasterDecoderWithMasking(dls, x, 1, 4))


def cache_sizes(model, src):
    """The number of numbers each attention's cache holds after the first decoding step."""
    with torch.no_grad(), model.decoding() as caches:
        memory, cross_mask = model.encode(src)
        model.decode_newest(src[:, :1], memory, cross_mask)
        return [cache.K.numel() + cache.V.numel() for cache in caches]


def test_grouped_heads_share_keys_and_values_in_order_and_cache_g_heads():
    torch.manual_seed(0)
    grouped, plain = four_heads(kv_heads=2).eval(), four_heads().eval()
    attention = grouped.decoder.basic_decoder_arr[0].self_attention
    heads = attention.heads
    assert heads[1].WK is heads[0].WK and heads[3].WV is heads[2].WV      # 0 0 1 1
    assert heads[2].WK is not heads[0].WK and heads[1].WQ is not heads[0].WQ
    x = torch.randn(3, 5, 16)
    # the batched path repeats K, V in that order
    assert_close(attention.all_heads(x, x, None), attention.per_head(x, x, None))
    count = [sum(p.numel() for p in m.parameters()) for m in (grouped, plain)]
    assert count[1] - count[0] == 3 * 2 * 2 * (16 * 4 + 4)   # 3 attentions, 2 WK+WV pairs less
    src = torch.randint(3, 20, (2, 6))
    assert [b // a for a, b in zip(cache_sizes(grouped, src), cache_sizes(plain, src))] == [2, 2]
    one = four_heads(kv_heads=1).eval()
    assert [b // a for a, b in zip(cache_sizes(one, src), cache_sizes(plain, src))] == [4, 4]


def test_kv_heads_that_cannot_be_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="needs full_width_heads=True"):
        model(kv_heads=1)
    with pytest.raises(ValueError, match="must divide num_atten_heads"):
        four_heads(kv_heads=3)
    with pytest.raises(ValueError, match="kv_heads is a number"):
        model(kv_heads=0)
    with pytest.raises(ValueError, match="positions must be one of"):
        model(positions="xpos")


def test_a_students_rotary_embedding_is_used_and_a_head_that_ignores_it_is_refused():
    class MyFG(TransformerFG):
        class RotaryEmbedding(TransformerFG.RotaryEmbedding):
            pass

    x, enc, dec = model(MyFG, positions="rope")
    assert type(dec.basic_decoder_arr[0].self_attention.heads[1].rotary) is MyFG.RotaryEmbedding

    class Calls(TransformerFG):              # a head that calls super().forward: accepted
        class AttentionHead(TransformerFG.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                return super().forward(x, mask, memory)
    model(Calls, positions="rope")

    class Ignores(TransformerFG):            # its own scores, never turned: refused
        class AttentionHead(TransformerFG.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                kv = x if memory is None else memory
                return scaled_dot_product(self.WQ(x), self.WK(kv), self.WV(kv), mask)[0]
    with pytest.raises(OverrideError, match="never reads self.rotary"):
        model(Ignores, positions="rope")

    class Nested(TransformerFG):             # turns Q and K in a comprehension: accepted
        class AttentionHead(TransformerFG.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                kv = x if memory is None else memory
                Q, K = (t if self.rotary is None else self.rotary(t)
                        for t in (self.WQ(x), self.WK(kv)))
                return scaled_dot_product(Q, K, self.WV(kv), mask)[0]
    x, enc, dec = model(Nested, positions="rope")
    assert dec.basic_decoder_arr[0].self_attention.heads[0].rotary is not None


def test_the_parts_classes_refuse_what_the_scripts_refuse():
    from DLStudio.model.architecture import EncoderDecoderParts
    from DLStudio.model.vision import VisionParts
    for G in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="kv_heads is a number"):
            EncoderDecoderParts(vocab_en_size=10, vocab_es_size=10, max_seq_length=8,
                                embedding_size=16, full_width_heads=True, kv_heads=G)
    with pytest.raises(ValueError, match="not for images"):
        VisionParts(num_classes=3, positions="rope", embedding_size=16)


def test_an_older_run_with_learned_positions_loads_and_resumes(tmp_path):
    x, enc, dec = model(learned_positions=True)
    assert x.positions == "learned" and x.learned_positions
    folder = str(tmp_path / "ck")
    x.run_code_for_training(x.dl_studio, enc, dec, folder, max_steps=3)
    path = os.path.join(folder, sorted(f for f in os.listdir(folder) if f.endswith(".pt"))[0])
    payload = torch.load(path, weights_only=True)       # as written before `positions` came
    for part in ("container_args", "training_config"):
        payload[part]["learned_positions"] = payload[part].pop("positions") == "learned"
    torch.save(payload, path)
    again, _, _ = TransformerPreLN.from_checkpoint(path)
    assert again.positions == "learned"
    x, enc, dec = model(positions="learned")
    x.dl_studio.epochs = 4
    x.run_code_for_training(x.dl_studio, enc, dec, folder, resume=True)


def test_bert_and_the_gpt_take_rope_and_grouped_heads():
    dls = DLStudio(use_gpu=False, seed=0)
    text = ["la casa es roja", "el perro come pan"] * 6
    bert = TransformerBERT(dl_studio=dls, sentences=text, tokenizer="word", embedding_size=16,
                           num_basic_encoders=1, num_atten_heads=4, positions="rope",
                           full_width_heads=True, kv_heads=2)
    attention = bert.master_encoder.basic_encoder_arr[0].self_attention
    assert attention.group == 2 and attention.rotary is not None
    ids = torch.tensor([[bert.vocab.cls_id, 5, 6, bert.vocab.sep_id]])
    assert bert(ids).shape[-1] == bert.vocab.size
    gpt = TransformerGPT(dl_studio=dls, sentences=text, tokenizer="word", embedding_size=16,
                         num_basic_decoders=1, num_atten_heads=4, positions="rope",
                         full_width_heads=True, kv_heads=2)
    attention = gpt.master_decoder.basic_decoder_arr[0].self_attention
    assert attention.group == 2 and attention.rotary is not None
    assert attention.heads[1].WK is attention.heads[0].WK
    ids = torch.tensor([[SOS_INDEX, 3, 4]])
    assert gpt(ids).shape == (1, 3, gpt.vocab_sizes["es"])


def test_the_explorer_reads_a_model_with_every_switch():
    torch.manual_seed(0)
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0)
    x = TransformerPreLN(dl_studio=dls, corpus=generate_corpus(200, seed=4), embedding_size=16,
                         full_width_heads=True, kv_heads=1, positions="rope", norm="rmsnorm",
                         feed_forward="swiglu")
    model = x.model_from(x.MasterEncoder(dls, x, 1, 4), x.MasterDecoderWithMasking(dls, x, 1, 4))
    src, tgt = x.vocab.encode(["she is tired"], "en"), x.vocab.encode(["ella"], "es")
    maps = model.eval().attention_maps(src, tgt)
    for kind, (T_q, T_k) in {"encoder": (src.size(1), src.size(1)),
                             "cross": (tgt.size(1), src.size(1))}.items():
        weights = maps[kind][0]                                   # (B, H, T_q, T_k): 4 heads
        assert weights.shape == (1, 4, T_q, T_k)
        assert_close(weights.sum(-1), torch.ones(1, 4, T_q))
    view = translation_view(model, x.vocab, "she is tired")
    assert view["tokens"]["source"] and len(view["maps"]["encoder"]["layers"][0]) == 4  # heads
