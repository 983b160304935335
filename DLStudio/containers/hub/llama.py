"""Llama (``LlamaForCausalLM``: Llama 2 and 3.x, SmolLM2, TinyLlama) and the families that are
Llama with one switch more: Mistral (``MistralForCausalLM``: a sliding window) and SmolLM3
(``SmolLM3ForCausalLM``: layers without rotary positions). RMSNorm before each sublayer,
rotary positions, SwiGLU, grouped-query attention; Qwen's families read through here too
(qwen.py)."""

from .weights import heads_of, pairs_from_halves

__all__ = ["ARCHITECTURES", "settings", "weights", "rope", "window", "NORMS"]

ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "SmolLM3ForCausalLM")
#: A layer's norms, theirs and ours: Llama's before each sublayer (pre-LN).
NORMS = (("input_layernorm", "norm1"), ("post_attention_layernorm", "norm2"))


def rope(config, refused):
    """rope_base and rope_scaling from either layout: the hub's (``rope_theta``,
    ``rope_scaling``) or transformers 5's (``rope_parameters``)."""
    from ...model.since_2017 import ROPE_SCALINGS
    found = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    base = found.pop("rope_theta", None) or config["rope_theta"]
    kind = found.pop("rope_type", found.pop("type", "default"))
    if config.get("partial_rotary_factor", 1.0) != 1.0:
        refused.append(f"partial_rotary_factor {config['partial_rotary_factor']}")
    if kind in (None, "default"):
        return float(base), None
    if kind not in ROPE_SCALINGS:
        refused.append(f"rope_scaling of type {kind!r} (ours: {', '.join(ROPE_SCALINGS)})")
        return float(base), None
    if kind == "llama3":      # as transformers: a top-level field wins over the dict's
        top = config.get("original_max_position_embeddings")
        if top is not None:
            found["original_max_position_embeddings"] = top
        found.setdefault("original_max_position_embeddings", config["max_position_embeddings"])
    return float(base), {"rope_type": kind, **found}


def window(config, arch, refused):
    """The sliding window and the layers that slide (since_2023.windowed, per_layer): (W,
    None) when every layer slides, (None, None) when none. Mistral slides on every layer when
    ``sliding_window`` is set; the others say which layers slide in ``layer_types`` (or, in
    Qwen's older configs, from ``max_window_layers`` on)."""
    size, layers = config.get("sliding_window"), config["num_hidden_layers"]
    if arch == "MistralForCausalLM":                  # no layer_types: all layers, or none
        types = ["sliding_attention" if size else "full_attention"] * layers
    else:
        types = config.get("layer_types")
        if types is None:
            first = config.get("max_window_layers", layers)      # Qwen's older configs
            types = ["sliding_attention" if size is not None and i >= first
                     else "full_attention" for i in range(layers)]
    types = list(types)[:layers]
    unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
    if unknown:
        refused.append(f"layer_types {', '.join(unknown)}")
    sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    if not sliding:
        return None, None
    if not size:
        refused.append("sliding layers without a sliding_window")
    return size or None, None if len(sliding) == layers else sliding


def settings(config, arch, refused):
    """Our settings for a Llama-shaped config.json (what we cannot reproduce exactly
    appended to ``refused``, by name)."""
    M, H = config["hidden_size"], config["num_attention_heads"]
    G, head = config["num_key_value_heads"], config["head_dim"]    # defaults.py derives both
    if config["hidden_act"] != "silu":
        refused.append(f"hidden_act {config['hidden_act']!r} (SwiGLU needs 'silu')")
    base, scaling = rope(config, refused)
    uses_rope = config.get("no_rope_layers") or [1] * config["num_hidden_layers"]   # SmolLM3
    size, sliding = window(config, arch, refused)
    return dict(embedding_size=M, num_basic_decoders=config["num_hidden_layers"],
                num_atten_heads=H, full_width_heads=True, kv_heads=None if G == H else G,
                head_size=None if head == M // H else head,
                max_seq_length=config["max_position_embeddings"], positions="rope",
                rope_base=base, rope_scaling=scaling, norm="rmsnorm",
                norm_eps=config["rms_norm_eps"], feed_forward="swiglu",
                gated_size=config["intermediate_size"],
                tie_embeddings=config["tie_word_embeddings"],
                window=size, window_layers=sliding,
                nope_layers=tuple(i for i, turned in enumerate(
                    uses_rope[:config["num_hidden_layers"]]) if not turned))


def weights(hf, config, settings, norms=NORMS):
    """A Llama-shaped folder's weights by our names, one at a time; W_Q, W_K rows (and the
    q_norm, k_norm gains: a head's, or all heads') into our rotary pairs. A bias the folder
    lacks (attention_bias, mlp_bias false) is zero: the same arithmetic. ``norms``: the
    family's layer norms, theirs and ours."""
    hf = hf.renamed("model.")
    H = config["num_attention_heads"]
    G = settings["kv_heads"] or H
    s = settings["head_size"] or config["hidden_size"] // H
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
                    yield from heads_of(q + "self_attention.", mine, W, heads, H // heads)
        for name in ("q_norm", "k_norm"):             # QK-norm: a gain per number of a head
            W = hf.pop(f"{p}self_attn.{name}.weight", None)
            if W is not None:
                yield f"{q}self_attention.{name}.weight", pairs_from_halves(W, W.numel() // s)
        for theirs, mine in (("self_attn.o_proj", "self_attention.W_O"),
                             ("mlp.gate_proj", "feed_forward.W1"),
                             ("mlp.up_proj", "feed_forward.V"),
                             ("mlp.down_proj", "feed_forward.W2"), *norms):
            for kind in ("weight", "bias"):
                W = hf.pop(f"{p}{theirs}.{kind}", None)
                if W is not None:
                    yield f"{q}{mine}.{kind}", W
    head = hf.pop("lm_head.weight", None)
    if head is not None and not settings["tie_embeddings"]:
        yield "master_decoder.out.weight", head
