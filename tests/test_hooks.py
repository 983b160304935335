"""Hook points, the cache and interventions (model/hooks.py), and the analyses over them
(evaluation/interpret.py), on every family of ours."""

import pytest
import torch

from DLStudio.evaluation import interpret
from DLStudio.evaluation.generation import generate
from DLStudio.model import batched_heads
from DLStudio.model.architecture import EncoderDecoderParts, GPTParts
from DLStudio.model.bert import BERTParts
from DLStudio.model.hooks import HookPoint
from DLStudio.model.vision import VisionParts

from .close import assert_close, differ


def gpt(**changes):
    torch.manual_seed(0)
    sizes = dict(vocab_size=40, embedding_size=32, max_seq_length=24, num_basic_decoders=2,
                 num_atten_heads=4)
    return GPTParts(**{**sizes, **changes}).eval()


IDS = torch.randint(3, 40, (3, 10), generator=torch.Generator().manual_seed(0))


def registered(model):
    """The hooks still registered on the model's hook points and modules."""
    return sum(len(p.forward_hooks) for p in model.hook_points().values()) + sum(
        len(m._forward_hooks) for m in model.modules())


def families():
    """(model, inputs) of each family: a GPT, the translation model, BERT, the vision model."""
    torch.manual_seed(0)
    translation = EncoderDecoderParts(vocab_en_size=30, vocab_es_size=40, max_seq_length=12,
                                      embedding_size=32).encoder_decoder(2, 2)
    bert = BERTParts(vocab_size=40, pad_id=0, embedding_size=32, max_seq_length=12,
                     num_basic_encoders=2)
    vision = VisionParts(num_classes=3, patch_size=(4, 4), image_size=(8, 8), in_channels=1,
                         embedding_size=32, num_basic_encoders=2)
    src, tgt = torch.randint(2, 30, (2, 9)), torch.randint(2, 40, (2, 7))
    return {"gpt": (gpt(), IDS), "translation": (translation.eval(), (src, tgt)),
            "bert": (bert.eval(), torch.randint(1, 40, (2, 9))),
            "vision": (vision.eval(), torch.rand(2, 1, 8, 8))}


@pytest.mark.parametrize("family", ["gpt", "translation", "bert", "vision"])
def test_the_cache_holds_every_hook_point_and_the_output_is_the_models(family):
    model, inputs = families()[family]
    with torch.no_grad():
        want = model(*inputs) if isinstance(inputs, tuple) else model(inputs)
        got, cache = model.run_with_cache(inputs)
    assert_close(got, want)
    assert list(cache) and set(cache) == set(model.hook_names())
    layers = interpret.anatomy(model).layers
    pattern = cache[interpret.layer_hook(model, 0, "self_attention.hook_pattern")]
    assert pattern.shape[1] == layers[0].self_attention.num_atten_heads
    assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
    assert not registered(model)


def test_the_residual_stream_is_the_sum_of_what_the_sublayers_add():
    model = gpt()
    _, cache = model.run_with_cache(IDS)
    for i in range(2):
        name = interpret.layer_hook(model, i, "")
        pre, mid, post = (cache[f"{name}hook_resid_{p}"] for p in ("pre", "mid", "post"))
        assert_close(mid - pre, cache[f"{name}self_attention.hook_out"], scale=pre.abs().max())
        assert_close(post - mid, cache[f"{name}feed_forward.hook_out"], scale=mid.abs().max())
        if i:
            assert torch.equal(pre, cache[f"{interpret.layer_hook(model, i - 1, '')}"
                                          "hook_resid_post"])


def test_a_hook_on_one_heads_output_is_that_head_switched_off_and_the_batch_runs_on():
    """Zeroing head 2's z (a hook) equals zeroing head 2's W_V and its bias (no hook), and
    the heads still run as one batched product."""
    model = gpt()
    attention = model.master_decoder.basic_decoder_arr[1].self_attention
    assert attention.batched
    ablated = interpret.ablate(model, IDS, layer=1, head=2)
    head = attention.heads[2]
    with torch.no_grad():
        head.WV.weight.zero_()
        head.WV.bias.zero_()
        want = model(IDS)
    assert_close(ablated, want)
    assert differ(ablated, gpt()(IDS))


def test_fused_attention_stays_on_unless_a_hook_reads_the_scores_or_the_pattern(monkeypatch):
    calls = []
    fused = batched_heads.F.scaled_dot_product_attention
    monkeypatch.setattr(batched_heads.F, "scaled_dot_product_attention",
                        lambda *a, **k: calls.append(1) or fused(*a, **k))
    model = gpt()
    model.run_with_cache(IDS, names="*hook_z")
    assert len(calls) == 2                                 # one a layer: still fused
    model.run_with_cache(IDS, names="*.0.*hook_pattern")
    assert len(calls) == 3                                 # layer 0 readable, layer 1 fused


