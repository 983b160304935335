"""The changes since 2023 as switches of the same classes (model/since_2023.py): QK-norm, a
sliding window, layers without rotary positions. Each gives the same numbers head by head,
batched and while decoding with the cache; each does what it says (a norm that makes the
scores blind to the size of W_Q, a window past which a token cannot be seen, a layer that
no position reaches); a student's head that would skip one is refused; train_gpt.py takes
them and a checkpoint keeps them."""

import pytest
import torch

from DLStudio import DLStudio, TransformerGPT
from DLStudio.checkpoints import checkpoint_files, load_checkpoint
from DLStudio.cli.gpt import gpt_train_main
from DLStudio.containers import hub
from DLStudio.data.hub_tokenizer import FolderError
from DLStudio.model.architecture import GPTParts
from DLStudio.model.overrides import OverrideError

from .close import assert_close, close

SWITCHES = [{"qk_norm": True}, {"window": 3}, {"nope_layers": (1,)},
            {"qk_norm": True, "window": 2, "nope_layers": (0,)},
            {"qk_norm": "all_heads", "norm_placement": "output"},
            {"norm_placement": "sandwich", "norm": "rmsnorm_plus_one", "feed_forward": "geglu",
             "score_scale": 0.3, "qk_norm": True, "window": 3, "window_layers": (0,),
             "window_rope_base": 100.0}]


def gpt(seed=0, layers=2, **switches):
    torch.manual_seed(seed)
    sizes = dict(vocab_size=50, embedding_size=32, max_seq_length=24, num_basic_decoders=layers,
                 num_atten_heads=4, positions="rope", norm="rmsnorm", full_width_heads=True,
                 kv_heads=2)
    return GPTParts(**dict(sizes, **switches)).eval()


@pytest.mark.parametrize("switches", SWITCHES, ids=str)
def test_head_by_head_batched_and_cached_give_the_same_numbers(switches):
    model = gpt(**switches)
    ids = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        batched = model(ids)
        for layer in model.master_decoder.basic_decoder_arr:
            layer.self_attention.fused = False            # the readable attention
            layer.self_attention.batched = switches.get("qk_norm") == "all_heads"
        by_head = model(ids)     # (a norm over all heads has no head-by-head form)
        for layer in model.master_decoder.basic_decoder_arr:
            layer.self_attention.batched = True
        with model.decoding():
            cached = torch.stack([model.decode_newest(ids[:, :t + 1]) for t in range(12)], 1)
    assert_close(batched, by_head)
    assert_close(batched, cached)


def test_a_token_outside_the_window_is_not_seen():
    """One layer, a window of 3: position 8 sees 6, 7, 8; changing token 5 changes nothing
    there (and changes position 7, which sees it)."""
    model = gpt(layers=1, window=3)
    ids = torch.randint(0, 50, (1, 10), generator=torch.Generator().manual_seed(2))
    other = ids.clone()
    other[0, 5] = (ids[0, 5] + 1) % 50
    with torch.no_grad():
        a, b = model(ids), model(other)
    assert torch.equal(a[0, 8:], b[0, 8:])
    assert (a[0, 7] - b[0, 7]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="window is a number of tokens"):
        gpt(window=0)


def test_qk_norm_makes_the_scores_blind_to_the_size_of_the_queries_and_keys():
    """RMSNorm rescales each head's q and k: W_Q and W_K ten times larger (biases too) give
    the same model; without the norm, they do not."""
    ids = torch.randint(0, 50, (1, 9), generator=torch.Generator().manual_seed(3))
    for qk_norm in (True, False):
        model = gpt(qk_norm=qk_norm)
        with torch.no_grad():
            before = model(ids)
            for layer in model.master_decoder.basic_decoder_arr:
                for head in layer.self_attention.heads:
                    for W in (head.WQ, head.WK):
                        W.weight.mul_(10)
                        W.bias.mul_(10)
            after = model(ids)
        assert close(after, before, rel=1e-4) == qk_norm        # the norms' eps: 1e-4


