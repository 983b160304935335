"""A GPT's LoRAs (model/lora.py) written as PEFT writes an adapter, and read back:
``adapter_config.json`` and ``adapter_model.safetensors`` under PEFT's names, so that

    PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(FOLDER), ADAPTER)

gives the logits our adapted model gives; a translation model's (Marian's, read into
TransformerFG) as a SEQ_2_SEQ_LM adapter, for AutoModelForSeq2SeqLM. One A (r x in) and
one B (out x r) a projection, by Hugging Face's module names; the rows of B for W_Q and W_K
in the halves layout of a rotary folder (weights.halves_from_pairs: our heads turn
neighbouring pairs)."""

import json
import math
import os
import shutil

import torch

from ...data.hub_tokenizer import FolderError
from ...model.lora import HF_TARGETS
from .weights import halves_from_pairs, pairs_from_halves

__all__ = ["write_adapter", "adapter_weights", "read_adapter", "write_merged"]

OURS = {ours: theirs for theirs, ours in HF_TARGETS.items()}
MODULE = {"WQ": "self_attn", "WK": "self_attn", "WV": "self_attn", "W_O": "self_attn",
          "W1": "mlp", "V": "mlp", "W2": "mlp"}
#: GPT-2's modules (Conv1D: its weights stored transposed, PEFT's fan_in_fan_out).
GPT2 = {"QKV": "attn.c_attn", "W_O": "attn.c_proj", "W1": "mlp.c_fc", "W2": "mlp.c_proj"}
#: A translation model's modules (Marian's), in each encoder and decoder layer.
SEQ2SEQ = {"W1": "fc1", "W2": "fc2",
           **{f"{cross}{n}": f"{attn}.{p}" for cross, attn in (("", "self_attn"),
                                                               ("cross_", "encoder_attn"))
              for n, p in (("WQ", "q_proj"), ("WK", "k_proj"), ("WV", "v_proj"),
                           ("W_O", "out_proj"))}}
#: T5's modules: each layer's sublayers numbered (layer.0 self-attention, then the decoder's
#: layer.1 cross-attention, then the feed-forward network); wi_0 where it is gated.
T5 = {**{f"{cross}{n}": (attn, p) for cross, attn in (("", "SelfAttention"),
                                                      ("cross_", "EncDecAttention"))
         for n, p in (("WQ", "q"), ("WK", "k"), ("WV", "v"), ("W_O", "o"))},
      "W1": ("DenseReluDense", "wi"), "V": ("DenseReluDense", "wi_1"),
      "W2": ("DenseReluDense", "wo")}
SEQ2SEQ_ARCHITECTURES = ("MarianMTModel", "BartForConditionalGeneration",
                         "MBartForConditionalGeneration", "T5ForConditionalGeneration")


def _gpt2(gpt):
    return getattr(gpt, "folder_architecture", None) == "GPT2LMHeadModel"


def _seq2seq(model):
    return getattr(model, "folder_architecture", None) in SEQ2SEQ_ARCHITECTURES


def _module(gpt, i, name):
    """The folder's name of layer ``i``'s projection ``name`` (FolderError: it has none);
    a translation model counts its encoder's layers, then its decoder's."""
    if _seq2seq(gpt):
        first = len(gpt.encoder.basic_encoder_arr)
        stack, j = ("encoder", i) if i < first else ("decoder", i - first)
        if gpt.folder_architecture == "T5ForConditionalGeneration":
            return _t5_module(gpt, stack, j, name)
        if name not in SEQ2SEQ:
            raise FolderError(f"a {gpt.folder_architecture} has no one module for {name}: "
                              "target q_proj, k_proj, v_proj, out_proj, fc1, fc2")
        return f"model.{stack}.layers.{j}.{SEQ2SEQ[name]}"
    if _gpt2(gpt):
        if name not in GPT2:
            raise FolderError(f"GPT-2 has no {name} of its own (its W_Q, W_K, W_V are one "
                              "c_attn): target c_attn, c_proj, c_fc")
        return f"transformer.h.{i}.{GPT2[name]}"
    if name not in OURS:
        raise FolderError(f"this folder's model has no one module for {name}: target "
                          f"{', '.join(HF_TARGETS)}")
    return f"model.layers.{i}.{MODULE[name]}.{OURS[name]}"


def _t5_module(model, stack, j, name):
    """T5's name of a layer's projection (its sublayers counted: the decoder's feed-forward
    network is layer.2); a gated network's W1 is wi_0."""
    if name not in T5:
        raise FolderError(f"a T5 has no one module for {name}: target q, k, v, o, wi (or "
                          "wi_0, wi_1), wo")
    part, module = T5[name]
    at = {"SelfAttention": 0, "EncDecAttention": 1}.get(part, 1 if stack == "encoder" else 2)
    gated = hasattr(model.encoder.basic_encoder_arr[0].feed_forward, "V")
    module = "wi_0" if module == "wi" and gated else module
    return f"{stack}.block.{j}.layer.{at}.{part}.{module}"


