"""LoRA in our classes (model/lora.py): the model is unchanged at step 0, only A and B
learn, the batched path and the heads one by one agree, merging and unmerging change
nothing the model computes, a subclass's LoRA is used, and the adapter written in PEFT's
format gives transformers + PEFT our logits (that test needs the parity extra)."""

import math

import pytest
import torch

from DLStudio import DLStudio
from DLStudio.containers import hub
from DLStudio.Transformers import TransformerGPT

from .close import assert_close
from .hub_folders import llama_folder

ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def llama_gpt(cls=TransformerGPT, seed=0, **more):
    settings = dict(more, norm="rmsnorm", positions="rope", feed_forward="swiglu",
                    full_width_heads=True, output_bias=False, kv_heads=2, num_atten_heads=4,
                    embedding_size=32, num_basic_decoders=2, vocab_size=300)
    text = ["la casa es roja", "el perro come la manzana", "yo no sé nada"] * 6
    return cls(dl_studio=DLStudio(use_gpu=False, seed=seed), sentences=text,
               **settings).eval()


def with_random_b(gpt, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, _, lora, _ in gpt.lora_places():
            lora.B.copy_(torch.randn(lora.B.shape, generator=g) * 0.5)
    return gpt


IDS = torch.randint(3, 60, (2, 11), generator=torch.Generator().manual_seed(0))


def test_the_model_is_unchanged_at_step_0_and_only_a_and_b_learn():
    gpt = llama_gpt()
    with torch.no_grad():
        before = gpt(IDS)
    trainable = gpt.add_lora(rank=4, alpha=8, targets=ALL)
    with torch.no_grad():
        assert torch.equal(gpt(IDS), before)
    M, F, G, s = 32, gpt.master_decoder.basic_decoder_arr[0].feed_forward.W1.out_features, 2, 8
    per_layer = sum(4 * (i + o) for i, o in ((M, 4 * s), (M, G * s), (M, G * s), (4 * s, M),
                                             (M, F), (M, F), (F, M)))
    assert trainable == 2 * per_layer
    gpt.train()
    loss, _ = gpt.loss(IDS)
    loss.backward()
    grads = {n: p.grad for n, p in gpt.named_parameters() if p.grad is not None}
    assert len(grads) == 2 * 2 * 7 and all(".loras." in n for n in grads)
    # at step 0 only B moves: A's gradient is B^T times what reaches the change, and B = 0
    assert all((g.abs().max() > 0) == n.endswith(".B") for n, g in grads.items())


def test_heads_one_by_one_batched_and_cached_agree_with_a_lora():
    gpt = with_random_b(llama_gpt())
    gpt.add_lora(rank=4, targets=ALL)
    with_random_b(gpt)
    attentions = [layer.self_attention for layer in gpt.master_decoder.basic_decoder_arr]
    assert all(a.batched for a in attentions)
    with torch.no_grad():
        batched = gpt(IDS)
        for a in attentions:
            a.batched = False
        by_head = gpt(IDS)
        for a in attentions:
            a.batched = True
        with gpt.decoding():
            cached = torch.stack([gpt.decode_newest(IDS[:, :t + 1]) for t in range(11)], 1)
    assert_close(batched, by_head)
    assert_close(batched, cached)


def test_merge_and_unmerge_change_nothing_the_model_computes():
    gpt = llama_gpt()
    with torch.no_grad():
        base = gpt(IDS)
    gpt.add_lora(rank=4, targets=ALL)
    with_random_b(gpt)
    with torch.no_grad():
        adapted = gpt(IDS)
        assert (adapted - base).abs().max() > 1e-2
        gpt.merge_lora()
        assert_close(gpt(IDS), adapted)
        gpt.unmerge_lora()
        assert_close(gpt(IDS), adapted)
        for _, _, lora, _ in gpt.lora_places():
            lora.B.zero_()
        assert_close(gpt(IDS), base)


def test_a_subclass_lora_is_used_wherever_the_model_names_it():
    class RsLoRA(TransformerGPT.LoRA):                 # rank-stabilised: alpha / sqrt(r)
        def __init__(self, in_size, out_size, rank=8, alpha=16):
            super().__init__(in_size, out_size, rank, alpha)
            self.scale = alpha / math.sqrt(rank)

    class Mine(TransformerGPT):
        LoRA = RsLoRA
    gpt = llama_gpt(Mine)
    gpt.add_lora(rank=4, alpha=8)
    loras = [lora for _, _, lora, _ in gpt.lora_places()]
    assert len(loras) == 8 and all(type(lora) is RsLoRA and lora.scale == 4.0
                                   for lora in loras)
    with pytest.raises(ValueError, match="LoRA targets are"):
        llama_gpt().add_lora(targets=("fc1",))

    class Doubled(TransformerGPT.LoRA):                # a delta of its own: used in training
        def delta(self, rows=slice(None)):
            return 2 * super().delta(rows)

    class Other(TransformerGPT):
        LoRA = Doubled
    gpt = llama_gpt(Other, dropout=0.0)
    gpt.add_lora(rank=4, alpha=8)
    with_random_b(gpt)
    with torch.no_grad():
        evaluated = gpt(IDS)                             # the weight's form: its delta
        trained = gpt.train()(IDS)             # the branch would give the undoubled change
        assert_close(trained, evaluated)
        assert (trained - llama_gpt(dropout=0.0)(IDS)).abs().max() > 1e-2


class EveryOther(torch.nn.Module):
    """A dropout whose mask is known: every other feature zeroed, the rest doubled (or,
    ``keep_all``, every feature kept), with ``p`` as nn.Dropout has it."""

    def __init__(self, keep_all=False):
        super().__init__()
        self.p, self.keep_all = 0.5, keep_all

    def forward(self, x):
        if self.keep_all:
            return x
        mask = torch.arange(x.size(-1), device=x.device) % 2 == 0
        return x * mask.to(x.dtype) * 2


class WeightForm(TransformerGPT.LoRA):
    """A LoRA that never branches: W + (alpha / r) B A is the weight read, in training too."""
    branching = property(lambda self: False)


class WeightFormGPT(TransformerGPT):
    LoRA = WeightForm


def test_loras_dropout_acts_on_its_input_while_training_and_never_in_evaluation():
    """Training adds PEFT's branch W x + (alpha / r) B A dropout(x): in evaluation the model
    is the one without dropout; training with a mask that keeps every feature gives what
    the weight's form gives, in training too (so the branch's rows, scale and transpose are
    right, and A and B get the gradients the weight's form gives them), and with a real
    mask the heads one by one and the batched path agree, and the output is not the
    weight's form."""
    def model(p=0.0, cls=TransformerGPT):
        gpt = llama_gpt(cls, dropout=0.0)
        gpt.add_lora(rank=4, alpha=8, targets=ALL, **({"dropout": p} if p else {}))
        return with_random_b(gpt)
    plain, dropping = model(cls=WeightFormGPT), model(0.3)
    with torch.no_grad():
        assert torch.equal(plain(IDS), dropping(IDS))             # evaluation: no dropout
        plain.train(), dropping.train()
        assert torch.equal(plain(IDS), plain(IDS))                 # no other dropout
        assert (dropping(IDS) - dropping(IDS)).abs().max() > 1e-3  # a new mask each pass
    with pytest.raises(ValueError, match="dropout is in"):
        llama_gpt().add_lora(dropout=1.0)

    for _, _, lora, _ in dropping.lora_places():
        lora.dropout = EveryOther(keep_all=True)
    plain.zero_grad(), dropping.zero_grad()
    plain.loss(IDS)[0].backward()
    dropping.loss(IDS)[0].backward()
    with torch.no_grad():
        assert_close(plain(IDS), dropping(IDS))
    grads = [(n, p.grad, dict(dropping.named_parameters())[n].grad)
             for n, p in plain.named_parameters() if p.grad is not None]
    assert len(grads) == 2 * 2 * 7
    for name, a, b in grads:
        assert_close(a, b, what=name)

    for _, _, lora, _ in dropping.lora_places():
        lora.dropout = EveryOther()
    attentions = [layer.self_attention for layer in dropping.master_decoder.basic_decoder_arr]
    with torch.no_grad():
        batched = dropping(IDS)
        for a in attentions:
            a.batched = False
        by_head = dropping(IDS)
        assert_close(batched, by_head)
        assert (batched - plain(IDS)).abs().max() > 1e-2
        dropping.eval()
        assert_close(dropping(IDS), plain.eval()(IDS))


@pytest.mark.slow
def test_the_adapter_in_pefts_format_gives_transformers_our_logits(tmp_path):
    """A random Llama folder written by transformers (grouped heads, tied), LoRA of rank 4
    on all seven projections with random B: PEFT loads our adapter onto transformers'
    model and gives our logits within 1e-4; the folder's files are untouched."""
    pytest.importorskip("peft", reason="the PEFT parity test needs peft (the parity extra)")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    folder = llama_folder(str(tmp_path / "llama"))
    before = {p.name: p.read_bytes() for p in (tmp_path / "llama").iterdir()}
    gpt = TransformerGPT.from_huggingface(folder)
    gpt.add_lora(rank=4, alpha=8, targets=ALL)
    with_random_b(gpt)
    hub.write_adapter(gpt, str(tmp_path / "adapter"))
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder),
                                      str(tmp_path / "adapter")).eval()
    ids = torch.tensor([gpt.encode("the quick brown fox jumps over the lazy dog")])
    with torch.no_grad():
        ours, theirs = gpt(ids), model(ids).logits
        assert_close(ours, theirs)
        with model.disable_adapter():
            assert (ours - model(ids).logits).abs().max() > 1e-2     # the adapter matters
    assert {p.name: p.read_bytes() for p in (tmp_path / "llama").iterdir()} == before


