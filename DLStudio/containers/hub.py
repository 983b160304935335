"""Real language models in our classes: a Hugging Face folder of GPT-2, Llama (SmolLM2,
Llama 3.x, TinyLlama) or Qwen2 read into a TransformerGPT built of the architecture's own
nested classes (`read_folder`), and a TransformerGPT written back as a folder transformers
reads (`write_folder`). No second implementation: every config field maps to one of our
settings (`settings_of`), every weight to one of our parameters (`gpt2_weights`,
`llama_weights`); what we cannot reproduce exactly is refused by name, every such setting
at once.

The two rotary layouts. Our RotaryEmbedding turns neighbouring pairs (x_2i, x_2i+1), as
the RoFormer paper and Meta's first Llama code do. Hugging Face's Llama turns the two
halves of a head, (x_i, x_i+d/2) (``rotate_half``), and its converter reordered the rows of
W_Q and W_K to match. A dot product q . k does not change when q and k are reordered
alike, so we reorder those rows back (`pairs_from_halves`) and the model keeps one
RotaryEmbedding; the writer reorders them the other way. Miss it and the logits are right
at position 0 (no turn) and drift further from the first token on.
"""

import json
import os

import torch

from ..data.hub_tokenizer import FolderError, HubTokenizer, read_json
from ..runtime.studio import DLStudio

__all__ = ["read_folder", "write_folder", "settings_of", "pairs_from_halves",
           "halves_from_pairs", "hf_weights", "FolderError", "ARCHITECTURES"]

#: What we read, and what we refuse (with the reason) among the hub's best-known others.
ARCHITECTURES = ("GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM")
OTHERS = {"Qwen3ForCausalLM": "RMSNorm on each head's queries and keys (q_norm, k_norm)",
          "MistralForCausalLM": "a sliding attention window",
          "MixtralForCausalLM": "a mixture of experts",
          "Qwen2MoeForCausalLM": "a mixture of experts",
          "GemmaForCausalLM": "embeddings scaled by sqrt(M) and RMSNorm with 1 + g",
          "Gemma2ForCausalLM": "logit soft-capping and sliding windows",
          "Phi3ForCausalLM": "fused projections with a sliding window"}
GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                    "gelu": "gelu", "relu": "relu"}


def _rope(config, refused):
    """rope_base and rope_scaling from either layout: the hub's (``rope_theta``,
    ``rope_scaling``) or transformers 5's (``rope_parameters``)."""
    from ..model.since_2017 import ROPE_SCALINGS
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    base = rope.pop("rope_theta", config.get("rope_theta", 10000.0))
    kind = rope.pop("rope_type", rope.pop("type", "default"))
    if config.get("partial_rotary_factor", 1.0) != 1.0:
        refused.append(f"partial_rotary_factor {config['partial_rotary_factor']}")
    if kind in (None, "default"):
        return float(base), None
    if kind not in ROPE_SCALINGS:
        refused.append(f"rope_scaling of type {kind!r} (ours: {', '.join(ROPE_SCALINGS)})")
        return float(base), None
    return float(base), {"rope_type": kind, **rope}