def _theirs(gpt):
    """(the folder's module name, A, B in the folder's row order, the LoRA) of each LoRA."""
    rotary = getattr(gpt, "positions", None) == "rope"
    for i, name, lora, places in gpt.lora_places():
        B = lora.B.detach()
        if name in ("WQ", "WK") and rotary:               # rotary rows: back to halves
            B = halves_from_pairs(B, len(places))
        yield _module(gpt, i, name), lora.A.detach(), B, lora


def adapter_weights(gpt):
    """{PEFT's name: tensor} of every LoRA of ``gpt``."""
    out = {}
    for key, A, B, _ in _theirs(gpt):
        out[f"base_model.model.{key}.lora_A.weight"] = A
        out[f"base_model.model.{key}.lora_B.weight"] = B
    return {k: v.float().contiguous().clone() for k, v in out.items()}


def write_merged(gpt, out):
    """The folder ``gpt`` was read from, with its LoRAs folded into the weights they change,
    written at ``out`` in the folder's own architecture: every file copied, and in its
    weights (.safetensors, or pytorch_model.bin) each adapted projection W replaced by
    W + (alpha / r) B A (in W's dtype) under the file's own names (with the family's prefix
    or without), so that transformers reads it as it reads the folder, whatever the
    family."""
    base = getattr(gpt, "folder", None)
    if not base or not list(gpt.lora_places()):
        raise FolderError("write_merged needs a model read from a folder, with LoRA on it")
    if getattr(gpt, "lora_merged", False):
        raise FolderError("the LoRAs are merged into our weights already: unmerge_lora() "
                          "first (the folder's weights are the base)")
    if os.path.exists(out) and os.listdir(out):
        raise FolderError(f"{out} exists and is not empty: give a new folder")
    from safetensors.torch import load_file, save_file
    changes = {f"{key}.weight": lora.scale * (B.double() @ A.double())
               for key, A, B, lora in _theirs(gpt)}
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        if not os.path.isfile(path):
            continue
        torch_file = name.startswith("pytorch_model") and name.endswith(".bin")
        if not (name.endswith(".safetensors") or torch_file):
            shutil.copy2(path, os.path.join(out, name))
            continue
        tensors = torch.load(path, map_location="cpu", weights_only=True) if torch_file \
            else load_file(path)
        for key in list(changes):
            # the file's own names: with the family's prefix (transformer., model.) or not
            found = next((k for k in (key, key.split(".", 1)[1]) if k in tensors), None)
            if found is None:
                continue
            W, change = tensors[found], changes.pop(key)
            change = change.t() if _gpt2(gpt) else change      # Conv1D: W stored as (in, out)
            tensors[found] = (W.double() + change).to(W.dtype).contiguous()
        if torch_file:
            torch.save(tensors, os.path.join(out, name))
        else:
            save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
    if changes:
        shutil.rmtree(out)
        raise FolderError(f"{base}: its weights hold no {', '.join(sorted(changes)[:3])}: "
                          "the merged folder is not written")
    return out


def peft_alpha(places):
    """(lora_alpha, use_rslora) that make PEFT scale B A as our LoRAs do: alpha / r, or
    rsLoRA's alpha / sqrt(r) (a subclass's own scale), else the alpha whose alpha / r is
    that scale. Refused where the LoRAs differ in rank or scale (PEFT's patterns)."""
    kinds = {(lora.rank, lora.alpha, float(lora.scale)) for _, _, lora, _ in places}
    if len(kinds) > 1:
        raise FolderError("the LoRAs differ in rank or scale, which one adapter_config.json "
                          "cannot say: give every projection the same rank and alpha")
    (r, alpha, scale), = kinds
    if math.isclose(scale, alpha / r, rel_tol=1e-6):
        return alpha, False
    if math.isclose(scale, alpha / math.sqrt(r), rel_tol=1e-6):
        return alpha, True
    return scale * r, False


