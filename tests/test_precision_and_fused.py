"""The fast paths keep the readable one's results: the fused attention kernel computes
`scaled_dot_product` (to 1e-5 in fp32), bf16 autocast trains, and fp16 off CUDA is refused."""

import pytest
import torch

from DLStudio import DLStudio, TransformerFG, TransformerGPT, TransformerPreLN
from DLStudio.data import generate_corpus
from DLStudio.runtime.precision import Precision

from .close import assert_close
from .test_transformers import make, randomize


def outputs_with_and_without_fused(model, *inputs):
    attention = [m for m in model.modules() if hasattr(m, "fused")]
    assert attention and all(m.batched for m in attention)
    out = {}
    for fused in (True, False):
        for m in attention:
            m.fused = fused
        out[fused] = model(*inputs)
    return out[True], out[False]


@pytest.mark.parametrize("cls", [TransformerFG, TransformerPreLN])
@pytest.mark.parametrize("full_width", [False, True])
def test_fused_attention_computes_the_readable_product(cls, full_width):
    """Encoder (padding mask), decoder self-attention (causal and padding) and
    cross-attention, through the whole model."""
    torch.manual_seed(0)
    _, x, enc, dec = make(cls, full_width_heads=full_width)
    model = x.EncoderDecoder(x, enc, dec).eval()
    randomize(model)
    pairs = sorted(x.training_corpus, key=lambda pair: len(pair[0].split()))
    pairs = [pairs[0], pairs[-1]]                           # the shortest and the longest
    src = x.vocab.encode([en for en, _ in pairs], "en")     # (2, max_seq_length), padded
    tgt = x.vocab.encode([es for _, es in pairs], "es")
    fused, readable = outputs_with_and_without_fused(model, src, tgt)
    assert fused.shape == readable.shape
    assert_close(fused, readable)


def test_fused_attention_keeps_the_gpt_causal():
    dls = DLStudio(use_gpu=False, batch_size=8, epochs=1, seed=0)
    gpt = TransformerGPT(dl_studio=dls, sentences=["a b c d e f"] * 20, tokenizer="word",
                         embedding_size=32, num_basic_decoders=2, num_atten_heads=4).eval()
    ids = torch.randint(2, gpt.num_tokens("text"), (2, 7))
    fused, readable = outputs_with_and_without_fused(gpt, ids)
    assert_close(fused, readable)
    later = ids.clone()
    later[:, 5:] = 2
    assert torch.equal(gpt(ids)[:, :5], gpt(later)[:, :5])      # the future does not leak


def test_bf16_on_the_cpu_takes_the_readable_product(monkeypatch):
    """The kernel rule of `SelfAttention.all_heads`, line (A): every attention layer calls the
    fused kernel in fp32; under CPU bf16 autocast none does (it measured slower there), and
    the output is the readable path's, bit for bit."""
    torch.manual_seed(0)
    _, x, enc, dec = make(TransformerFG)
    model = x.EncoderDecoder(x, enc, dec).eval()
    src = x.vocab.encode([en for en, _ in x.training_corpus[:4]], "en")
    tgt = x.vocab.encode([es for _, es in x.training_corpus[:4]], "es")
    calls, kernel = [], torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda *a, **k: calls.append(1) or kernel(*a, **k))
    model(src, tgt)
    layers = sum(1 for m in model.modules() if hasattr(m, "fused"))
    assert layers == 2 + 2 * 2 and len(calls) == layers     # encoder self; decoder self, cross
    calls.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused, readable = outputs_with_and_without_fused(model, src, tgt)
    assert not calls and fused.dtype == torch.bfloat16 and torch.equal(fused, readable)


