"""Qwen2 (``Qwen2ForCausalLM``) and Qwen3 (``Qwen3ForCausalLM``): Llama-shaped (llama.py),
Qwen2 with biases on W_Q, W_K, W_V, Qwen3 with RMSNorm on each head's queries and keys
before the rotation (``qk_norm``, since_2023.py) and a head width of its own (``head_dim``,
often not M / H)."""

from . import llama

__all__ = ["ARCHITECTURES", "settings", "weights"]

ARCHITECTURES = ("Qwen2ForCausalLM", "Qwen3ForCausalLM")


def settings(config, arch, refused):
    """Llama's settings, and Qwen3's QK-norm. Qwen's window is there only with
    ``use_sliding_window`` (transformers reads ``sliding_window`` as None otherwise)."""
    if not config.get("use_sliding_window"):
        config = dict(config, sliding_window=None)
    return dict(llama.settings(config, arch, refused),
                qk_norm=arch == "Qwen3ForCausalLM")


weights = llama.weights            # q_norm, k_norm are taken where the folder has them
