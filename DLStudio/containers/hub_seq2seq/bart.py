"""BART (``BartForConditionalGeneration``) in TransformerFG: Marian's post-LN layout
(marian.py reads its layers) with one vocabulary for both sides and these differences, each
a switch of our classes:

    theirs                                   our switch
    a learned vector per position, its       positions="learned" (rows 2, 3, ... of theirs:
    table offset by 2                        position t is their row t + 2)
    a LayerNorm of each word + position      norm_embeddings
    (layernorm_embedding)
    exact GELU feed-forward                  feed_forward="gelu"
    final_logits_bias                        the output layer's bias
    <s> ... </s> around every text, the      the tokenizer's (HubPair), start_id, end_id;
    decoder starting from </s>, <s> forced   forced_bos_token_id (GenerationRules)
    after it
"""

from . import marian

__all__ = ["ARCHITECTURES", "LAYOUT", "OFFSET", "settings", "weights", "tokenizer",
           "vocab_sizes", "learned_positions"]

ARCHITECTURES = ("BartForConditionalGeneration",)
LAYOUT = "FG"
OFFSET = 2                       # BartLearnedPositionalEmbedding: position t is row t + 2


#: fairseq's layout fields old BART and mBART configs still carry; transformers reads none
#: of them (its BartConfig drops them: the layout is the class's).
FAIRSEQ_FIELDS = ("normalize_before", "add_final_layer_norm", "normalize_embedding")


def _as_marian(config):
    """The fields Marian's reader asks for, as BART has them (one vocabulary, shared)."""
    kept = {k: v for k, v in config.items() if k not in FAIRSEQ_FIELDS}
    return dict(kept, decoder_vocab_size=config["vocab_size"],
                share_encoder_decoder_embeddings=True)


def settings(config, refused):
    """Marian's settings of the same fields, with BART's positions and embedding norm."""
    ours = marian.settings(_as_marian(config), refused)
    return dict(ours, positions="learned", norm_embeddings=True)


def learned_positions(hf, stack, ours):
    """A stack's position table (its first two rows unread by BART) and its embedding
    norm, by our names."""
    table = hf.pop(f"{stack}.embed_positions.weight")
    yield f"{ours}.learned_positions", table[OFFSET:]
    for part in ("weight", "bias"):
        yield f"{ours}.norm.{part}", hf.pop(f"{stack}.layernorm_embedding.{part}")


def weights(hf, config, core):
    """Marian's reader of the same names, with BART's learned positions and norms."""
    yield from marian.weights(hf, _as_marian(config), core, per_stack=learned_positions)


def tokenizer(path, config, languages=None):
    """The folder's byte-level BPE (tokenizer.json, or vocab.json and merges.txt) as
    transformers 5's BartTokenizer reads it, for both sides (``languages``: mBART's)."""
    from ...data.hub_translation import HubPair
    return HubPair.from_folder(path, config, config["max_position_embeddings"], languages)


def vocab_sizes(config):
    return config["vocab_size"], config["vocab_size"]
