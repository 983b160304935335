"""The changes since 2017 as switches of the same classes (model/since_2017.py): RMSNorm and
SwiGLU against their definitions (and torch's RMSNorm), a model built with them, trained,
saved and rebuilt, a student's subclass of either used everywhere, and the 2017 model
unchanged when they are off."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from DLStudio import DLStudio, TransformerFG, TransformerGPT, TransformerPreLN
from DLStudio.checkpoints import checkpoint_path
from DLStudio.data import generate_corpus
from DLStudio.model.since_2017 import RMSNorm, SwiGLU


def test_rmsnorm_is_torchs_given_the_same_weight():
    if not hasattr(nn, "RMSNorm"):
        pytest.skip("torch.nn.RMSNorm came with torch 2.4; this torch is older")
    x = torch.randn(3, 5, 16, dtype=torch.float64) * 3 + 1
    ours, theirs = RMSNorm(16, eps=1e-5).double(), nn.RMSNorm(16, eps=1e-5).double()
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    assert torch.allclose(ours(x), theirs(x), atol=1e-12)
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


def model(cls=TransformerPreLN, **switches):
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=3, seed=0, learning_rate=2e-3)
    x = cls(dl_studio=dls, corpus=generate_corpus(200, seed=4), embedding_size=16,
            num_warmup_steps=10, **switches)
    return x, x.MasterEncoder(dls, x, 1, 2), x.MasterDecoderWithMasking(dls, x, 1, 2)


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
    with pytest.raises(ValueError, match="feed_forward must be one of relu, gelu, swiglu"):
        model(feed_forward="geglu")