def settings_of(config, path="the folder"):
    """Our TransformerGPT settings for a folder's config.json, or FolderError naming every
    setting we cannot reproduce exactly."""
    arch = (config.get("architectures") or ["(none)"])[0]
    if arch not in ARCHITECTURES:
        why = f" ({OTHERS[arch]})" if arch in OTHERS else ""
        raise FolderError(f"{path}: its architecture {arch}{why} is not one we read; we read "
                          f"{', '.join(ARCHITECTURES)}")
    refused = []
    if arch == "GPT2LMHeadModel":
        M = config["n_embd"]
        act = config.get("activation_function", "gelu_new")
        for name, value, ours in (("scale_attn_by_inverse_layer_idx", True, False),
                                  ("scale_attn_weights", False, True),
                                  ("add_cross_attention", True, False)):
            if config.get(name, ours) == value:
                refused.append(f"{name} {value}")
        if act not in GPT2_ACTIVATIONS:
            refused.append(f"activation_function {act!r}")
        settings = dict(embedding_size=M, num_basic_decoders=config["n_layer"],
                        num_atten_heads=config["n_head"], full_width_heads=True,
                        max_seq_length=config["n_positions"], positions="learned",
                        feed_forward=GPT2_ACTIVATIONS.get(act, "gelu"),
                        feed_forward_size=config.get("n_inner") or 4 * M,
                        norm_eps=config.get("layer_norm_epsilon", 1e-5),
                        tie_embeddings=config.get("tie_word_embeddings", True))
    else:
        M, H = config["hidden_size"], config["num_attention_heads"]
        G = config.get("num_key_value_heads") or H
        head = config.get("head_dim") or M // H
        if config.get("hidden_act", "silu") != "silu":
            refused.append(f"hidden_act {config['hidden_act']!r} (SwiGLU needs 'silu')")
        if config.get("use_sliding_window") or "sliding_attention" in (
                config.get("layer_types") or ()):
            refused.append("use_sliding_window (a sliding attention window)")
        base, scaling = _rope(config, refused)
        settings = dict(embedding_size=M, num_basic_decoders=config["num_hidden_layers"],
                        num_atten_heads=H, full_width_heads=True,
                        kv_heads=None if G == H else G,
                        head_size=None if head == M // H else head,
                        max_seq_length=config["max_position_embeddings"], positions="rope",
                        rope_base=base, rope_scaling=scaling, norm="rmsnorm",
                        norm_eps=config.get("rms_norm_eps", 1e-6), feed_forward="swiglu",
                        gated_size=config["intermediate_size"],
                        tie_embeddings=config.get("tie_word_embeddings", False))
    if refused:
        raise FolderError(f"{path}: {arch} with settings we cannot reproduce exactly: "
                          f"{'; '.join(refused)}. Nothing was loaded")
    return dict(settings, layout="PreLN", output_bias=False, scale_embeddings=False,
                dropout=0.0)


def hf_weights(path):
    """A folder's weights by Hugging Face's names: model.safetensors, its shards
    (model.safetensors.index.json), or pytorch_model.bin (read weights only: no code runs)."""
    from safetensors.torch import load_file
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        shards = sorted(set(read_json(path, "model.safetensors.index.json")["weight_map"]
                            .values()))
        weights = {}
        for shard in shards:
            weights.update(load_file(os.path.join(path, os.path.basename(shard))))
        return weights
    for name in ("model.safetensors", "pytorch_model.bin"):
        file = os.path.join(path, name)
        if os.path.isfile(file):
            return (load_file(file) if name.endswith("safetensors")
                    else torch.load(file, map_location="cpu", weights_only=True))
    raise FolderError(f"{path} holds no weights: model.safetensors, its shards "
                      "(model.safetensors.index.json) or pytorch_model.bin")


