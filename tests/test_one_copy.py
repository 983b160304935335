"""One copy of the attention weights: without gradients (decoding, evaluation) the batched
path reads every head's W_Q, W_K, W_V as views of one block of memory per layer, never a
concatenated copy; with gradients it joins the heads' Parameters as before. The numbers,
the parameters' names and old checkpoints are unchanged."""

import copy

import torch

from DLStudio import DLStudio
from DLStudio.evaluation.generation import generate
from DLStudio.model.architecture import EncoderDecoderParts
from DLStudio.Transformers import TransformerGPT

from .close import assert_close


def model(**switches):
    torch.manual_seed(0)
    return EncoderDecoderParts(vocab_en_size=40, vocab_es_size=60, max_seq_length=12,
                               embedding_size=32, **switches).encoder_decoder(1, 2)


def storage(t):
    return t.untyped_storage().data_ptr()


def test_decoding_reads_the_heads_weights_without_a_copy():
    gpt = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0), tokenizer="word",
                         sentences=["la casa es roja", "el perro come"] * 5, embedding_size=32,
                         num_basic_decoders=2, num_atten_heads=4, full_width_heads=True,
                         kv_heads=2)
    attention = gpt.master_decoder.basic_decoder_arr[0].self_attention
    kept = []
    with torch.no_grad(), gpt.decoding() as caches:
        gpt(torch.tensor([[0, 3]]))                     # the prompt, then one new token
        gpt.decode_newest(torch.tensor([[0, 3, 4]]))
        kept = [w for cache in caches[:1] for pair in cache.stacked.values() for w in pair]
    assert generate(gpt, torch.tensor([[0, 3]]), 4, end_ids=(-1,)).shape == (1, 6)
    assert kept                                        # the cache held the stacked weights
    heads = list(attention.heads)
    mine = {storage(getattr(getattr(h, n), kind)) for h in heads for n in ("WQ", "WK", "WV")
            for kind in ("weight", "bias")}
    assert {storage(w) for w in kept} <= mine          # views of the heads' own memory
    assert len({storage(h.WQ.weight) for h in heads}) == 1       # W_Q: one block


def test_the_numbers_and_the_gradients_are_those_of_separate_heads():
    for switches in ({}, {"full_width_heads": True, "kv_heads": 2}):
        m = model(**switches)
        reference = copy.deepcopy(m)                    # never packed: separate tensors
        src, tgt = torch.randint(2, 40, (3, 12)), torch.randint(2, 60, (3, 12))
        with torch.no_grad():
            first = m(src, tgt)                         # packs the heads' weights
        m(src, tgt).sum().backward()
        reference(src, tgt).sum().backward()
        for (name, p), q in zip(m.named_parameters(), reference.parameters()):
            assert torch.equal(p, q) and torch.equal(p.grad, q.grad), name
        with torch.no_grad():
            assert torch.equal(first, reference(src, tgt))
        assert list(m.state_dict()) == list(reference.state_dict())
        m.load_state_dict(reference.state_dict())       # an old checkpoint loads as before
        with torch.no_grad():
            assert torch.equal(m(src, tgt), first)


def test_an_optimiser_step_on_the_views_moves_what_decoding_reads():
    m = model()
    src, tgt = torch.randint(2, 40, (3, 12)), torch.randint(2, 60, (3, 12))
    with torch.no_grad():
        before = m(src, tgt)
    opt = torch.optim.Adam(m.parameters(), 1e-2, fused=True)
    m(src, tgt).sum().backward()
    opt.step()
    with torch.no_grad():
        after = m(src, tgt)
        unpacked = copy.deepcopy(m)
        for module in unpacked.modules():               # separate tensors again: the cat path
            for name in ("WQ", "WK", "WV"):
                layer = getattr(module, name, None)
                if isinstance(layer, torch.nn.Linear):
                    layer.weight.data = layer.weight.data.clone()
                    layer.bias.data = layer.bias.data.clone()
        assert torch.equal(unpacked(src, tgt), after) and not torch.equal(before, after)
    m = m.to(torch.float64)                             # moved or cast: packed again
    with torch.no_grad():
        assert_close(m(src, tgt), after)


def test_packing_inside_inference_mode_leaves_the_model_trainable():
    m = model()
    src, tgt = torch.randint(2, 40, (3, 12)), torch.randint(2, 60, (3, 12))
    with torch.inference_mode():
        first = m(src, tgt)
    m(src, tgt).sum().backward()                     # the parameters are no inference tensors
    assert all(p.grad is not None for p in m.parameters())
    with torch.no_grad():
        assert torch.equal(m(src, tgt), first)