@pytest.mark.slow
def test_bf16_autocast_trains_as_fp32_does():
    """One batch: bf16's loss is close to fp32's, not equal. Four epochs from the same start:
    bf16's loss falls as fp32's does, and the weights stay fp32."""
    corpus, ends = generate_corpus(400, seed=1), {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        _, x, enc, dec = make(TransformerPreLN, corpus=corpus)
        trainer = x.trainer(enc, dec, precision=precision)
        if precision == "bf16":
            batch = next(iter(trainer.batches(0)))
            trainer.model.eval()
            fp32 = trainer.loss_on_batch(*batch).item()
            with trainer.precision.autocast():
                bf16 = trainer.loss_on_batch(*batch).item()
            assert bf16 != fp32 and abs(bf16 - fp32) < 0.02 * fp32   # 8 bits of mantissa
        trainer.dls.epochs = 4
        losses = trainer.run()
        ends[precision] = (sum(losses[:5]) / 5, sum(losses[-5:]) / 5)
        assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    (start32, end32), (start16, end16) = ends["fp32"], ends["bf16"]
    assert end32 < 0.8 * start32 and end16 < 0.8 * start16
    assert abs(end16 - end32) < 0.05 * end32


def test_fp16_off_cuda_and_unknown_precisions_are_refused():
    with pytest.raises(ValueError, match="fp16 needs a CUDA GPU"):
        Precision("fp16", torch.device("cpu"))
    with pytest.raises(ValueError, match="must be one of"):
        Precision("fp8", torch.device("cpu"))


@pytest.mark.parametrize("native, chosen", [(True, "bf16"), (False, "fp32")])
def test_auto_takes_bf16_where_the_device_has_it_natively(monkeypatch, native, chosen):
    from DLStudio.runtime import precision
    monkeypatch.setattr(precision, "native_bf16", lambda device: native)
    auto = Precision("auto", torch.device("cpu"))
    assert auto.name == chosen and auto.dtype == {"bf16": torch.bfloat16,
                                                  "fp32": torch.float32}[chosen]
    assert not auto.scales


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 with a gradient scaler: CUDA")
def test_fp16_with_its_gradient_scaler_trains_on_cuda():
    torch.manual_seed(0)
    dls = DLStudio(use_gpu=True, batch_size=32, epochs=2, seed=0, learning_rate=1e-3)
    x = TransformerPreLN(dl_studio=dls, corpus=generate_corpus(400, seed=1), embedding_size=32)
    enc = x.MasterEncoder(dls, x, num_basic_encoders=2, num_atten_heads=4)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=2, num_atten_heads=4)
    trainer = x.trainer(enc, dec,
                                               precision="fp16")
    losses = trainer.run()
    assert trainer.precision.scales and trainer.precision.scaler.get_scale() > 0
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5


@pytest.mark.slow
def test_compiled_training_takes_the_same_steps():
    """--compile: the same losses, step by step, as the plain model from the same start."""
    corpus, losses = generate_corpus(200, seed=2), {}
    for compiled in (False, True):
        torch.manual_seed(0)
        _, x, enc, dec = make(TransformerPreLN, M=16, H=2, layers=1, corpus=corpus)
        trainer = x.trainer(enc, dec, compile=compiled,
                                                   max_steps=4)
        losses[compiled] = trainer.run()
    assert len(losses[True]) == 4
    assert_close(torch.tensor(losses[True]), torch.tensor(losses[False]))


def test_bf16_decoding_translates_as_fp32_does(trained):
    """The same trained model decoded under bf16 autocast (its output layer computes in
    bfloat16): nearly every held-out sentence translates the same, BLEU within a point."""
    from DLStudio.evaluation import evaluate_bleu
    _, x, _, _, trainer, _ = trained
    pairs, results, dtypes = list(x.held_out_corpus)[:300], {}, set()
    hook = trainer.model.decoder.out.register_forward_hook(
        lambda module, inputs, output: dtypes.add(output.dtype))
    try:
        for precision in ("fp32", "bf16"):
            dtypes.clear()
            results[precision] = evaluate_bleu(trainer.model, x.vocab, pairs,
                                               precision=precision)
            assert dtypes == {torch.float32 if precision == "fp32" else torch.bfloat16}
    finally:
        hook.remove()
    fp32, bf16 = results["fp32"], results["bf16"]
    assert fp32["bleu"] > 20                        # a model that translates
    same = sum(a[1] == b[1] for a, b in zip(fp32["translations"], bf16["translations"]))
    assert same >= 0.9 * len(fp32["translations"])
    assert abs(fp32["bleu"] - bf16["bleu"]) < 1.0
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())


def test_fp16_decoding_off_cuda_is_refused_in_one_line(trained, capsys):
    from DLStudio.cli import translate_main
    folder = trained[0]
    assert translate_main([str(folder / "ck"), "last", "she is tired", "--precision",
                           "fp16"]) == 1
    assert "fp16 needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.parametrize("max_norm", [0.5, 1000.0])     # clipped, and not