def pairs_from_halves(W, heads):
    """Rows of W_Q or W_K (or their biases) from Hugging Face's halves layout to our pairs:
    in each head of d rows, our row 2i is its row i and our row 2i + 1 its row i + d/2.
    Shape: (heads d, ...) -> (heads d, ...)"""
    d = W.size(0) // heads
    order = torch.arange(d).view(2, d // 2).t().reshape(-1)        # 0, d/2, 1, d/2 + 1, ...
    return W.view(heads, d, *W.shape[1:])[:, order].reshape(W.shape)


def halves_from_pairs(W, heads):
    """The inverse of `pairs_from_halves` (for writing a folder)."""
    d = W.size(0) // heads
    order = torch.arange(d).view(2, d // 2).t().reshape(-1)
    return W.view(heads, d, *W.shape[1:])[:, torch.argsort(order)].reshape(W.shape)


def _heads(prefix, name, W, heads, group=1):
    """Our per-head names for a (heads s, ...) matrix or bias: head g's rows go to head
    g * group (a key/value head is its group's first query head's W_K, W_V)."""
    kind = "weight" if W.dim() == 2 else "bias"
    s = W.size(0) // heads
    return {f"{prefix}heads.{g * group}.{name}.{kind}": W[g * s:(g + 1) * s]
            for g in range(heads)}


def gpt2_weights(hf, config):
    """GPT-2's weights by our names (Conv1D stores W transposed: x @ W + b)."""
    hf = {k.removeprefix("transformer."): v for k, v in hf.items()}
    M, H = config["n_embd"], config["n_head"]
    ours = {"embeddings_generator.embedding.weight": hf.pop("wte.weight"),
            "embeddings_generator.learned_positions": hf.pop("wpe.weight")}
    for part in ("weight", "bias"):
        ours[f"master_decoder.final_norm.{part}"] = hf.pop(f"ln_f.{part}")
    for i in range(config["n_layer"]):
        p, q = f"h.{i}.", f"master_decoder.basic_decoder_arr.{i}."
        for name in ("attn.bias", "attn.masked_bias"):      # the causal mask, as a buffer
            hf.pop(p + name, None)
        W, b = hf.pop(p + "attn.c_attn.weight").t(), hf.pop(p + "attn.c_attn.bias")
        for j, name in enumerate(("WQ", "WK", "WV")):
            ours.update(_heads(q + "self_attention.", name, W[j * M:(j + 1) * M], H))
            ours.update(_heads(q + "self_attention.", name, b[j * M:(j + 1) * M], H))
        for theirs, mine, conv in (("attn.c_proj", "self_attention.W_O", True),
                                   ("mlp.c_fc", "feed_forward.W1", True),
                                   ("mlp.c_proj", "feed_forward.W2", True),
                                   ("ln_1", "norm1", False), ("ln_2", "norm2", False)):
            W = hf.pop(f"{p}{theirs}.weight")
            ours[f"{q}{mine}.weight"] = W.t() if conv else W
            ours[f"{q}{mine}.bias"] = hf.pop(f"{p}{theirs}.bias")
    head = hf.pop("lm_head.weight", None)
    if head is not None and not config.get("tie_word_embeddings", True):
        ours["master_decoder.out.weight"] = head
    return ours, sorted(hf)


def llama_weights(hf, config, settings):
    """Llama's and Qwen2's weights by our names; W_Q, W_K rows into our rotary pairs.
    A bias the folder lacks (attention_bias, mlp_bias false) is zero: the same arithmetic."""
    hf = {k.removeprefix("model."): v for k, v in hf.items()}
    H = config["num_attention_heads"]
    G = settings["kv_heads"] or H
    ours = {"embeddings_generator.embedding.weight": hf.pop("embed_tokens.weight"),
            "master_decoder.final_norm.weight": hf.pop("norm.weight")}
    for i in range(config["num_hidden_layers"]):
        p, q = f"layers.{i}.", f"master_decoder.basic_decoder_arr.{i}."
        hf.pop(p + "self_attn.rotary_emb.inv_freq", None)            # a buffer, recomputed
        for theirs, mine, heads, turned in (("q_proj", "WQ", H, True), ("k_proj", "WK", G, True),
                                            ("v_proj", "WV", G, False)):
            for kind in ("weight", "bias"):
                W = hf.pop(f"{p}self_attn.{theirs}.{kind}", None)
                if W is None:
                    continue
                W = pairs_from_halves(W, heads) if turned else W
                ours.update(_heads(q + "self_attention.", mine, W, heads, H // heads))
        for theirs, mine in (("self_attn.o_proj", "self_attention.W_O"),
                             ("mlp.gate_proj", "feed_forward.W1"),
                             ("mlp.up_proj", "feed_forward.V"),
                             ("mlp.down_proj", "feed_forward.W2"),
                             ("input_layernorm", "norm1"),
                             ("post_attention_layernorm", "norm2")):
            for kind in ("weight", "bias"):
                W = hf.pop(f"{p}{theirs}.{kind}", None)
                if W is not None:
                    ours[f"{q}{mine}.{kind}"] = W
    head = hf.pop("lm_head.weight", None)
    if head is not None and not settings["tie_embeddings"]:
        ours["master_decoder.out.weight"] = head
    return ours, sorted(hf)


def read_folder(cls, path, dl_studio=None, dtype=None):
    """A TransformerGPT (``cls``: a subclass's nested classes are used) of a Hugging Face
    folder, in eval mode, its weights in ``dtype`` (float32 or bfloat16)."""
    if not os.path.isdir(path):
        raise FolderError(f"{path} is not a folder: give the folder a model was downloaded "
                          "to (docs/real_models.md says how)")
    config = read_json(path, "config.json")
    settings = settings_of(config, path)
    tokenizer = HubTokenizer.from_folder(path, config)
    weights = hf_weights(path)
    reader = gpt2_weights if "n_embd" in config else (
        lambda w, c: llama_weights(w, c, settings))
    theirs, left = reader(weights, config)
    if left:
        raise FolderError(f"{path}: no place in our classes for {', '.join(left[:4])}"
                          f"{' ...' if len(left) > 4 else ''}. Nothing was loaded")
    dls = dl_studio or DLStudio(seed=None)
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype or torch.float32)     # built in the dtype asked: one copy
    try:
        gpt = cls(dl_studio=dls, vocab=tokenizer, tokenizer="hub", **settings)
    finally:
        torch.set_default_dtype(before)
    _place(gpt, theirs, path)
    gpt.folder, gpt.generation_config = path, read_json(path, "generation_config.json",
                                                        required=False)
    return gpt.to(dls.device).eval()


def _place(gpt, theirs, path):
    """Copy each weight into our parameter of that name; a bias the folder has none of is
    zero; any other parameter left without a weight is refused by name."""
    mine = gpt.state_dict()
    placed = set()
    with torch.no_grad():
        for name, tensor in theirs.items():
            if name not in mine or mine[name].shape != tensor.shape:
                raise FolderError(f"{path}: a weight of shape {tuple(tensor.shape)} does not "
                                  f"fit our {name} "
                                  f"{tuple(mine[name].shape) if name in mine else '(none)'}")
            mine[name].copy_(tensor)
            placed.add(mine[name].data_ptr())
        missing = []
        for name, tensor in mine.items():
            if tensor.data_ptr() in placed:
                continue
            if name.endswith(".bias"):
                tensor.zero_()
            else:
                missing.append(name)
            placed.add(tensor.data_ptr())
    if missing:
        raise FolderError(f"{path} has no weights for {', '.join(missing[:4])}")


# ------------------------------------------------------------------------------------------
# Writing our GPT as a folder transformers reads (save_to_huggingface.py).

def refusals(gpt):
    """Every setting of ``gpt`` in the way of a LlamaForCausalLM folder (empty: none)."""
    found = []
    if not gpt.norm_first:
        found.append("post-LN (layout FG): Llama is pre-LN (--layout PreLN)")
    for name, wanted, flag in (("norm", "rmsnorm", "--norm rmsnorm"),
                               ("positions", "rope", "--positions rope"),
                               ("feed_forward", "swiglu", "--feed-forward swiglu")):
        if getattr(gpt, name) != wanted:
            found.append(f"{name} {getattr(gpt, name)!r}: Llama's is {wanted!r} ({flag})")
    if not gpt.full_width_heads:
        found.append("DLStudio's sliced heads: Llama's heads read all of M "
                     "(--full-width-heads)")
    if gpt.output_bias:
        found.append("a bias on the output layer: Llama has none (--no-output-bias)")
    if gpt.vocab.kind == "word":
        found.append("a word-level tokenizer: a folder's is byte-level BPE (--tokenizer bpe)")
    if gpt.rope_scaling and gpt.rope_scaling.get("rope_type") not in ("linear", "llama3"):
        found.append(f"rope_scaling {gpt.rope_scaling}")
    return found


def _llama_config(gpt):
    M, H = gpt.embedding_size, gpt.num_atten_heads
    attention = gpt.master_decoder.basic_decoder_arr[0].self_attention
    rope = {"rope_type": "default", "rope_theta": gpt.rope_base, **(gpt.rope_scaling or {})}
    vocab = gpt.vocab
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": gpt.num_tokens(), "hidden_size": M, "num_attention_heads": H,
            "num_key_value_heads": H // attention.group, "head_dim": attention.qkv_size,
            "num_hidden_layers": gpt.num_basic_decoders,
            "intermediate_size": gpt.master_decoder.basic_decoder_arr[0].feed_forward.W1
            .out_features, "hidden_act": "silu", "rms_norm_eps": gpt.norm_eps,
            "max_position_embeddings": gpt.max_seq_length, "rope_theta": gpt.rope_base,
            "rope_scaling": None if not gpt.rope_scaling else rope,
            "attention_bias": True, "mlp_bias": True,
            "tie_word_embeddings": bool(gpt.tie_embeddings and not gpt.scale_embeddings),
            "bos_token_id": getattr(vocab, "start_id", 0),
            "eos_token_id": list(getattr(vocab, "end_ids", ())) or 1,
            "torch_dtype": "float32", "initializer_range": 0.02, "pretraining_tp": 1,
            "attention_dropout": 0.0, "use_cache": True}


def llama_folder_weights(gpt):
    """Our GPT's weights by Llama's names (rows of W_Q, W_K into the halves layout; the
    sqrt(M) scaling of the embeddings folded into them, the output layer then its own)."""
    out = {}
    words = gpt.embeddings_generator.embedding.weight.detach()
    out["model.embed_tokens.weight"] = words * gpt.embeddings_generator.scale
    if not (gpt.tie_embeddings and not gpt.scale_embeddings):
        out["lm_head.weight"] = gpt.master_decoder.out.weight.detach()
    out["model.norm.weight"] = gpt.master_decoder.final_norm.weight.detach()
    for i, layer in enumerate(gpt.master_decoder.basic_decoder_arr):
        p, sa = f"model.layers.{i}.", layer.self_attention
        kv = list(sa.heads)[::sa.group]
        for theirs, name, heads, turned in (("q_proj", "WQ", list(sa.heads), True),
                                            ("k_proj", "WK", kv, True),
                                            ("v_proj", "WV", kv, False)):
            for kind in ("weight", "bias"):
                W = torch.cat([getattr(getattr(h, name), kind).detach() for h in heads])
                out[f"{p}self_attn.{theirs}.{kind}"] = (halves_from_pairs(W, len(heads))
                                                        if turned else W)
        ff = layer.feed_forward
        for theirs, module in (("self_attn.o_proj", sa.W_O), ("mlp.gate_proj", ff.W1),
                               ("mlp.up_proj", ff.V), ("mlp.down_proj", ff.W2)):
            out[f"{p}{theirs}.weight"] = module.weight.detach()
            out[f"{p}{theirs}.bias"] = module.bias.detach()
        out[f"{p}input_layernorm.weight"] = layer.norm1.weight.detach()
        out[f"{p}post_attention_layernorm.weight"] = layer.norm2.weight.detach()
    return {k: v.float().contiguous().clone() for k, v in out.items()}


def write_folder(gpt, out):
    """Write ``gpt`` as a LlamaForCausalLM folder at ``out`` (config.json, model.safetensors,
    generation_config.json, tokenizer.json, tokenizer_config.json). Raises FolderError naming
    every setting in the way; nothing is written then."""
    found = refusals(gpt)
    if found:
        raise FolderError("this GPT cannot be written as a LlamaForCausalLM folder: "
                          + "; ".join(found) + ". Nothing was written")
    if os.path.exists(out) and os.listdir(out):
        raise FolderError(f"{out} exists and is not empty: give a new folder")
    from safetensors.torch import save_file

    from ..data.hub_export import tokenizer_files
    files = tokenizer_files(gpt)
    weights = llama_folder_weights(gpt)
    config = _llama_config(gpt)
    os.makedirs(out, exist_ok=True)
    save_file(weights, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    files["config.json"] = config
    files["generation_config.json"] = {"bos_token_id": config["bos_token_id"],
                                       "eos_token_id": config["eos_token_id"]}
    for name, content in files.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            if isinstance(content, str):
                f.write(content)
            else:
                json.dump(content, f, indent=2, ensure_ascii=False)
    return out
