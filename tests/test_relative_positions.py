"""Positions inside the attention score (model/relative_positions.py): Transformer-XL's
relative terms against the lecture's four-term expansion written out word pair by word pair,
ALiBi's slopes and bias against the paper's, and the switches in every family: no position
code on the words, none in cross-attention, the heads' own parameters, cached decoding equal
to uncached, a student's head, checkpoints, and the training scripts' flag."""

import math

import pytest
import torch

from DLStudio import DLStudio, TransformerBERT, TransformerGPT
from DLStudio.checkpoints.files import find_checkpoint
from DLStudio.evaluation.generation import generate
from DLStudio.model.architecture import EncoderDecoderParts, GPTParts
from DLStudio.model.overrides import OverrideError
from DLStudio.model.relative_positions import (
    ALiBi,
    RelativePosition,
    T5Bias,
    alibi_slopes,
    relative_scores,
    sinusoid_of_offsets,
    t5_buckets,
)

from .close import assert_close

SENTENCES = ["la casa es roja", "el perro come pan", "la niña lee un libro muy largo"] * 8


def test_the_relative_terms_are_the_lectures_expansion_pair_by_pair():
    """a_ij = q_i.k_j + q_i.W_R R_(i-j) + u.k_j + v.W_R R_(i-j), offsets clipped; the
    function returns all but the first term, for the last T_q of T_k positions."""
    torch.manual_seed(0)
    s, d, clip, T_q, T_k = 4, 6, 3, 3, 9
    Q, K = torch.randn(T_q, s, dtype=torch.float64), torch.randn(T_k, s, dtype=torch.float64)
    W_R = torch.randn(s, d, dtype=torch.float64)
    u, v = torch.randn(s, dtype=torch.float64), torch.randn(s, dtype=torch.float64)
    R = sinusoid_of_offsets(clip, d).double()                          # row r + clip
    P = R @ W_R.T
    got = relative_scores(Q, K, P, u[None], v[None])
    want = torch.empty(T_q, T_k, dtype=torch.float64)
    for a in range(T_q):
        i = T_k - T_q + a                                              # the query's position
        for j in range(T_k):
            r = max(-clip, min(clip, i - j))
            pos = W_R @ R[r + clip]
            want[a, j] = Q[a] @ pos + u @ K[j] + v @ pos
    torch.testing.assert_close(got, want)
    unclipped = sinusoid_of_offsets(clip + 6, d).double() @ W_R.T      # clip 9: none here
    assert not torch.allclose(relative_scores(Q, K, unclipped, u[None], v[None]), want)


def test_the_sinusoid_of_an_offset_is_the_2017_code_of_that_position():
    from DLStudio.model.architecture import TransformerParts
    code = TransformerParts.EmbeddingsGenerator.sinusoids(8, 6, 10000.0)
    assert_close(sinusoid_of_offsets(7, 6)[7:], code)
    # sin is odd, cos even: -r and r differ, so a key before and one after are told apart
    R = sinusoid_of_offsets(2, 6)
    assert not torch.allclose(R[0], R[4]) and torch.allclose(R[0, 1::2], R[4, 1::2])


def test_alibi_slopes_are_the_papers():
    assert alibi_slopes(8) == [2 ** -k for k in range(1, 9)]
    assert alibi_slopes(4) == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]
    # not a power of two: the 4 slopes of 4 heads, then every other one of 8 heads'
    assert alibi_slopes(6) == alibi_slopes(4) + alibi_slopes(8)[0:4:2]
    head = ALiBi(0.25)
    Q, K = torch.zeros(2, 3, 4), torch.zeros(2, 5, 4)
    want = -0.25 * torch.tensor([[2., 1, 0, 1, 2], [3, 2, 1, 0, 1], [4, 3, 2, 1, 0]])
    assert torch.equal(head(Q, K, 0.5), want)


def gpt_parts(positions, **more):
    torch.manual_seed(0)
    gpt = GPTParts(vocab_size=50, embedding_size=32, max_seq_length=64, num_basic_decoders=2,
                   num_atten_heads=4, positions=positions, **more).double()
    with torch.no_grad():                        # u and v away from their zeros
        for name, p in gpt.named_parameters():
            if "relative" in name:
                p.normal_()
    return gpt.eval()