@pytest.mark.slow
def test_training_with_loras_dropout_gives_what_peft_gives(tmp_path):
    """In training, with the same mask for PEFT's lora_dropout and ours (EveryOther), our
    adapted model's logits are PEFT's on transformers' model within 1e-4; the adapter
    records the dropout, and ours reads it back."""
    pytest.importorskip("peft", reason="the PEFT parity test needs peft (the parity extra)")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    folder = llama_folder(str(tmp_path / "llama"))
    gpt = TransformerGPT.from_huggingface(folder)
    gpt.add_lora(rank=4, alpha=8, targets=ALL, dropout=0.25)
    with_random_b(gpt)
    hub.write_adapter(gpt, str(tmp_path / "adapter"))
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder),
                                      str(tmp_path / "adapter"), is_trainable=True)
    again = TransformerGPT.from_huggingface(folder, adapter=str(tmp_path / "adapter"))
    assert {lora.dropout.p for _, _, lora, _ in again.lora_places()} == {0.25}
    swapped = 0
    for module in model.modules():
        if hasattr(module, "lora_dropout") and "default" in module.lora_dropout:
            module.lora_dropout["default"] = EveryOther()
            swapped += 1
    for _, _, lora, _ in gpt.lora_places():
        lora.dropout = EveryOther()
    assert swapped == len(list(gpt.lora_places())) > 0
    gpt.train(), model.train()
    ids = torch.tensor([gpt.encode("the quick brown fox jumps over the lazy dog")])
    with torch.no_grad():
        ours, theirs = gpt(ids), model(ids).logits
        assert_close(ours, theirs)
        assert (ours - gpt.eval()(ids)).abs().max() > 1e-2          # the mask matters


