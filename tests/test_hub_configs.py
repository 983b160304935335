"""Folders as the hub writes them: a config.json that leaves a field out means its config
class's default (containers/hub/defaults.py), a top-level field wins where transformers gives
it priority, a tied config whose file holds an output layer of its own keeps that matrix, a
BERT decoder is refused. The settings are checked without transformers; the folders, made
by transformers and then stripped of the fields, are compared with transformers reading the
same folder (the parity extra: make test-all)."""

import json

import pytest
import torch

from DLStudio.containers import hub
from DLStudio.data.hub_tokenizer import FolderError
from DLStudio.evaluation.generation import generate
from DLStudio.Transformers import TransformerGPT
from tests.hub_folders import VARIED, llama_folder

from .close import assert_close


def config_of(arch="LlamaForCausalLM", **fields):
    base = {"architectures": [arch], "hidden_size": 64, "num_attention_heads": 4,
            "num_hidden_layers": 8, "intermediate_size": 96, "max_position_embeddings": 64,
            "vocab_size": 300}
    return {k: v for k, v in dict(base, **fields).items() if v is not None}


#: (architecture, what the config leaves out or sets, our setting: the config class's value)
LEFT_OUT = [
    ("SmolLM3ForCausalLM", {}, "nope_layers", (3, 7)),              # every 4th layer
    ("SmolLM3ForCausalLM", {"no_rope_layer_interval": 2}, "nope_layers", (1, 3, 5, 7)),
    ("SmolLM3ForCausalLM", {}, "tie_embeddings", True),
    ("SmolLM3ForCausalLM", {}, "rope_base", 2_000_000.0),
    ("MistralForCausalLM", {}, "window", 4096),
    ("MistralForCausalLM", {"sliding_window": "null"}, "window", None),
    ("Qwen2ForCausalLM", {"use_sliding_window": True, "num_hidden_layers": 30},
     "window_layers", (28, 29)),                                      # max_window_layers 28
    ("Qwen3ForCausalLM", {"use_sliding_window": True}, "window", None),   # 8 < 28 layers
    ("Qwen3ForCausalLM", {}, "head_size", 128),
    ("Gemma3ForCausalLM", {}, "head_size", 256),
    ("Gemma3ForCausalLM", {}, "window", 4096),
    ("Olmo2ForCausalLM", {}, "norm_eps", 1e-5),
    ("LlamaForCausalLM", {}, "norm_eps", 1e-6),
    ("LlamaForCausalLM", {}, "head_size", None),                    # M / H: Llama 2's configs
    ("LlamaForCausalLM", {"num_key_value_heads": "null"}, "kv_heads", None),
    ("GPT2LMHeadModel", {"n_embd": 64, "n_head": 4, "n_layer": 2}, "norm_eps", 1e-5),
    ("GPT2LMHeadModel", {"n_embd": 64, "n_head": 4, "n_layer": 2}, "max_seq_length", 1024),
]


@pytest.mark.parametrize("arch, fields, setting, expected", LEFT_OUT)
def test_a_field_left_out_is_its_config_classs_default(arch, fields, setting, expected):
    fields = {k: (None if v == "null" else v) for k, v in fields.items()}
    config = config_of(arch, **{k: v for k, v in fields.items() if v is not None})
    config.update({k: None for k, v in fields.items() if v is None})    # present, as null
    if arch == "GPT2LMHeadModel":
        config = {k: v for k, v in config.items() if not k.startswith(("hidden_", "num_",
                  "intermediate", "max_position"))}
    assert hub.settings_of(config)[setting] == expected


def test_the_top_level_original_context_wins_over_the_rope_dicts():
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    config = config_of(rope_scaling=scaling, original_max_position_embeddings=16)
    assert hub.settings_of(config)["rope_scaling"]["original_max_position_embeddings"] == 16
    config.pop("original_max_position_embeddings")
    assert hub.settings_of(config)["rope_scaling"]["original_max_position_embeddings"] == 32
    del scaling["original_max_position_embeddings"]
    assert hub.settings_of(config_of(rope_scaling=scaling))["rope_scaling"][
        "original_max_position_embeddings"] == 64                     # the context length


# ---------------------------------------------------------------------------------------
# The same folders read by transformers (the parity extra).
def stripped(path, *fields, **changes):
    """The folder's config.json without ``fields`` (as the hub writes a default), with
    ``changes``."""
    file = path / "config.json"
    config = json.loads(file.read_text())
    for name in fields:
        config.pop(name, None)
    config.update(changes)
    file.write_text(json.dumps(config))
    return path


