"""Adapters that say what they are: a LoRA subclass's own scale (rsLoRA's alpha / sqrt(r), or
any other) written so that PEFT and our own reader compute it, an adapter of another base
refused naming both, a model folder given as an adapter said to be one, a merged folder in
its source's own layout. The transformers and PEFT comparisons need the parity extra."""

import json
import math

import pytest
import torch

from DLStudio.containers import hub
from DLStudio.Transformers import TransformerGPT

from .close import assert_close
from .hub_folders import llama_folder
from .test_lora import ALL, IDS, llama_gpt, with_random_b


class RsLoRA(TransformerGPT.LoRA):                     # rank-stabilised: alpha / sqrt(r)
    def __init__(self, in_size, out_size, rank=8, alpha=16):
        super().__init__(in_size, out_size, rank, alpha)
        self.scale = alpha / math.sqrt(rank)


class OwnScale(TransformerGPT.LoRA):                   # a scale of its own: 1.5
    def __init__(self, in_size, out_size, rank=8, alpha=16):
        super().__init__(in_size, out_size, rank, alpha)
        self.scale = 1.5


def with_class(lora_class):
    return type("Mine", (TransformerGPT,), {"LoRA": lora_class})


@pytest.mark.parametrize("lora_class, alpha, rslora", [(RsLoRA, 8, True), (OwnScale, 6.0, False),
                                                       (TransformerGPT.LoRA, 8, False)])
def test_a_subclasss_scale_is_written_as_peft_computes_it_and_read_back(tmp_path, lora_class,
                                                                         alpha, rslora):
    gpt = llama_gpt(with_class(lora_class))
    gpt.add_lora(rank=4, alpha=8, targets=ALL)
    with_random_b(gpt)
    hub.write_adapter(gpt, str(tmp_path / "a"))
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert (config["lora_alpha"], config["use_rslora"]) == (alpha, rslora)
    peft_scale = alpha / (math.sqrt(4) if rslora else 4)
    assert all(math.isclose(lora.scale, peft_scale) for _, _, lora, _ in gpt.lora_places())
    again = hub.read_adapter(llama_gpt(), str(tmp_path / "a"))         # a plain LoRA class
    with torch.no_grad():
        assert_close(again(IDS), gpt(IDS))


def test_loras_of_different_scales_are_refused_before_anything_is_written(tmp_path):
    gpt = llama_gpt()
    gpt.add_lora(rank=4, alpha=8, targets=ALL)
    next(gpt.lora_places())[2].scale = 5.0
    with pytest.raises(hub.FolderError, match="differ in rank or scale"):
        hub.write_adapter(gpt, str(tmp_path / "a"))
    assert not (tmp_path / "a").exists()


def test_an_adapter_of_another_base_is_refused_naming_both(tmp_path):
    small = llama_gpt()
    small.add_lora(rank=4, targets=ALL)
    hub.write_adapter(with_random_b(small), str(tmp_path / "a"))
    config = tmp_path / "a" / "adapter_config.json"
    config.write_text(json.dumps(dict(json.loads(config.read_text()),
                                      base_model_name_or_path="models/small-llama")))
    other = llama_gpt(gated_size=64)                        # another feed-forward width
    with torch.no_grad():
        before = other(IDS)
    with pytest.raises(hub.FolderError, match=r"another model: .*_proj is \(\d+, \d+\) "
                       r"\(out, in\), this model's \((64, 32|32, 64)\). It was made for "
                       "models/small-llama; this model is not read from a folder"):
        hub.read_adapter(other, str(tmp_path / "a"))
    assert not list(other.lora_places())                          # nothing was loaded
    with torch.no_grad():
        assert torch.equal(other(IDS), before)


def test_a_model_folder_given_as_an_adapter_is_said_to_be_one(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(hub.FolderError, match="is a model folder .*not an adapter"):
        hub.read_adapter(llama_gpt(), str(tmp_path))


@pytest.mark.slow
def test_peft_reads_an_rslora_adapter_of_ours_with_our_logits(tmp_path):
    pytest.importorskip("peft", reason="the PEFT parity test needs peft (the parity extra)")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    folder = llama_folder(str(tmp_path / "llama"))
    for lora_class in (RsLoRA, OwnScale):
        gpt = with_class(lora_class).from_huggingface(folder)
        gpt.add_lora(rank=4, alpha=8, targets=ALL)
        with_random_b(gpt)
        out = tmp_path / lora_class.__name__
        hub.write_adapter(gpt, str(out))
        peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder),
                                         str(out)).eval()
        ids = torch.tensor([gpt.encode("the quick brown fox jumps over the lazy dog")])
        with torch.no_grad():
            assert_close(gpt(ids), peft(ids).logits, what=lora_class.__name__)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["names without transformer.", "pytorch_model.bin"])
def test_a_gpt2_folder_laid_out_otherwise_is_merged_in_its_own_layout(tmp_path, layout):
    """A GPT-2 folder whose weights have no ``transformer.`` prefix, or come as
    pytorch_model.bin alone: the merged folder keeps that layout, and transformers reads it
    with our adapted model's logits."""
    pytest.importorskip("transformers", reason="needs transformers (the parity extra)")
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    from .hub_folders import gpt2_folder
    folder = tmp_path / "gpt2"
    gpt2_folder(str(folder), slow_tokenizer=False)
    weights = load_file(folder / "model.safetensors")
    if layout == "pytorch_model.bin":
        (folder / "model.safetensors").unlink()
        torch.save(weights, folder / "pytorch_model.bin")
    else:
        save_file({k.removeprefix("transformer."): v for k, v in weights.items()},
                  folder / "model.safetensors", metadata={"format": "pt"})
    gpt = TransformerGPT.from_huggingface(str(folder))
    gpt.add_lora(rank=4, alpha=8, targets=("c_attn", "c_proj", "c_fc"))
    with_random_b(gpt)
    hub.write_merged(gpt, str(tmp_path / "merged"))
    assert sorted(p.name for p in (tmp_path / "merged").iterdir()) == \
        sorted(p.name for p in folder.iterdir())
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    ids = torch.tensor([gpt.encode("the quick brown fox jumps over the lazy dog")])
    with torch.no_grad():
        assert_close(gpt(ids), merged(ids).logits, what=layout)
