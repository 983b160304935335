"""OLMo 2 (``Olmo2ForCausalLM``): Llama-shaped (llama.py) with its norms moved after the
sublayers, x + RMSNorm(Sublayer(x)) (``norm_placement="output"``), and RMSNorm on the
queries and keys of all heads at once, before the rotation (``qk_norm="all_heads"``; a
norm of H s_qkv numbers, keys G s_qkv). Both in model/since_2023.py."""

from . import llama

__all__ = ["ARCHITECTURES", "settings", "weights", "NORMS", "GAIN_IN_FP32", "TURN_IN_FP32"]

ARCHITECTURES = ("Olmo2ForCausalLM",)
GAIN_IN_FP32 = True       # its RMSNorm's gain multiplies before the rounding to bf16
TURN_IN_FP32 = True       # its rotary cos and sin stay fp32: q and k turned, then rounded
NORMS = (("post_attention_layernorm", "post_norm1"),
         ("post_feedforward_layernorm", "post_norm2"))


def settings(config, arch, refused):
    """Llama's settings of an OLMo 2 config, and its two switches."""
    if config.get("clip_qkv") is not None:
        refused.append(f"clip_qkv {config['clip_qkv']}")
    return dict(llama.settings(config, arch, refused), norm_placement="output",
                qk_norm="all_heads")


def weights(hf, config, settings):
    """Llama's weights with OLMo 2's norms: after each sublayer, none before."""
    return llama.weights(hf, config, settings, norms=NORMS)
