"""Marian (``MarianMTModel``: Helsinki-NLP's OPUS-MT) in TransformerFG: the 2017 post-LN
Transformer with full-width heads (W^O), biases everywhere, and these differences, each a
switch of our classes:

    theirs                                   our switch
    sines in the first half of the position  positions="sinusoidal_halves"
    code, cosines in the second
    words scaled by sqrt(M) (scale_embedding) scale_embeddings
    "swish" feed-forward                     feed_forward="silu"
    final_logits_bias                        the output layer's bias
    one matrix for both sides' words and the shared_vocab (else tie_embeddings: the
    output (share_encoder_decoder_embeddings) decoder's words and the output)
    </s> = 0, the decoder starts from <pad>  start_id, end_id (from the folder)
"""

__all__ = ["ARCHITECTURES", "LAYOUT", "ACTIVATIONS", "settings", "weights", "tokenizer",
           "vocab_sizes"]

ARCHITECTURES = ("MarianMTModel",)
LAYOUT = "FG"                 # LayerNorm after each residual sum
ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu",
               "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
#: A layer's parts, theirs and ours.
ATTENTIONS = (("self_attn", "self_attention"), ("encoder_attn", "cross_attention"))
NORMS = {"encoder": (("self_attn_layer_norm", "norm1"), ("final_layer_norm", "norm2")),
         "decoder": (("self_attn_layer_norm", "norm1"), ("encoder_attn_layer_norm", "norm2"),
                     ("final_layer_norm", "norm3"))}


def settings(config, refused):
    """Our settings for a MarianMTModel's config.json (what we cannot reproduce exactly
    appended to ``refused``, by name); the stacks' sizes under "stacks"."""
    act = config["activation_function"]
    if act not in ACTIVATIONS:
        refused.append(f"activation_function {act!r} (ours: {', '.join(ACTIVATIONS)})")
    if config["encoder_ffn_dim"] != config["decoder_ffn_dim"]:
        refused.append(f"encoder_ffn_dim {config['encoder_ffn_dim']} with decoder_ffn_dim "
                       f"{config['decoder_ffn_dim']} (one feed-forward width for both)")
    for name in ("normalize_before", "add_final_layer_norm", "normalize_embedding"):
        if config.get(name):                  # old fairseq-style layouts (not Marian's)
            refused.append(f"{name} true")
    shared = config["share_encoder_decoder_embeddings"]
    if shared and config["vocab_size"] != config["decoder_vocab_size"]:
        refused.append(f"shared embeddings of vocab_size {config['vocab_size']} and "
                       f"decoder_vocab_size {config['decoder_vocab_size']}")
    if shared and not config["tie_word_embeddings"]:
        refused.append("shared embeddings with an output layer of its own "
                       "(tie_word_embeddings false)")
    M = config["d_model"]
    return dict(embedding_size=M, full_width_heads=True, positions="sinusoidal_halves",
                feed_forward=ACTIVATIONS.get(act, "relu"),
                feed_forward_size=config["encoder_ffn_dim"],
                scale_embeddings=bool(config["scale_embedding"]), norm_eps=1e-5,
                shared_vocab=bool(shared), tie_embeddings=bool(config["tie_word_embeddings"]),
                stacks=dict(num_basic_encoders=config["encoder_layers"],
                            num_basic_decoders=config["decoder_layers"],
                            encoder_heads=config["encoder_attention_heads"],
                            decoder_heads=config["decoder_attention_heads"]))


def computed_positions(hf, stack, ours):
    """Marian's positions: a sinusoid, computed (the folder's copy of it is left)."""
    hf.pop(f"{stack}.embed_positions.weight", None)
    return ()


def weights(hf, config, core, per_stack=computed_positions):
    """Marian's weights by our names, one at a time (``core``: the shared reader's
    helpers, hub_seq2seq.heads_of; ``per_stack``: a stack's weights beside its layers, by
    our names: BART's learned positions and embedding norm, bart.py)."""
    hf = hf.renamed("model.")
    shared = config["share_encoder_decoder_embeddings"]
    words = {"en": hf.pop("encoder.embed_tokens.weight", None),
             "es": hf.pop("decoder.embed_tokens.weight", None)}
    table = hf.pop("shared.weight", None)
    if shared:
        yield "embeddings_generator_en.embedding.weight", \
            table if table is not None else words["en"]
    else:
        yield "embeddings_generator_en.embedding.weight", words["en"]
        yield "embeddings_generator_es.embedding.weight", words["es"]
    for stack in ("encoder", "decoder"):
        yield from per_stack(hf, stack, "embeddings_generator_" +
                             ("en" if stack == "encoder" else "es"))
        ours = "encoder.basic_encoder_arr" if stack == "encoder" else \
            "decoder.basic_decoder_arr"
        heads = config[f"{stack}_attention_heads"]
        for i in range(config[f"{stack}_layers"]):
            p, q = f"{stack}.layers.{i}.", f"{ours}.{i}."
            for theirs, mine in ATTENTIONS[:1 if stack == "encoder" else 2]:
                yield from core.attention(hf, p + theirs + ".", q + mine + ".", heads)
            for theirs, mine in (("fc1", "feed_forward.W1"), ("fc2", "feed_forward.W2"),
                                 *NORMS[stack]):
                for part in ("weight", "bias"):
                    yield f"{q}{mine}.{part}", hf.pop(f"{p}{theirs}.{part}")
    head = hf.pop("lm_head.weight", None)
    if head is not None and not config["tie_word_embeddings"]:
        yield "decoder.out.weight", head
    yield "decoder.out.bias", hf.pop("final_logits_bias").reshape(-1)


def tokenizer(path, config):
    """The folder's source.spm, target.spm and vocabularies (data/hub_translation.py)."""
    from ...data.hub_translation import SentencePiecePair
    return SentencePiecePair.from_folder(path, config)


def vocab_sizes(config):
    return config["vocab_size"], config["decoder_vocab_size"]
