"""Gemma 3 (``Gemma3ForCausalLM``, the text models: 270M, 1B): Llama-shaped (llama.py) with
Gemma's changes, each a switch of our classes (model/since_2023.py):

    theirs                                        ours
    RMSNorm with gain 1 + w                       norm="rmsnorm_plus_one"
    four norms a layer: before and after both     norm_placement="sandwich"
      sublayers
    gelu_pytorch_tanh gating the up projection    feed_forward="geglu"
    embeddings times sqrt(M)                      scale_embeddings (in the model's dtype)
    scores times query_pre_attn_scalar^-1/2       score_scale
    q_norm, k_norm over a head                    qk_norm=True
    layer_types: sliding and full layers (5:1),   window, window_layers, window_rope_base
      rope_parameters for each kind               (the full layers': rope_base, rope_scaling)
"""

from . import llama

__all__ = ["ARCHITECTURES", "settings", "weights", "NORMS", "GAIN_IN_FP32"]

ARCHITECTURES = ("Gemma3ForCausalLM",)
GAIN_IN_FP32 = True       # its RMSNorm's gain multiplies before the rounding to bf16
NORMS = (("input_layernorm", "norm1"), ("post_attention_layernorm", "post_norm1"),
         ("pre_feedforward_layernorm", "norm2"), ("post_feedforward_layernorm", "post_norm2"))
GELU_TANH = ("gelu_pytorch_tanh", "gelu_new", "gelu_tanh")


def rope_of_layers(config, refused):
    """(the full layers' rope fields, the sliding layers' base) from either layout:
    transformers 5's ``rope_parameters`` by layer type, or the hub's ``rope_theta``,
    ``rope_scaling`` and ``rope_local_base_freq``."""
    found = config.get("rope_parameters") or {}
    if "full_attention" in found or "sliding_attention" in found:
        full = dict(found.get("full_attention") or {})
        local = dict(found.get("sliding_attention") or {})
    else:
        full = dict(config.get("rope_scaling") or {},
                    rope_theta=config.get("rope_theta", 1_000_000.0))
        local = {"rope_theta": config.get("rope_local_base_freq", 10_000.0)}
    full.setdefault("rope_theta", 1_000_000.0)
    if local.get("rope_type", "default") != "default":
        refused.append(f"rope scaling on the sliding layers ({local['rope_type']!r})")
    return full, float(local.get("rope_theta", 10_000.0))


def settings(config, arch, refused):
    """Llama's settings of a Gemma 3 config, and Gemma's switches."""
    act = config["hidden_activation"]              # its model reads this one, not hidden_act
    if act not in GELU_TANH:
        refused.append(f"hidden_activation {act!r} (GEGLU here is GELU's tanh form)")
    for name in ("attn_logit_softcapping", "final_logit_softcapping"):
        if config.get(name) is not None:
            refused.append(f"{name} {config[name]}")
    if config.get("use_bidirectional_attention"):
        refused.append("use_bidirectional_attention (a causal model is what we read)")
    layers = config["num_hidden_layers"]
    pattern = config["sliding_window_pattern"]
    types = config.get("layer_types") or [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
    full, local_base = rope_of_layers(config, refused)
    llama_config = dict(config, hidden_act="silu", rope_parameters=full, layer_types=types)
    return dict(llama.settings(llama_config, arch, refused), norm="rmsnorm_plus_one",
                norm_placement="sandwich", feed_forward="geglu", scale_embeddings=True,
                qk_norm=True, score_scale=config["query_pre_attn_scalar"] ** -0.5,
                window_rope_base=local_base)


def weights(hf, config, settings):
    """Llama's weights with Gemma's four norms a layer."""
    return llama.weights(hf, config, settings, norms=NORMS)
