"""T5 (``T5ForConditionalGeneration``: T5 v1.0, v1.1 and Flan-T5) in TransformerPreLN: the
pre-LN encoder-decoder with final norms, no biases anywhere, and these differences, each a
switch of our classes:

    theirs                                   our switch
    RMSNorm without a bias (T5LayerNorm)     norm="rmsnorm", norm_eps
    a learned bias a head and bucket of      positions="t5" (relative_positions.T5Bias:
    offsets, one table a stack               one table a stack)
    scores q . k, not scaled by 1/sqrt(d_kv) score_scale=1
    heads d_kv wide (d_kv x heads may differ full_width_heads, head_size
    from d_model)
    ReLU feed-forward (v1.0); GELU-gated     feed_forward "relu" | "geglu" (gated_size),
    (v1.1, Flan-T5's "gated-gelu")           "gelu", "swiglu" ("gated-silu")
    words not scaled                         scale_embeddings=False
    one matrix for both sides' words         shared_vocab
    the output tied and its input scaled by  output_scale (scale_decoder_outputs); a folder
    d_model^-1/2 (v1.0); an lm_head of its   with lm_head.weight: own_output
    own, not scaled (v1.1, Flan-T5)
    <pad> = 0 starts the decoder, </s> = 1   start_id, end_id (from the folder)
"""

import torch

__all__ = ["ARCHITECTURES", "LAYOUT", "settings", "facts", "weights", "tokenizer",
           "vocab_sizes"]

ARCHITECTURES = ("T5ForConditionalGeneration",)
LAYOUT = "PreLN"                 # RMSNorm before each sublayer, a final norm a stack
#: feed_forward_proj -> (our feed_forward, its hidden width's setting)
FEED_FORWARDS = {"relu": ("relu", "feed_forward_size"), "gelu": ("gelu", "feed_forward_size"),
                 "gelu_new": ("gelu_tanh", "feed_forward_size"),
                 "gated-gelu": ("geglu", "gated_size"), "gated-gelu_new": ("geglu", "gated_size"),
                 "gated-silu": ("swiglu", "gated_size")}
#: A layer's sublayers, theirs (layer.k) and ours.
PARTS = {"encoder": (("SelfAttention", "self_attention", "norm1"), ("", "feed_forward", "norm2")),
         "decoder": (("SelfAttention", "self_attention", "norm1"),
                     ("EncDecAttention", "cross_attention", "norm2"),
                     ("", "feed_forward", "norm3"))}
NAMES = ("q", "k", "v", "o")


def settings(config, refused):
    """Our settings for a T5ForConditionalGeneration's config.json (what we cannot
    reproduce exactly appended to ``refused``, by name); the stacks' sizes under "stacks"."""
    proj = config["feed_forward_proj"]
    if proj not in FEED_FORWARDS:
        refused.append(f"feed_forward_proj {proj!r} (ours: {', '.join(FEED_FORWARDS)})")
    for name, ours in (("relative_attention_num_buckets", 32),
                       ("relative_attention_max_distance", 128)):
        if config[name] != ours:
            refused.append(f"{name} {config[name]} (T5Bias's: {ours})")
    feed_forward, width = FEED_FORWARDS.get(proj, ("relu", "feed_forward_size"))
    M = config["d_model"]
    return dict(embedding_size=M, full_width_heads=True, head_size=config["d_kv"],
                positions="t5", score_scale=1.0, norm="rmsnorm",
                norm_eps=config["layer_norm_epsilon"], feed_forward=feed_forward,
                **{width: config["d_ff"]}, scale_embeddings=False, shared_vocab=True,
                tie_embeddings=True, output_bias=False, own_output=config["own_output"],
                output_scale=M ** -0.5 if config["scale_decoder_outputs"] else None,
                stacks=dict(num_basic_encoders=config["num_layers"],
                            num_basic_decoders=config["num_decoder_layers"],
                            encoder_heads=config["num_heads"],
                            decoder_heads=config["num_heads"]))


def facts(config, hf):
    """The config with "own_output": the folder holds an lm_head.weight unequal to
    shared.weight (transformers then unties them, whatever the config says)."""
    head = hf.peek("lm_head.weight") if hf is not None else None
    own = head is not None and not torch.equal(head, hf.peek("shared.weight"))
    return dict(config, own_output=own)


def weights(hf, config, core):
    """T5's weights by our names, one at a time (``core``: the shared reader's helpers)."""
    shared = hf.pop("shared.weight", None)
    for stack in ("encoder", "decoder"):
        tied = hf.pop(f"{stack}.embed_tokens.weight", None)        # shared.weight again
        shared = tied if shared is None else shared
    yield "embeddings_generator_en.embedding.weight", shared
    for stack, ours in (("encoder", "encoder.basic_encoder_arr"),
                        ("decoder", "decoder.basic_decoder_arr")):
        yield f"{stack}.position_bias.table.weight", hf.pop(
            f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
        layers = config["num_layers" if stack == "encoder" else "num_decoder_layers"]
        for i in range(layers):
            for k, (theirs, mine, norm) in enumerate(PARTS[stack]):
                p, q = f"{stack}.block.{i}.layer.{k}.", f"{ours}.{i}."
                yield f"{q}{norm}.weight", hf.pop(f"{p}layer_norm.weight")
                if theirs:
                    yield from core.attention(hf, f"{p}{theirs}.", f"{q}{mine}.",
                                              config["num_heads"], NAMES)
                else:
                    yield from feed_forward(hf, f"{p}DenseReluDense.", f"{q}feed_forward.")
        yield f"{stack}.final_norm.weight", hf.pop(f"{stack}.final_layer_norm.weight")
    if config["own_output"]:
        yield "decoder.out.weight", hf.pop("lm_head.weight")
    else:
        hf.pop("lm_head.weight", None)                 # shared.weight again


def feed_forward(hf, theirs, ours):
    """wi, wo (ReLU, GELU), or wi_0 (the activation's), wi_1 (the gate's other half), wo."""
    if f"{theirs}wi.weight" in hf:           # (FolderWeights: by name)
        yield f"{ours}W1.weight", hf.pop(f"{theirs}wi.weight")
    else:
        yield f"{ours}W1.weight", hf.pop(f"{theirs}wi_0.weight")
        yield f"{ours}V.weight", hf.pop(f"{theirs}wi_1.weight")
    yield f"{ours}W2.weight", hf.pop(f"{theirs}wo.weight")


def tokenizer(path, config):
    """The folder's tokenizer.json, as transformers 5's T5Tokenizer reads it, for both
    sides."""
    from ...data.hub_translation import HubPair
    return HubPair.from_folder(path, config, config.get("n_positions") or 512)


def vocab_sizes(config):
    return config["vocab_size"], config["vocab_size"]
