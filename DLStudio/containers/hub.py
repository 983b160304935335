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
from ..model.tokens import EOS_INDEX, SOS_INDEX
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
    if kind == "llama3":      # as transformers: the config's own, else its context length
        rope.setdefault("original_max_position_embeddings", config.get(
            "original_max_position_embeddings", config.get("max_position_embeddings")))
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


class FolderWeights:
    """A folder's weights by Hugging Face's names, each read from its file only when it is
    taken (`pop`), so that reading a model holds our model and one of its tensors at a time,
    not a second copy of the whole: model.safetensors, its shards
    (model.safetensors.index.json), or pytorch_model.bin (tensors only: no code runs;
    memory-mapped)."""

    def __init__(self, path):
        self.path, self.files, self.where = path, {}, {}
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.isfile(index):
            shards = read_json(path, "model.safetensors.index.json")["weight_map"].values()
        elif os.path.isfile(os.path.join(path, "model.safetensors")):
            shards = ["model.safetensors"]
        elif os.path.isfile(os.path.join(path, "pytorch_model.bin")):
            file = os.path.join(path, "pytorch_model.bin")
            try:
                self.loaded = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:                         # an old file, not a zip: read whole
                self.loaded = torch.load(file, map_location="cpu", weights_only=True)
            self.where = {name: (None, name) for name in self.loaded}
            return
        else:
            raise FolderError(f"{path} holds no weights: model.safetensors, its shards "
                              "(model.safetensors.index.json) or pytorch_model.bin")
        for shard in sorted(set(shards)):
            self.files[shard] = header = safetensors_header(
                os.path.join(path, os.path.basename(shard)))
            self.where.update({name: (shard, name) for name in header
                               if name not in ("__metadata__", "__start__")})

    def renamed(self, prefix):
        """The same weights, ``prefix`` taken off their names."""
        self.where = {k.removeprefix(prefix): v for k, v in self.where.items()}
        return self

    def pop(self, name, *default):
        if name not in self.where:
            if default:
                return default[0]
            raise FolderError(f"{self.path} has no weight {name}")
        shard, original = self.where.pop(name)             # (its file, its name there)
        if shard is None:
            return self.loaded.pop(original)
        return read_tensor(os.path.join(self.path, os.path.basename(shard)),
                           self.files[shard], original)

    def left(self):
        return sorted(self.where)


#: safetensors' names of the tensor types a model folder holds.
SAFETENSORS_TYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                     "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
                     "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                     "BOOL": torch.bool}