def write_adapter(gpt, out):
    """Write ``gpt``'s LoRAs at ``out`` as PEFT's adapter of its folder (``gpt.folder``)."""
    places = list(gpt.lora_places())
    if not places:
        raise FolderError("this model has no LoRA to write: add_lora() first")
    if getattr(gpt, "lora_merged", False):
        raise FolderError("the LoRAs are merged into the weights: unmerge_lora() first, or "
                          "write the merged model as a folder")
    if os.path.exists(out) and os.listdir(out):
        raise FolderError(f"{out} exists and is not empty: give a new folder")
    from safetensors.torch import save_file
    lora = places[0][2]
    alpha, rslora = peft_alpha(places)
    config = {"peft_type": "LORA", "r": lora.rank,
              "task_type": "SEQ_2_SEQ_LM" if _seq2seq(gpt) else "CAUSAL_LM",
              "lora_alpha": alpha, "lora_dropout": lora.dropout.p, "bias": "none",
              "target_modules": sorted({_module(gpt, 0, name).rsplit(".", 1)[1]
                                        for _, name, _, _ in places}),
              "fan_in_fan_out": _gpt2(gpt), "inference_mode": True, "use_rslora": rslora,
              "use_dora": False, "modules_to_save": None,
              "base_model_name_or_path": getattr(gpt, "folder", None)}
    os.makedirs(out, exist_ok=True)
    save_file(adapter_weights(gpt), os.path.join(out, "adapter_model.safetensors"),
              metadata={"format": "pt"})
    with open(os.path.join(out, "adapter_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return out



def read_adapter(gpt, path):
    """PEFT's LoRA adapter at ``path`` (adapter_config.json, adapter_model.safetensors) put
    on ``gpt`` (read from the adapter's base folder): `add_lora` with its rank, alpha and
    targets, then its A and B. What we cannot reproduce exactly is refused by name."""
    from ...data.hub_tokenizer import read_json
    if not os.path.isfile(os.path.join(path, "adapter_config.json")) and \
            os.path.isfile(os.path.join(path, "config.json")):
        raise FolderError(f"{path} is a model folder (config.json), not an adapter: an "
                          "adapter's folder holds adapter_config.json and "
                          "adapter_model.safetensors (finetune_lm.py --out DIR writes "
                          "DIR/adapter); read a model folder as the model itself")
    config = read_json(path, "adapter_config.json")
    expected = {"peft_type": "LORA", "fan_in_fan_out": _gpt2(gpt), "use_dora": False,
                "bias": "none"}
    refused = [f"{name} {config[name]!r}" for name, ours in expected.items()
               if name in config and config[name] != ours]
    refused += [f"{name} {config[name]!r}" for name in ("modules_to_save",
                "layers_to_transform", "rank_pattern", "alpha_pattern") if config.get(name)]
    targets = config.get("target_modules") or []
    if isinstance(targets, str) or not targets:
        refused.append(f"target_modules {targets!r} (a list of module names)")
    if refused:
        raise FolderError(f"{path}: an adapter with settings we cannot reproduce exactly: "
                          f"{'; '.join(refused)}. Nothing was loaded")
    file = os.path.join(path, "adapter_model.safetensors")
    if not os.path.isfile(file):
        raise FolderError(f"{path} has no adapter_model.safetensors")
    from safetensors.torch import load_file
    found = {k.replace(".default.", "."): v for k, v in load_file(file).items()}
    r, alpha = config["r"], config["lora_alpha"]
    scale = alpha / (math.sqrt(r) if config.get("use_rslora") else r)     # PEFT's
    gpt.add_lora(rank=r, alpha=alpha, targets=targets,
                 dropout=float(config.get("lora_dropout") or 0.0))
    base, pairs = config.get("base_model_name_or_path"), []
    for i, name, lora, places in gpt.lora_places():       # every shape checked, then copied
        key = f"base_model.model.{_module(gpt, i, name)}"
        A, B = found.pop(f"{key}.lora_A.weight", None), found.pop(f"{key}.lora_B.weight", None)
        missing = A is None or B is None
        if missing or A.shape != lora.A.shape or B.shape != lora.B.shape:
            gpt.remove_lora()                # B is still zero: the weights are as they were
            if missing:
                raise FolderError(f"{path}: adapter_model.safetensors has no {key}'s A and B")
            raise FolderError(
                f"{path} is an adapter of another model: its {key} is "
                f"{(B.shape[0], A.shape[1])} (out, in), this model's "
                f"{(lora.B.shape[0], lora.A.shape[1])}. It was made for "
                f"{base or 'a base it does not name'}; this model is "
                f"{getattr(gpt, 'folder', None) or 'not read from a folder'}: read the "
                "adapter onto its own base. Nothing was loaded")
        if name in ("WQ", "WK") and getattr(gpt, "positions", None) == "rope":
            B = pairs_from_halves(B, len(places))
        pairs.append((lora, A, B))
    with torch.no_grad():
        for lora, A, B in pairs:
            lora.A.copy_(A)
            lora.B.copy_(B)
            lora.scale = scale              # alpha / r, or rsLoRA's alpha / sqrt(r)
    if found:
        raise FolderError(f"{path}: no place in our model for {', '.join(sorted(found)[:4])}")
    return gpt
