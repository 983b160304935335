"""Compatibility module: DLStudio scripts say ``from Transformers import *``."""

from DLStudio.Transformers import (
    KeyValueCache,
    TransformerBase,
    TransformerBERT,
    TransformerFG,
    TransformerGPT,
    TransformerParts,
    TransformerPreLN,
    causal_mask,
    padding_mask,
    residual,
    scaled_dot_product,
    visTransformer,
)

__all__ = ["TransformerFG", "TransformerPreLN", "TransformerGPT", "TransformerBERT",
           "visTransformer", "TransformerBase", "TransformerParts", "KeyValueCache",
           "scaled_dot_product", "residual", "padding_mask", "causal_mask"]
