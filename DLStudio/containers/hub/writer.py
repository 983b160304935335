"""Our GPT written as a folder transformers reads (save_to_huggingface.py): a
LlamaForCausalLM of our weights, with the tokenizer's files; every setting in the way is
refused by name, and nothing is written then."""

import json
import os

import torch

from ...data.hub_tokenizer import FolderError
from ...model.tokens import EOS_INDEX, SOS_INDEX
from .weights import halves_from_pairs

__all__ = ["write_folder", "refusals", "llama_folder_weights"]


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
    for name, flag in (("qk_norm", "--qk-norm"), ("window", "--window"),
                       ("nope_layers", "--nope-layers"), ("norm_placement", "--norm-placement"),
                       ("score_scale", "--score-scale")):
        if getattr(gpt, name, None):
            found.append(f"{name} {getattr(gpt, name)!r}: Llama has none (train without "
                         f"{flag})")
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

    from ...data.hub_export import tokenizer_files
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