#: A folder made by transformers, then the fields taken out of its config.
CASES = {
    "smollm3 without no_rope_layers": (dict(kind="smollm3", num_hidden_layers=4,
                                            no_rope_layers=[1, 1, 1, 0]), ["no_rope_layers"]),
    "smollm3 without tie_word_embeddings": (dict(kind="smollm3"), ["tie_word_embeddings"]),
    "olmo2 without rms_norm_eps": (dict(kind="olmo2", rms_norm_eps=1e-5), ["rms_norm_eps"]),
    "qwen3 without head_dim": (dict(kind="qwen3", head_dim=128), ["head_dim"]),
    "gemma3 without head_dim": (dict(kind="gemma3", head_dim=256, query_pre_attn_scalar=256,
                                     std=0.1), ["head_dim"]),
    "llama without head_dim": (dict(kind="llama"), ["head_dim"]),
    "qwen2 sliding without max_window_layers": (dict(
        kind="qwen2", use_sliding_window=True, sliding_window=5, max_window_layers=28),
        ["max_window_layers", "layer_types"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_a_folder_with_fields_left_out_is_transformers_token_for_token(tmp_path, name):
    pytest.importorskip("transformers", reason="the parity tests need transformers")
    from transformers import AutoModelForCausalLM
    made, fields = CASES[name]
    folder = stripped(llama_folder(tmp_path, **made), *fields)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    gpt = TransformerGPT.from_huggingface(str(folder))
    ids = torch.tensor([gpt.encode(" ".join(VARIED[:9]))[:60]])
    with torch.no_grad():
        assert_close(gpt(ids), model(ids).logits, what=name)
        prompt = ids[:, :8]
        expected = model.generate(prompt, max_new_tokens=24, min_new_tokens=24,
                                  do_sample=False, eos_token_id=None, pad_token_id=0,
                                  attention_mask=torch.ones_like(prompt))
    assert torch.equal(generate(gpt, prompt, max_new_tokens=24, end_ids=(-1,)), expected)


@pytest.mark.slow
def test_the_top_level_original_context_is_transformers(tmp_path):
    pytest.importorskip("transformers", reason="the parity tests need transformers")
    from transformers import AutoModelForCausalLM
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    folder = llama_folder(tmp_path, rope_scaling=scaling, rope_theta=500000.0)
    config = json.loads((folder and tmp_path / "config.json").read_text())
    rope = config.pop("rope_parameters", None) or dict(config.pop("rope_scaling"),
                                                       rope_theta=config.pop("rope_theta"))
    config.update(rope_theta=rope.pop("rope_theta"), rope_scaling=rope,
                  original_max_position_embeddings=8)
    (tmp_path / "config.json").write_text(json.dumps(config))
    model = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    gpt = TransformerGPT.from_huggingface(str(tmp_path))
    ids = torch.arange(3, 90).view(1, -1)
    with torch.no_grad():
        assert_close(gpt(ids), model(ids).logits)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_a_tied_config_with_an_output_layer_of_its_own_keeps_the_files(tmp_path, kind):
    """transformers 5 keeps a file's lm_head.weight where the config says tied: so do we."""
    pytest.importorskip("transformers", reason="the parity tests need transformers")
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    from tests.hub_folders import gpt2_folder
    folder = (gpt2_folder if kind == "gpt2" else llama_folder)(str(tmp_path))
    weights = load_file(tmp_path / "model.safetensors")
    words = weights["transformer.wte.weight" if kind == "gpt2" else "model.embed_tokens.weight"]
    weights["lm_head.weight"] = torch.randn(words.shape, generator=torch.Generator()
                                            .manual_seed(3)) * 0.3
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    assert json.loads((tmp_path / "config.json").read_text()).get("tie_word_embeddings", True)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    gpt = TransformerGPT.from_huggingface(str(folder))
    ids = torch.tensor([gpt.encode("the quick brown fox jumps over the lazy dog")])
    with torch.no_grad():
        assert_close(gpt(ids), model(ids).logits)


def test_a_bert_decoder_is_refused_by_name(tmp_path):
    from DLStudio.checkpoints import CheckpointError
    from DLStudio.Transformers import TransformerBERT
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["BertLMHeadModel"], "is_decoder": True, "hidden_size": 32,
        "num_attention_heads": 4, "num_hidden_layers": 1, "intermediate_size": 64,
        "max_position_embeddings": 32, "vocab_size": 30}))
    with pytest.raises(CheckpointError, match="BERT decoder.*BertLMHeadModel.*encoder's folder"):
        TransformerBERT.from_huggingface(str(tmp_path))


def test_a_folder_error_for_a_field_we_cannot_reproduce_still_names_it():
    with pytest.raises(FolderError, match="partial_rotary_factor"):
        hub.settings_of(config_of(partial_rotary_factor=0.5))
