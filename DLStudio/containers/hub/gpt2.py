"""GPT-2 (``GPT2LMHeadModel``, Radford et al. 2019): learned positions, LayerNorm, GELU
(tanh), one fused W_Q W_K W_V matrix per layer stored transposed (Conv1D)."""

from .weights import heads_of

__all__ = ["ARCHITECTURES", "settings", "weights", "ACTIVATIONS"]

ARCHITECTURES = ("GPT2LMHeadModel",)
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
               "relu": "relu"}


def settings(config, arch, refused):
    """Our settings for a GPT2LMHeadModel's config.json (what we cannot reproduce exactly
    appended to ``refused``, by name)."""
    M = config["n_embd"]
    act = config["activation_function"]
    for name, value in (("scale_attn_by_inverse_layer_idx", True),
                        ("scale_attn_weights", False), ("add_cross_attention", True)):
        if config[name] == value:
            refused.append(f"{name} {value}")
    if act not in ACTIVATIONS:
        refused.append(f"activation_function {act!r}")
    return dict(embedding_size=M, num_basic_decoders=config["n_layer"],
                num_atten_heads=config["n_head"], full_width_heads=True,
                max_seq_length=config["n_positions"], positions="learned",
                feed_forward=ACTIVATIONS.get(act, "gelu"),
                feed_forward_size=config.get("n_inner") or 4 * M,
                norm_eps=config["layer_norm_epsilon"],
                tie_embeddings=config["tie_word_embeddings"])


def weights(hf, config, settings):
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
            yield from heads_of(q + "self_attention.", name, W[j * M:(j + 1) * M], H)
            yield from heads_of(q + "self_attention.", name, b[j * M:(j + 1) * M], H)
        for theirs, mine, conv in (("attn.c_proj", "self_attention.W_O", True),
                                   ("mlp.c_fc", "feed_forward.W1", True),
                                   ("mlp.c_proj", "feed_forward.W2", True),
                                   ("ln_1", "norm1", False), ("ln_2", "norm2", False)):
            W = hf.pop(f"{p}{theirs}.weight")
            yield f"{q}{mine}.weight", W.t() if conv else W
            yield f"{q}{mine}.bias", hf.pop(f"{p}{theirs}.bias")
    head = hf.pop("lm_head.weight", None)
    if head is not None and not settings["tie_embeddings"]:
        yield "master_decoder.out.weight", head