def test_an_adapter_written_is_read_back_onto_its_folder(tmp_path):
    """Our GPT as a Llama folder, a LoRA with random B written as PEFT's adapter, read onto
    the folder again with from_huggingface(..., adapter=): the same logits; an adapter with
    a setting we cannot reproduce is refused by name, loading nothing."""
    import json
    folder = hub.write_folder(llama_gpt(), str(tmp_path / "folder"))
    gpt = TransformerGPT.from_huggingface(folder)
    gpt.add_lora(rank=4, alpha=8, targets=ALL)
    with_random_b(gpt)
    hub.write_adapter(gpt, str(tmp_path / "adapter"))
    again = TransformerGPT.from_huggingface(folder, adapter=str(tmp_path / "adapter"))
    with torch.no_grad():
        assert_close(again(IDS), gpt(IDS))
    config = tmp_path / "adapter" / "adapter_config.json"
    config.write_text(json.dumps(dict(json.loads(config.read_text()), use_dora=True)))
    with pytest.raises(hub.FolderError, match="use_dora True"):
        TransformerGPT.from_huggingface(folder, adapter=str(tmp_path / "adapter"))


@pytest.mark.slow
def test_an_adapter_peft_wrote_gives_ours_its_logits(tmp_path):
    """PEFT's own LoRA (rank 4, random B) on transformers' Llama, saved with
    save_pretrained, read onto our model of the folder: PEFT's logits within 1e-4."""
    pytest.importorskip("peft", reason="the PEFT parity test needs peft (the parity extra)")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    folder = llama_folder(str(tmp_path / "llama"))
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(folder), LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                           "gate_proj", "up_proj", "down_proj"],
        init_lora_weights=False)).eval()
    model.save_pretrained(str(tmp_path / "adapter"))
    gpt = TransformerGPT.from_huggingface(folder, adapter=str(tmp_path / "adapter"))
    ids = torch.tensor([gpt.encode("the quick brown fox jumps over the lazy dog")])
    with torch.no_grad():
        assert_close(gpt(ids), model(ids).logits)