@pytest.mark.parametrize("positions", ["relative", "alibi", "t5"])
@pytest.mark.parametrize("more", [{}, {"full_width_heads": True, "kv_heads": 2}])
def test_a_gpts_cached_decoding_and_every_path_give_the_whole_passs_logits(positions, more):
    gpt = gpt_parts(positions, **more)
    ids = torch.randint(2, 50, (2, 14), generator=torch.Generator().manual_seed(1))
    attentions = [layer.self_attention for layer in gpt.master_decoder.basic_decoder_arr]
    with torch.no_grad():
        whole = gpt(ids)
        with gpt.decoding() as caches:
            assert caches
            steps = torch.stack([gpt.decode_newest(ids[:, :t + 1]) for t in range(14)], 1)
        torch.testing.assert_close(steps, whole)
        for attention in attentions:                 # the readable paths: head by head ...
            attention.batched = False
        torch.testing.assert_close(gpt(ids), whole)
        for attention in attentions:                 # ... and the batched, unfused one
            attention.batched, attention.record_attention = True, True
        torch.testing.assert_close(gpt(ids), whole)
        for attention in attentions:
            attention.record_attention = False
        # no position code on the words: the same word at two places embeds the same
        x = gpt.embeddings_generator(torch.tensor([[7, 7]]))
        assert torch.equal(x[0, 0], x[0, 1])
        # and the positions matter: the text reversed is not the same distribution
        assert not torch.allclose(gpt(ids.flip(1))[:, -1], whole[:, -1])


def test_each_head_has_its_own_u_v_and_key_matrix_and_cross_attention_none():
    torch.manual_seed(0)
    parts = EncoderDecoderParts(vocab_en_size=30, vocab_es_size=40, max_seq_length=20,
                                embedding_size=32, positions="relative")
    model = parts.encoder_decoder(1, 1, 4)
    layer = model.decoder.basic_decoder_arr[0]
    heads = layer.self_attention.heads
    assert all(isinstance(h.relative, RelativePosition) for h in heads)
    assert len({id(h.relative.u) for h in heads}) == 4 and len({id(h.relative.WR) for h in
                                                                  heads}) == 4
    assert all(h.relative is None and h.alibi is None for h in layer.cross_attention.heads)
    assert all(isinstance(h.relative, RelativePosition)
               for h in model.encoder.basic_encoder_arr[0].self_attention.heads)
    names = [n for n, _ in model.named_parameters() if "relative" in n]
    assert not [n for n in names if "cross_attention" in n]
    assert "decoder.basic_decoder_arr.0.self_attention.heads.3.relative.u" in names