def test_no_hook_stays_registered_after_an_error_or_a_run():
    model = gpt()

    def broken(x, name):
        raise RuntimeError("a student's bug")
    with pytest.raises(RuntimeError, match="a student's bug"):
        model.run_with_hooks(IDS, hooks=[("*hook_resid_mid", broken)])
    assert not registered(model)
    with pytest.raises(KeyError, match="hook_resid_pre"):
        model.run_with_cache(IDS, names="master_decoder.basic_decoder_arr.0.hook_resid_pr")


def test_a_students_hook_point_class_is_every_hook_point():
    seen = []

    class Watched(GPTParts):
        class HookPoint(HookPoint):
            def forward(self, x):
                seen.append(x.shape)
                return x
    model = Watched(vocab_size=40, embedding_size=32, max_seq_length=24,
                    num_basic_decoders=2, num_atten_heads=4)
    assert all(isinstance(p, Watched.HookPoint) for p in model.hook_points().values())
    model(IDS)
    assert len(seen) == len(model.hook_points())


def test_hooks_run_at_every_step_of_cached_generation():
    model = gpt()
    shapes = []
    with model.hooks([("*.0.self_attention.hook_q", lambda q, name: shapes.append(q.shape))]):
        out = generate(model, IDS[:1, :4], max_new_tokens=3, end_ids=())
    assert shapes[0][2] == 4 and all(s[2] == 1 for s in shapes[1:]) and len(shapes) >= 3
    assert not registered(model)
    assert out.shape[-1] >= 5


def test_an_attention_only_layer_has_no_feed_forward_network():
    for norm_first in (True, False):
        model = gpt(feed_forward="none", norm_first=norm_first)
        assert not any("feed_forward" in name for name, _ in model.named_parameters())
        _, cache = model.run_with_cache(IDS, names="*resid_*")
        name = interpret.layer_hook(model, 0, "")
        assert torch.equal(cache[name + "hook_resid_mid"], cache[name + "hook_resid_post"])
    with pytest.raises(ValueError, match="feed_forward must be one of"):
        gpt(feed_forward="None")


def test_the_logit_lens_ends_at_the_models_logits_and_attribution_adds_up():
    model = gpt()
    lens = interpret.logit_lens(model, IDS)
    assert lens.shape == (3, 3, 10, 40)
    assert_close(lens[-1], model(IDS))
    parts = interpret.direct_logit_attribution(model, IDS, right=5, wrong=7)
    assert_close(parts["total"], parts["logit_diff"], scale=parts["attention"].abs().max())
    assert_close(parts["heads"].sum(1), parts["attention"],      # sliced heads: no W^O
                 scale=parts["attention"].abs().max())
    with pytest.raises(ValueError, match="post-LN"):
        interpret.direct_logit_attribution(gpt(norm_first=False), IDS, right=5, wrong=7)


def test_patching_restores_exactly_where_the_runs_differ():
    """Two inputs differing at position 4 only: patching layer 0's residual stream there
    restores the clean run's metric (1), patching anywhere else restores nothing (0)."""
    model = gpt()
    clean = IDS[:1]
    corrupted = clean.clone()
    corrupted[0, 4] = (clean[0, 4] + 1) % 40
    logits = model(clean)
    right, wrong = logits[0, -1].argmax(), logits[0, -1].argmin()
    result = interpret.patch_residual(model, clean, corrupted,
                                      lambda out: interpret.logit_diff(out, right, wrong))
    assert result.shape == (2, 10)
    assert_close(result[0, 4], torch.tensor(1.0), rel=1e-4)
    assert_close(result[0, [0, 1, 2, 3]], torch.zeros(4), scale=1.0)
    heads = interpret.patch_heads(model, clean, corrupted,
                                  lambda out: interpret.logit_diff(out, right, wrong))
    assert heads.shape == (2, 4) and torch.isfinite(heads).all()


def test_the_detector_scores_a_head_made_to_look_back_by_one():
    """A hook makes head 1 of layer 0 attend to the previous token only: its previous-token
    score is 1, the others' below it."""
    model = gpt()
    ids = interpret.repeated_tokens(40, 8, batch=4, first=0, low=1)

    def previous_only(pattern, name):
        T = pattern.size(-1)
        pattern = pattern.clone()
        pattern[:, 1] = torch.diag(torch.ones(T - 1), -1)
        pattern[:, 1, 0, 0] = 1
        return pattern
    with model.hooks([("*.0.self_attention.hook_pattern", previous_only)]):
        scores = interpret.head_scores(model, ids, 8)
    assert_close(scores["previous"][0, 1], torch.tensor(1.0))
    assert scores["previous"][0, [0, 2, 3]].max() < 0.9
    assert set(scores) == {"previous", "duplicate", "induction"}