@pytest.mark.slow
def test_gpt2s_fused_c_attn_takes_one_lora_that_peft_and_transformers_read(tmp_path):
    """GPT-2's W_Q, W_K, W_V are one Conv1D (c_attn): one LoRA over its 3 M rows (QKV), and
    c_proj (the attention's and the MLP's) and c_fc; PEFT reads our adapter (fan_in_fan_out)
    onto transformers' GPT-2, ours reads PEFT's, and the merged folder, Conv1D's layout
    kept, gives the same logits, all within 1e-4."""
    pytest.importorskip("peft", reason="the PEFT parity test needs peft (the parity extra)")
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from .hub_folders import gpt2_folder
    folder = gpt2_folder(str(tmp_path / "gpt2"), slow_tokenizer=False)
    gpt = TransformerGPT.from_huggingface(folder)
    gpt.add_lora(rank=4, alpha=8, targets=("c_attn", "c_proj", "c_fc"))
    assert sorted(n for _, n, _, _ in gpt.lora_places()) == sorted(["QKV", "W_O", "W1", "W2"]
                                                                   * 2)
    with_random_b(gpt)
    hub.write_adapter(gpt, str(tmp_path / "adapter"))
    hub.write_merged(gpt, str(tmp_path / "merged"))
    ids = torch.tensor([gpt.encode("the quick brown fox jumps over the lazy dog")])
    peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder),
                                     str(tmp_path / "adapter")).eval()
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged")).eval()
    theirs = get_peft_model(AutoModelForCausalLM.from_pretrained(folder), LoraConfig(
        r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True,
        init_lora_weights=False)).eval()
    theirs.save_pretrained(str(tmp_path / "their_adapter"))
    again = TransformerGPT.from_huggingface(folder, adapter=str(tmp_path / "their_adapter"))
    with torch.no_grad():
        ours = gpt(ids)
        assert_close(ours, peft(ids).logits)
        assert_close(ours, merged(ids).logits)
        with peft.disable_adapter():
            assert (ours - peft(ids).logits).abs().max() > 1e-2
        assert_close(again(ids), theirs(ids).logits)