def test_a_students_head_reads_the_positions_or_is_refused():
    class Calls(GPTParts):
        class AttentionHead(GPTParts.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                return super().forward(x, mask, memory)

    class Ignores(GPTParts):
        class AttentionHead(GPTParts.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                from DLStudio.model.architecture import scaled_dot_product
                return scaled_dot_product(self.WQ(x), self.WK(x), self.WV(x), mask)[0]

    sizes = dict(vocab_size=30, embedding_size=16, max_seq_length=20, num_basic_decoders=1,
                 num_atten_heads=2)
    for positions in ("relative", "alibi"):
        torch.manual_seed(0)
        theirs = Calls(positions=positions, **sizes).eval()
        torch.manual_seed(0)
        ours = GPTParts(positions=positions, **sizes).eval()
        ids = torch.randint(2, 30, (2, 9))
        with torch.no_grad():
            assert_close(ours(ids), theirs(ids))
        with pytest.raises(OverrideError, match="never reads self.score_bias"):
            Ignores(positions=positions, **sizes)


def test_positions_terms_raise_the_score_of_near_keys_as_alibi_says():
    """ALiBi with every query and key equal: the weights fall with the distance, the
    steepest head the fastest."""
    gpt = gpt_parts("alibi")
    attention = gpt.master_decoder.basic_decoder_arr[0].self_attention
    attention.record_attention = True
    x = torch.ones(1, 6, 32, dtype=torch.float64)
    from DLStudio.model.tokens import causal_mask
    with torch.no_grad():
        for head in attention.heads:                 # every query and key the same
            for W in (head.WQ, head.WK):
                W.weight.zero_()
                W.bias.fill_(0.1)
        attention(x, causal_mask(6, x.device))
    last = attention.attention_weights[0, :, -1]                        # (H, T_k)
    assert bool((last[:, 1:] > last[:, :-1]).all())                     # nearer, heavier
    assert bool((last[0, -1] > last[-1, -1]).item())                    # m_1 > m_4


@pytest.mark.parametrize("positions", ["relative", "alibi", "t5"])
def test_a_gpt_trains_generates_the_same_with_the_cache_and_reloads(positions, tmp_path):
    dls = DLStudio(use_gpu=False, seed=0, learning_rate=2e-3, batch_size=16,
                   path_saved_model=str(tmp_path / "saved.pt"))   # (not the clone's own)
    gpt = TransformerGPT(dl_studio=dls, sentences=SENTENCES, tokenizer="word",
                         embedding_size=16, num_basic_decoders=2, num_atten_heads=4,
                         positions=positions, checkpoint_freq=1)
    losses = gpt.run_code_for_training(str(tmp_path / "ck"), max_steps=20)
    gpt.eval()
    ids = torch.tensor([[1]] * 3)
    outs = [generate(gpt, ids, temperature=1.0, use_cache=cache,
                     generator=torch.Generator().manual_seed(2)) for cache in (True, False)]
    assert torch.equal(*outs) and outs[0].size(1) > 2
    del losses
    again = TransformerGPT.from_checkpoint(find_checkpoint(str(tmp_path / "ck"))).model
    assert again.positions == positions
    probe = torch.tensor([[1, 5, 6, 7]])
    with torch.no_grad():
        torch.testing.assert_close(again.eval()(probe), gpt(probe))


def test_bert_takes_the_switches_in_its_encoder():
    dls = DLStudio(use_gpu=False, seed=0, batch_size=8)
    for positions in ("relative", "alibi", "t5"):
        bert = TransformerBERT(dl_studio=dls, sentences=SENTENCES, tokenizer="word",
                               embedding_size=16, num_basic_encoders=1, num_atten_heads=2,
                               positions=positions, save_checkpoints=False)
        heads = bert.master_encoder.basic_encoder_arr[0].self_attention.heads
        assert getattr(heads[0], positions)


def test_scores_are_scaled_with_the_model_and_alibi_is_added_after_scaling():
    """Transformer-XL scales all four terms; ALiBi's bias is added to the scaled scores."""
    torch.manual_seed(0)
    head = RelativePosition(4, 4)
    with torch.no_grad():
        head.u.normal_()
    Q, K = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    assert_close(head(Q, K, 0.5), 2 * head(Q, K, 0.25))
    assert torch.equal(ALiBi(0.5)(Q, K, 0.5), ALiBi(0.5)(Q, K, 0.25))
    assert math.isclose(head.clip, 32)


def test_t5_buckets_are_the_papers_near_words_exact_far_ones_logarithmic():
    d = torch.tensor([0, 1, -1, 7, -8, -15, -16, -127, -128, -500, 20])
    # bidirectional, 32 buckets: 16 a side, 8 exact, then log-spaced up to 128
    assert t5_buckets(d).tolist() == [0, 17, 1, 23, 8, 9, 10, 15, 15, 15, 26]
    # causal: keys after the query count as distance 0; 16 exact, then log-spaced
    assert t5_buckets(d, bidirectional=False).tolist() == \
        [0, 0, 1, 0, 8, 15, 16, 31, 31, 31, 0]


def test_t5_buckets_and_bias_are_transformers_t5s():
    pytest.importorskip("transformers", reason="the parity tests need transformers")
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention
    d = torch.arange(-300, 301)
    for bidirectional in (True, False):
        for buckets, far in ((32, 128), (16, 64), (8, 20)):
            want = T5Attention._relative_position_bucket(d, bidirectional, buckets, far)
            assert torch.equal(t5_buckets(d, bidirectional, buckets, far), want)
    config = T5Config(d_model=16, d_kv=4, num_heads=4, relative_attention_num_buckets=32,
                      relative_attention_max_distance=128)
    for is_decoder in (False, True):
        config.is_decoder = is_decoder
        theirs = T5Attention(config, has_relative_attention_bias=True)
        ours = T5Bias(4, bidirectional=not is_decoder)
        ours.table.weight.data.copy_(theirs.relative_attention_bias.weight.data)
        assert torch.equal(ours(9, 9), theirs.compute_bias(9, 9))
        assert torch.equal(ours(1, 9), theirs.compute_bias(9, 9)[:, :, -1:])  # cached step


def test_t5_positions_one_table_a_stack_both_ways_in_the_encoder_and_none_across():
    torch.manual_seed(0)
    parts = EncoderDecoderParts(vocab_en_size=30, vocab_es_size=40, max_seq_length=20,
                                embedding_size=32, positions="t5")
    model = parts.encoder_decoder(2, 2, 4)
    names = [n for n, _ in model.named_parameters() if "position_bias" in n]
    assert names == ["encoder.position_bias.table.weight", "decoder.position_bias.table.weight"]
    assert model.encoder.position_bias.bidirectional
    assert not model.decoder.position_bias.bidirectional
    for layer in model.decoder.basic_decoder_arr:
        assert all(h.t5.bias is model.decoder.position_bias for h in layer.self_attention.heads)
        assert all(h.t5 is None for h in layer.cross_attention.heads)
    with torch.no_grad():
        bias = model.encoder.position_bias(5, 5)[0, 0]
    assert not torch.equal(bias, bias.T)               # before and after differ