def test_a_nope_layer_turns_nothing_and_the_others_do():
    model = gpt(layers=3, nope_layers=(1,))
    turned = [layer.self_attention.rotary is not None and
              all(h.rotary is not None for h in layer.self_attention.heads)
              for layer in model.master_decoder.basic_decoder_arr]
    assert turned == [True, False, True]
    assert all(h.rotary is None for h in model.master_decoder.basic_decoder_arr[1]
               .self_attention.heads)


def test_a_students_head_that_skips_the_qk_norm_is_refused():
    class Head(GPTParts.AttentionHead):
        def forward(self, x, mask=None, memory=None):
            Q, K, V = self.rotary(self.WQ(x)), self.rotary(self.WK(x)), self.WV(x)
            w = torch.softmax(Q @ K.transpose(-2, -1) / Q.size(-1) ** 0.5, -1)
            return w @ V

    class Mine(GPTParts):
        AttentionHead = Head
    with pytest.raises(OverrideError, match="never reads self.q_norm"):
        Mine(vocab_size=50, embedding_size=32, max_seq_length=24, num_basic_decoders=1,
             num_atten_heads=4, positions="rope", full_width_heads=True, qk_norm=True)


def test_train_gpt_takes_the_switches_and_a_checkpoint_keeps_them(tmp_path, capsys):
    out = tmp_path / "ck"
    status = gpt_train_main(["--embedding-size", "32", "--num-layers", "2",
                             "--num-atten-heads", "4", "--positions", "rope",
                             "--full-width-heads", "--qk-norm", "--window", "4",
                             "--nope-layers", "1", "--max-steps", "2", "--checkpoints-dir",
                             str(out)])
    assert status == 0
    ck = load_checkpoint(checkpoint_files(str(out))[-1])
    assert {k: ck["container_args"][k] for k in ("qk_norm", "window", "nope_layers")} == \
        {"qk_norm": True, "window": 4, "nope_layers": (1,)}
    for bad, said in ((["--nope-layers", "2"], "the model has 2 layers"),
                      (["--nope-layers", "0", "--positions", "learned"], "needs --positions"),
                      (["--nope-layers", "x"], "layer indices")):
        capsys.readouterr()
        try:
            status = gpt_train_main(["--num-layers", "2", "--max-steps", "1",
                                     "--checkpoints-dir", str(tmp_path / "no")] + bad)
        except SystemExit as e:                      # argparse's usage message
            status = e.code
        assert status != 0 and said in capsys.readouterr().err
        assert not (tmp_path / "no").exists()


def test_the_llama_writer_refuses_the_switches_by_name(tmp_path):
    model = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0),
                           sentences=["la casa es roja", "el perro come"] * 5,
                           embedding_size=16, num_basic_decoders=1, num_atten_heads=2,
                           norm="rmsnorm", positions="rope", feed_forward="swiglu",
                           full_width_heads=True, output_bias=False, qk_norm=True, window=8)
    with pytest.raises(FolderError) as e:
        hub.write_folder(model, str(tmp_path / "out"))
    assert "qk_norm True" in str(e.value) and "window 8" in str(e.value)