def safetensors_header(file):
    """A .safetensors file's table of contents: {name: {"dtype", "shape", "data_offsets"}}
    (an 8-byte little-endian length, then that much JSON; the tensors follow)."""
    with open(file, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 0 < size <= min(100 << 20, os.path.getsize(file) - 8):
            raise FolderError(f"{file} is not a safetensors file (its header says {size} "
                              "bytes)")
        header = json.loads(f.read(size))
    header["__start__"] = 8 + size
    return header


def read_tensor(file, header, name):
    """One tensor of a .safetensors file, read alone (no memory map: the whole file is
    never held, so reading a model costs our model plus its largest tensor)."""
    entry, start = header[name], header["__start__"]
    begin, end = entry["data_offsets"]
    with open(file, "rb") as f:
        f.seek(start + begin)
        data = bytearray(f.read(end - begin))
    dtype = SAFETENSORS_TYPES.get(entry["dtype"])
    if dtype is None:
        raise FolderError(f"{file}: {name} is of type {entry['dtype']}, which we do not read")
    return torch.frombuffer(data, dtype=dtype).reshape(entry["shape"]) if data else \
        torch.empty(entry["shape"], dtype=dtype)


def hf_weights(path):
    """A folder's weights (`FolderWeights`), read as they are taken."""
    return FolderWeights(path)


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
    for g in range(heads):
        yield f"{prefix}heads.{g * group}.{name}.{kind}", W[g * s:(g + 1) * s]


def gpt2_weights(hf, config):
    """GPT-2's weights by our names, one at a time (Conv1D stores W transposed: x @ W + b)."""
    hf = hf.renamed("transformer.")
    M, H = config["n_embd"], config["n_head"]
    yield "embeddings_generator.embedding.weight", hf.pop("wte.weight")
    yield "embeddings_generator.learned_positions", hf.pop("wpe.weight")
    for part in ("weight", "bias"):
        yield f"master_decoder.final_norm.{part}", hf.pop(f"ln_f.{part}")
    for i in range(config["n_layer"]):
        p, q = f"h.{i}.", f"master_decoder.basic_decoder_arr.{i}."
        for name in ("attn.bias", "attn.masked_bias"):      # the causal mask, as a buffer
            hf.pop(p + name, None)
        W, b = hf.pop(p + "attn.c_attn.weight").t(), hf.pop(p + "attn.c_attn.bias")
        for j, name in enumerate(("WQ", "WK", "WV")):
            yield from _heads(q + "self_attention.", name, W[j * M:(j + 1) * M], H)
            yield from _heads(q + "self_attention.", name, b[j * M:(j + 1) * M], H)
        for theirs, mine, conv in (("attn.c_proj", "self_attention.W_O", True),
                                   ("mlp.c_fc", "feed_forward.W1", True),
                                   ("mlp.c_proj", "feed_forward.W2", True),
                                   ("ln_1", "norm1", False), ("ln_2", "norm2", False)):
            W = hf.pop(f"{p}{theirs}.weight")
            yield f"{q}{mine}.weight", W.t() if conv else W
            yield f"{q}{mine}.bias", hf.pop(f"{p}{theirs}.bias")
    head = hf.pop("lm_head.weight", None)
    if head is not None and not config.get("tie_word_embeddings", True):
        yield "master_decoder.out.weight", head


def llama_weights(hf, config, settings):
    """Llama's and Qwen2's weights by our names, one at a time; W_Q, W_K rows into our
    rotary pairs. A bias the folder lacks (attention_bias, mlp_bias false) is zero: the
    same arithmetic."""
    hf = hf.renamed("model.")
    H = config["num_attention_heads"]
    G = settings["kv_heads"] or H
    yield "embeddings_generator.embedding.weight", hf.pop("embed_tokens.weight")
    yield "master_decoder.final_norm.weight", hf.pop("norm.weight")
    for i in range(config["num_hidden_layers"]):
        p, q = f"layers.{i}.", f"master_decoder.basic_decoder_arr.{i}."
        hf.pop(p + "self_attn.rotary_emb.inv_freq", None)            # a buffer, recomputed
        for theirs, mine, heads, turned in (("q_proj", "WQ", H, True), ("k_proj", "WK", G, True),
                                            ("v_proj", "WV", G, False)):
            for kind in ("weight", "bias"):
                W = hf.pop(f"{p}self_attn.{theirs}.{kind}", None)
                if W is not None:
                    W = pairs_from_halves(W, heads) if turned else W
                    yield from _heads(q + "self_attention.", mine, W, heads, H // heads)
        for theirs, mine in (("self_attn.o_proj", "self_attention.W_O"),
                             ("mlp.gate_proj", "feed_forward.W1"),
                             ("mlp.up_proj", "feed_forward.V"),
                             ("mlp.down_proj", "feed_forward.W2"),
                             ("input_layernorm", "norm1"),
                             ("post_attention_layernorm", "norm2")):
            for kind in ("weight", "bias"):
                W = hf.pop(f"{p}{theirs}.{kind}", None)
                if W is not None:
                    yield f"{q}{mine}.{kind}", W
    head = hf.pop("lm_head.weight", None)
    if head is not None and not settings["tie_embeddings"]:
        yield "master_decoder.out.weight", head


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
    dls = dl_studio or DLStudio(seed=None)
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype or torch.float32)     # built in the dtype asked: one copy
    try:
        gpt = cls(dl_studio=dls, vocab=tokenizer, tokenizer="hub", **settings)
    finally:
        torch.set_default_dtype(before)
    reader = gpt2_weights(weights, config) if "n_embd" in config else \
        llama_weights(weights, config, settings)
    _place(gpt, reader, path)
    left = weights.left()
    if left:
        raise FolderError(f"{path}: no place in our classes for {', '.join(left[:4])}"
                          f"{' ...' if len(left) > 4 else ''}. Nothing was loaded")
    gpt.folder, gpt.generation_config = path, read_json(path, "generation_config.json",
                                                        required=False)
    for layer in gpt.master_decoder.basic_decoder_arr:   # bf16 on a CPU: transformers' kernel
        layer.self_attention.fused_cpu_bf16 = True
    return gpt.to(dls.device).eval()


def _place(gpt, theirs, path):
    """Copy each (name, weight) of ``theirs`` into our parameter of that name; a bias the
    folder has none of is zero; any other parameter left without a weight is refused by
    name."""
    mine = gpt.state_dict()
    placed = set()
    with torch.no_grad():
        for name, tensor in theirs:
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


def _special_ids(vocab):
    """bos_token_id and eos_token_id for a folder of ``vocab``: a folder's own as it named
    them (None where it named none), our tokenizers' SOS and EOS."""
    if vocab.kind == "hub":
        ends = list(vocab.end_ids)
        return {"bos_token_id": vocab.start_id,
                "eos_token_id": ends[0] if len(ends) == 1 else (ends or None)}
    return {"bos_token_id": SOS_INDEX, "eos_token_id": EOS_INDEX}


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
            **_special_ids(vocab),
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