def test_clipping_is_clip_grad_norm_to_the_bit(max_norm):
    from DLStudio.training.schedule import clip_gradient_norm
    torch.manual_seed(0)
    grads = [torch.randn(7, 5), torch.randn(3), torch.randn(40)]
    ours, theirs = ([torch.nn.Parameter(torch.zeros_like(g)) for g in grads] for _ in range(2))
    for a, b, g in zip(ours, theirs, grads):
        a.grad, b.grad = g.clone(), g.clone()
    total = clip_gradient_norm(ours, max_norm)
    want = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert torch.equal(total, want)
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(ours, theirs))
    assert (max_norm < want) == (not torch.equal(ours[0].grad, grads[0]))


def _adam_pairs(max_norm, steps=3):
    """The same parameters and gradients through (a) torch's clipping, then the step, and
    (b) the clipping inside our fused Adam's step; returns both parameter lists and norms."""
    from DLStudio.training.schedule import ClippingAdam, adam, clip_gradient_norm
    runs = []
    for inside in (False, True):
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(s)) for s in ((64, 32), (32,), (300, 8))]
        opt = adam(params, 1e-2, {})
        assert isinstance(opt, ClippingAdam)
        norms = []
        for step in range(steps):
            g = torch.Generator().manual_seed(step)
            for p in params:
                p.grad = 3 * torch.randn(p.shape, generator=g)
            norms.append(clip_gradient_norm(params, max_norm, opt if inside else None))
            opt.step()
            assert not hasattr(opt, "grad_scale")          # never carried to the next step
        runs.append((params, norms))
    return runs


def test_clipping_inside_the_fused_step_is_torchs_clipping_to_rounding():
    (theirs, their_norms), (ours, our_norms) = _adam_pairs(max_norm=1.0)
    assert all(torch.equal(a, b) for a, b in zip(our_norms, their_norms))   # the same norm
    assert all(n > 1.0 for n in their_norms)                                # and clipped
    for a, b in zip(ours, theirs):
        assert_close(a, b)
        assert_close(a.grad, b.grad)     # .grad: clipped, as before


def test_unclipped_gradients_step_to_the_bit():
    (theirs, _), (ours, _) = _adam_pairs(max_norm=1e6)     # factor 1: x / 1 is x
    assert all(torch.equal(a, b) and torch.equal(a.grad, b.grad) for a, b in zip(ours, theirs))


def test_a_step_not_taken_leaves_no_clipping_behind():
    from DLStudio.training.schedule import adam, clip_gradient_norm
    p = torch.nn.Parameter(torch.ones(4))
    opt = adam([p], 0.1, {})
    p.grad = torch.full((4,), 100.0)
    clip_gradient_norm([p], 1.0, opt)               # then the trainer stops (a NaN, say)
    opt.zero_grad()
    assert not hasattr(opt, "grad_scale")


def test_an_optimiser_without_the_fused_step_is_clipped_by_torch():
    from DLStudio.training.schedule import clip_gradient_norm
    p = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.Adam([p], 0.1)
    p.grad = torch.full((4,), 100.0)
    clip_gradient_norm([p], 1.0, opt)
    assert_close(p.grad, torch.full((4,), 0.5))   # clipped here and now


def test_a_state_loaded_from_an_unfused_adam_is_clipped_by_torch():
    """A state dict whose groups say fused=None (an unfused Adam's, or an older file's)
    turns the fused step off; the clipping then happens before the step, not in it."""
    from DLStudio.training.schedule import adam, clip_gradient_norm
    runs = []
    for loaded in (False, True):
        p = torch.nn.Parameter(torch.ones(4))
        opt = adam([p], 0.1, {})
        if loaded:
            plain = torch.optim.Adam([torch.nn.Parameter(torch.ones(4))], 0.1,
                                     betas=(0.9, 0.98), eps=1e-9)
            opt.load_state_dict(plain.state_dict())
            assert opt.param_groups[0]["fused"] is None and not opt.fused_step()
        p.grad = torch.full((4,), 100.0)
        clip_gradient_norm([p], 1.0, opt)
        opt.step()
        runs.append(p.detach().clone())
    assert_close(runs[0], runs[1])


def test_grad_between_clipping_and_the_step_is_unclipped_as_documented():
    from DLStudio.training.schedule import ClippingAdam, adam, clip_gradient_norm
    p = torch.nn.Parameter(torch.ones(4))
    opt = adam([p], 0.1, {})
    p.grad = torch.full((4,), 100.0)
    clip_gradient_norm([p], 1.0, opt)
    assert torch.equal(p.grad, torch.full((4,), 100.0))          # not yet
    opt.step()
    assert_close(p.grad, torch.full((4,), 0.5))   # written by the step
    assert "not yet clipped" in ClippingAdam.__doc__
