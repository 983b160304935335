"""Weights in 8 and 4 bits (DLStudio/model/quantize.py): each format's round trip within half
a level, each kernel against the readable product, every Linear a GPT and a translation
model generate with quantized (grouped key/value heads, the tied output layer), generation
through the cache and without it alike, a student's quantizer used where the class is
named, the command-line flags, and the refusals."""

import pytest
import torch
import torch.nn as nn

from DLStudio.model.quantize import Int4Quantizer, Int8Quantizer, QuantizedLinear
from DLStudio.runtime.studio import DLStudio
from DLStudio.Transformers import TransformerGPT


def matrix(N=48, K=64, seed=0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    sizes = 10 ** torch.linspace(-3, 1, N)
    return torch.randn(N, K, generator=g) * sizes[:, None] + shift


@pytest.mark.parametrize("shift", [0.0, 0.5])
def test_int8_round_trip_is_within_half_a_level_of_each_row(shift):
    W = matrix(shift=shift)
    q = Int8Quantizer()
    parts = q.quantize(W)
    assert parts["q"].dtype == torch.int8 and parts["scale"].shape == (len(W),)
    level = W.abs().amax(1, keepdim=True) / 127
    error = (q.dequantize(parts) - W).abs() / level
    assert error.max() <= 0.5 + 1e-4                      # NaN fails too
    assert int(parts["q"].abs().max()) == 127


@pytest.mark.parametrize("group", [32, 64])
def test_int4_round_trip_is_within_half_a_level_of_each_group(group):
    W = matrix(K=128, shift=0.3)
    q = Int4Quantizer(group_size=group)
    parts = q.quantize(W)
    assert parts["scale"].shape == (48, 128 // group) and int(parts["q"].max()) <= 15
    back = q.dequantize(parts)
    level = parts["scale"].repeat_interleave(group, dim=1)
    assert ((back - W).abs() / level).max() <= 0.5 + 1e-4
    assert (back < 0).any() and (W < 0).any()             # the zero point keeps negatives


def test_a_row_the_group_does_not_divide_ends_in_a_shorter_group():
    q = Int4Quantizer(group_size=32)
    W = matrix(N=4, K=85)
    parts = q.quantize(W)
    assert parts["scale"].shape == (4, 3) and parts["q"].shape == (4, 85)
    level = parts["scale"].repeat_interleave(32, 1)[:, :85]
    assert ((q.dequantize(parts) - W).abs() / level).max() <= 0.5 + 1e-4
    padded = torch.nn.functional.pad(W, (0, 11))                  # zeros: the same groups
    assert torch.equal(q.quantize(padded)["scale"], parts["scale"])


@pytest.mark.parametrize("kind,kernel", [("int8", "fbgemm"), ("int8", "int8pack"),
                                         ("int4", "int4pack")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_each_kernel_computes_the_readable_product(kind, kernel, dtype):
    if kernel == "fbgemm" and not any(e in torch.backends.quantized.supported_engines
                                      for e in ("fbgemm", "x86")):
        pytest.skip("this CPU's PyTorch has no FBGEMM")
    W, bias = matrix(N=64, K=128), torch.randn(64)
    quantizer = Int8Quantizer(kernel) if kind == "int8" else Int4Quantizer(kernel=kernel)
    fast = QuantizedLinear(quantizer, W, bias)
    assert ("fbgemm" in fast.packed) == (kernel == "fbgemm")
    assert ("int4" in fast.packed) == (kernel == "int4pack")
    x = torch.randn(3, 5, 128, generator=torch.Generator().manual_seed(5)).to(dtype)
    want = nn.functional.linear(x.double(), fast.dequantized().double(), bias.double())
    got = fast(x)
    assert got.dtype == dtype and got.shape == (3, 5, 64)
    # the activations rounded to 7 bits over the batch (FBGEMM's reduce_range: up to 2.6% of
    # the largest output over 30 seeds) or to bf16 (the int4 kernel), and bf16 itself
    tol = {"fbgemm": 5e-2, "int8pack": 1e-5, "int4pack": 1e-2}[kernel]
    tol = max(tol, 2e-2 if dtype == torch.bfloat16 else 0)
    assert ((got.double() - want).abs().max() / want.abs().max()) <= tol
    assert fast.weight_bytes() < W.numel() * 4 / (3 if kind == "int8" else 6)


def gpt(**more):
    torch.manual_seed(0)
    settings = dict(embedding_size=64, num_basic_decoders=2, num_atten_heads=4,
                    max_seq_length=24, full_width_heads=True)
    settings.update(more)
    return TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=None), tokenizer="word",
                          sentences=["la casa azul es grande", "el perro negro come"] * 3,
                          **settings).eval()


SHAPES = {"classic": {}, "sliced heads": {"full_width_heads": False},
          "llama-like": {"kv_heads": 2, "norm": "rmsnorm", "positions": "rope",
                         "feed_forward": "swiglu", "tie_embeddings": True}}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_every_linear_of_a_gpt_is_quantized_and_its_logits_stay_near(shape, kind):
    model = gpt(**SHAPES[shape])
    ids = torch.randint(0, model.num_tokens(), (2, 9), generator=torch.Generator()
                        .manual_seed(1))
    with torch.no_grad():
        before = model(ids)
    fp32_bytes = model.weight_bytes()
    model.quantize(kind)
    assert not [n for n, m in model.named_modules() if type(m) is nn.Linear]
    assert all(h.WQ is None for h in model.master_decoder.basic_decoder_arr[0]
               .self_attention.heads) or shape == "sliced heads"
    assert isinstance(model.master_decoder.out, QuantizedLinear)
    with torch.no_grad():
        after = model(ids)
    change = float((after - before).abs().max() / before.abs().max())
    assert change <= (0.05 if kind == "int8" else 0.25), change
    assert model.weight_bytes() < fp32_bytes / 2.5      # (int4 a byte a number where no kernel)


@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_quantized_generation_through_the_cache_is_generation_without_it(kind):
    from DLStudio.evaluation.generation import generate
    model = gpt(**SHAPES["llama-like"]).quantize(kind)
    prompt = torch.randint(3, model.num_tokens(), (2, 3), generator=torch.Generator()
                           .manual_seed(2))
    with torch.no_grad():
        cached = generate(model, prompt, max_new_tokens=8, end_ids=(-1,))
        whole = generate(model, prompt, max_new_tokens=8, end_ids=(-1,), use_cache=False)
    assert torch.equal(cached, whole)


def test_a_translation_model_is_quantized_encoder_decoder_and_cross_attention():
    from DLStudio.evaluation.decode_and_score import greedy_decode
    torch.manual_seed(0)
    from DLStudio.model.architecture import EncoderDecoderParts
    model = EncoderDecoderParts(vocab_en_size=40, vocab_es_size=40, max_seq_length=12,
                                embedding_size=64, full_width_heads=True).encoder_decoder(
        1, 1, 4).eval()
    src = torch.randint(3, 40, (2, 7), generator=torch.Generator().manual_seed(3))
    tgt = torch.randint(3, 40, (2, 5), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        before = model(src, tgt)
    model.quantize("int8")
    assert not [n for n, m in model.named_modules() if type(m) is nn.Linear]
    cross = model.decoder.basic_decoder_arr[0].cross_attention
    assert sorted(cross.quantized) == ["WK,WV", "WQ"]
    with torch.no_grad():
        after = model(src, tgt)
        ids = greedy_decode(model, src, 10)
    assert float((after - before).abs().max() / before.abs().max()) <= 0.05
    assert ids.shape[0] == 2


class CountingInt8(Int8Quantizer):
    made = 0

    def quantize(self, W):
        CountingInt8.made += 1
        return super().quantize(W)


def test_a_students_quantizer_is_used_where_the_class_is_named():
    class MyGPT(TransformerGPT):
        Int8Quantizer = CountingInt8
    torch.manual_seed(0)
    model = MyGPT(dl_studio=DLStudio(use_gpu=False, seed=None), tokenizer="word",
                  sentences=["la casa", "el perro"], embedding_size=32, num_basic_decoders=1,
                  num_atten_heads=2, max_seq_length=8, full_width_heads=True)
    model.quantize("int8")
    assert CountingInt8.made == 5       # W_Q W_K W_V stacked, W_O, W1, W2, the output layer
    assert all(m.quantizer.__class__ is CountingInt8 for m in model.modules()
               if isinstance(m, QuantizedLinear))


def test_the_refusals_say_what_to_do():
    model = gpt()
    with pytest.raises(ValueError, match="'int8', 'int4'"):
        model.quantize("int3")
    with pytest.raises(ValueError, match="group_size"):
        model.quantize("int4", group_size=24)
    model.add_lora(rank=2)
    with pytest.raises(ValueError, match="merge_lora"):
        model.quantize("int8")
    model.merge_lora()
    model.quantize("int8")
    with pytest.raises(ValueError, match="quantized already"):
        model.quantize("int4")


@pytest.mark.slow                                   # (it trains a GPT: make test-all)
@pytest.mark.parametrize("kernel,unchanged", [("int8pack", 20), ("fbgemm", 14)])
def test_greedy_text_of_a_trained_gpt_under_int8(tmp_path, kernel, unchanged):
    """The README's GPT, smaller and trained for two epochs on the bundled corpus's Spanish:
    its greedy continuations of two words of 20 held-out sentences, before and after int8.
    Weights alone in 8 bits (int8pack) change none of them; the activations rounded to 8
    bits too (FBGEMM's kernel) change a few (measured: 4 of 20, docs/performance.md)."""
    if kernel == "fbgemm" and not any(e in torch.backends.quantized.supported_engines
                                      for e in ("fbgemm", "x86")):
        pytest.skip("this CPU's PyTorch has no FBGEMM")
    from DLStudio.cli.gpt import archive_side
    from DLStudio.data import BUNDLED_ARCHIVE
    from DLStudio.data.vocabulary import plain_words
    corpus, sentences = archive_side(BUNDLED_ARCHIVE, "es")
    dls = DLStudio(use_gpu=False, seed=0, batch_size=32, epochs=2, learning_rate=1e-3,
                   path_saved_model=str(tmp_path / "saved.pt"))
    model = TransformerGPT(dl_studio=dls, sentences=sentences, tokenizer="word",
                           embedding_size=64, num_basic_decoders=2, num_atten_heads=4)
    model.run_code_for_training(str(tmp_path / "gpt"))
    model.eval()
    seen = set(sentences)
    held_out = [plain_words(es) for _, es in corpus.pairs if es not in seen][:20]
    prompts = [" ".join(words[:2]) for words in held_out]
    before = [model.generate(p, num_samples=1, temperature=0.0)[0] for p in prompts]
    model.quantize("int8", kernel=kernel)
    after = [model.generate(p, num_samples=1, temperature=0.0)[0] for p in prompts]
    assert len(prompts) == 20 and len(set(before)) > 10
    assert sum(a == b for a, b in zip(before, after)) >= unchanged, list(zip(before, after))


def test_the_flags_generate_and_explore_with_the_weights_in_fewer_bits(tmp_path, capsys):
    """interact_with_prompts.py and dlstudio explore take --quantize; the page says so; a
    BERT checkpoint is refused it in one line."""
    from DLStudio.cli.explore import explore_main
    from DLStudio.cli.gpt import prompts_main
    dls = DLStudio(use_gpu=False, seed=0, epochs=1, batch_size=8,
                   path_saved_model=str(tmp_path / "saved.pt"))
    model = TransformerGPT(dl_studio=dls, sentences=["la casa es roja", "el perro come"] * 10,
                           tokenizer="word", embedding_size=32, num_basic_decoders=1,
                           num_atten_heads=2, full_width_heads=True)
    model.run_code_for_training(str(tmp_path / "gpt"), max_steps=2)
    for kind in ("int8", "int4"):
        assert prompts_main([str(tmp_path / "gpt"), "0", "la casa", "--temperature", "0",
                             "--quantize", kind]) == 0
        assert "'la casa' -> la casa" in capsys.readouterr().out
        page = tmp_path / f"{kind}.html"
        assert explore_main([str(tmp_path / "gpt"), "0", "la casa", "--quantize", kind,
                             "--out", str(page)]) == 0
        assert f"quantized to {kind}" in page.read_text()
    from DLStudio import TransformerBERT
    bert = TransformerBERT(dl_studio=dls, sentences=["la casa es roja", "el perro"] * 10,
                           tokenizer="word", embedding_size=16, num_basic_encoders=1,
                           num_atten_heads=2)
    bert.run_code_for_pretraining(str(tmp_path / "bert"), max_steps=1)
    capsys.readouterr()
    assert explore_main([str(tmp_path / "bert"), "la [MASK]", "--quantize", "int8"]) == 1
    assert "--quantize is for a GPT or a translation model" in capsys.readouterr().err