def test_the_qk_norm_exercise_trains_in_train_gpt(tmp_path, monkeypatch):
    """train_gpt.py --model-class qk_norm:MyTransformer --qk-norm trains the student's head
    (the exercise's solution) and its checkpoint names the class."""
    import os
    import shutil
    shutil.copy(os.path.join(os.path.dirname(__file__), "exercise_solutions", "qk_norm.py"),
                tmp_path / "qk_norm.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(__import__("sys").modules, "qk_norm", raising=False)
    status = gpt_train_main(["--model-class", "qk_norm:MyTransformer", "--qk-norm",
                             "--positions", "rope", "--full-width-heads", "--embedding-size",
                             "32", "--num-layers", "1", "--num-atten-heads", "4",
                             "--max-steps", "2", "--checkpoints-dir", str(tmp_path / "ck")])
    assert status == 0
    ck = load_checkpoint(checkpoint_files(str(tmp_path / "ck"))[-1])
    assert ck["container_args"]["qk_norm"] is True
    assert "MyTransformer" in str(ck.get("container_class", ck.get("model_class", "")))


def test_the_norms_after_the_sublayers_sit_where_their_families_put_them():
    """OLMo 2's "output": x + Norm(F(x)), no norm before; Gemma's "sandwich": both. A
    sublayer's output ten times larger changes nothing after its norm."""
    ids = torch.randint(0, 50, (1, 9), generator=torch.Generator().manual_seed(4))
    for placement in ("output", "sandwich"):
        model = gpt(norm_placement=placement)
        layer = model.master_decoder.basic_decoder_arr[0]
        assert isinstance(layer.norm1, torch.nn.Identity) == (placement == "output")
        assert not isinstance(layer.post_norm1, torch.nn.Identity)
        with torch.no_grad():
            before = model(ids)
            for lay in model.master_decoder.basic_decoder_arr:
                lay.self_attention.W_O.weight.mul_(10)
                lay.self_attention.W_O.bias.mul_(10)
            assert_close(model(ids), before, rel=1e-3)     # the norms' eps moves it a little
    with pytest.raises(ValueError, match="pre-LN"):
        gpt(norm_placement="sandwich", norm_first=False)


def test_only_the_window_layers_slide_with_their_own_rotary_base():
    model = gpt(layers=3, window=2, window_layers=(0, 2), window_rope_base=50.0)
    attentions = [layer.self_attention for layer in model.master_decoder.basic_decoder_arr]
    assert [a.window for a in attentions] == [2, None, 2]
    assert [a.rotary.base for a in attentions] == [50.0, 10000.0, 50.0]
    assert all(h.rotary is a.rotary for a in attentions for h in a.heads)
    with pytest.raises(ValueError, match="not layers of a model of 3"):
        gpt(layers=3, window=2, window_layers=(3,))


def test_gemmas_norm_starts_as_the_identity_gain_and_geglu_gates_with_gelu():
    from DLStudio.model.since_2017 import RMSNorm, SwiGLU
    x = torch.randn(3, 8)
    plain, plus_one = RMSNorm(8), RMSNorm(8, plus_one=True)
    assert torch.equal(plus_one.weight, torch.zeros(8))
    assert_close(plain(x), plus_one(x))
    model = gpt(feed_forward="geglu")
    ff = model.master_decoder.basic_decoder_arr[0].feed_forward
    assert isinstance(ff, SwiGLU)
    y = torch.randn(2, 32)
    expected = ff.W2(torch.nn.functional.gelu(ff.W1(y), approximate="tanh") * ff.V(y))
    assert_close(ff(y), expected)


def test_a_norm_over_all_heads_refuses_a_students_head():
    class Head(GPTParts.AttentionHead):
        def forward(self, x, mask=None, memory=None):
            return super().forward(x, mask, memory)

    class Mine(GPTParts):
        AttentionHead = Head
    with pytest.raises(OverrideError, match="no single head sees"):
        Mine(vocab_size=50, embedding_size=32, max_seq_length=24, num_basic_decoders=1,
             num_atten_heads=4, positions="rope", full_width_heads=True, qk_norm="all_heads")


def test_train_gpt_takes_gemmas_and_olmos_switches(tmp_path):
    out = tmp_path / "ck"
    status = gpt_train_main(["--embedding-size", "32", "--num-layers", "3",
                             "--num-atten-heads", "4", "--positions", "rope",
                             "--full-width-heads", "--norm", "rmsnorm_plus_one",
                             "--feed-forward", "geglu", "--norm-placement", "sandwich",
                             "--qk-norm-all-heads", "--window", "4", "--window-layers", "0,1",
                             "--window-rope-base", "100", "--score-scale", "0.25",
                             "--max-steps", "2", "--checkpoints-dir", str(out)])
    assert status == 0
    ck = load_checkpoint(checkpoint_files(str(out))[-1])
    kept = {k: ck["container_args"][k] for k in (
        "norm", "feed_forward", "norm_placement", "qk_norm", "window_layers",
        "window_rope_base", "score_scale")}
    assert kept == {"norm": "rmsnorm_plus_one", "feed_forward": "geglu",
                    "norm_placement": "sandwich", "qk_norm": "all_heads",
                    "window_layers": (0, 1), "window_rope_base": 100.0, "score_scale": 0.25}
