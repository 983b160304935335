"""mBART (``MBartForConditionalGeneration``) in TransformerPreLN: BART's parts (bart.py) in
the pre-LN layout, with a final norm a stack, and its tokenizer's language codes:

    theirs                                   our switch
    LayerNorm before each sublayer, a final  TransformerPreLN (MasterEncoder's and
    LayerNorm a stack (layer_norm)           MasterDecoderWithMasking's final_norm)
    BART's learned positions, embedding      positions="learned", norm_embeddings,
    norms, GELU, final_logits_bias           feed_forward="gelu", the output's bias
    words scaled by sqrt(M) where the        scale_embeddings
    config says (scale_embedding)
    "</s> en_XX" after the source, "</s>     the tokenizer's (HubPair: a side each); the
    es_XX" after the target; the decoder     decoder's start_id and forced_bos_token_id
    starts from the folder's start id        from the folder
"""

from . import bart

__all__ = ["ARCHITECTURES", "LAYOUT", "settings", "weights", "tokenizer", "vocab_sizes"]

ARCHITECTURES = ("MBartForConditionalGeneration",)
LAYOUT = "PreLN"


def settings(config, refused):
    """BART's settings of the same fields (the layout is the container's)."""
    return bart.settings(config, refused)


def positions_and_final_norm(hf, stack, ours):
    """BART's positions and embedding norm, and the stack's final LayerNorm."""
    yield from bart.learned_positions(hf, stack, ours)
    for part in ("weight", "bias"):
        yield f"{stack}.final_norm.{part}", hf.pop(f"{stack}.layer_norm.{part}")


def weights(hf, config, core):
    """Marian's reader of the same names, with mBART's positions and norms."""
    yield from bart.marian.weights(hf, bart._as_marian(config), core,
                                   per_stack=positions_and_final_norm)


def tokenizer(path, config, languages=None):
    """The folder's tokenizer.json as transformers 5's MBartTokenizer reads it, a side each
    (mBART-50's tokenizer, its code in front, is refused by name); ``languages``: the
    (source, target) codes over the folder's src_lang and tgt_lang."""
    from ...data.hub_tokenizer import MBART_LIKE, FolderError, read_json
    named = read_json(path, "tokenizer_config.json", required=False).get("tokenizer_class")
    if named not in MBART_LIKE:
        raise FolderError(f"{path}: an mBART folder's tokenizer we read is MBartTokenizer "
                          f"(the code after </s>), not {named}")
    return bart.tokenizer(path, config, languages)


vocab_sizes = bart.vocab_sizes
