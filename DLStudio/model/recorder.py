"""The attention recorder: every attention module keeps its weights for one pass, for the
pictures of attention (torch only, beside the architecture)."""

import torch

__all__ = ["record_attention", "translation_maps", "TranslationRecords"]


def record_attention(attentions, run):
    """Run ``run()`` with every attention module (and head) keeping its weights; return
    them, one (B, H, T_q, T_k) tensor per module, rows summing to 1."""
    parts = [m for a in attentions for m in (a, *a.heads)]
    for m in parts:
        m.record_attention = True
    try:
        run()
        maps = [a.attention_weights for a in attentions]
    finally:
        for m in parts:
            m.record_attention, m.attention_weights = False, None
    if any(weights is None for weights in maps):
        raise ValueError(f"no attention weights from {type(attentions[0].heads[0]).__qualname__}"
                         ": a head's own forward hands them to self.keep_weights(weights)")
    return maps


def translation_maps(model, src, tgt):
    """The attention weights of one teacher-forced pass of a translation model (for plots).
    Shape: src, tgt -> {"encoder", "decoder_self", "cross"}: lists (a layer each) of
    (B, H, T_q, T_k) weights; each row sums to 1 and masked positions are exactly 0."""
    layers = model.decoder.basic_decoder_arr
    kinds = {"encoder": [e.self_attention for e in model.encoder.basic_encoder_arr],
             "decoder_self": [d.self_attention for d in layers],
             "cross": [d.cross_attention for d in layers]}
    with torch.no_grad():
        maps = iter(record_attention(sum(kinds.values(), []), lambda: model(src, tgt)))
    return {kind: [next(maps) for _ in attentions] for kind, attentions in kinds.items()}


class TranslationRecords:
    """What the translation model (architecture.EncoderDecoder) tells beside its arithmetic:
    its attention maps, the parts a checkpoint keeps by DLStudio's names, and its sizes."""

    spec = {}        # the container's part of a checkpoint (DLStudio.Transformers)

    def attention_maps(self, src, tgt):
        """The attention weights of one teacher-forced pass (for plots): `translation_maps`."""
        return translation_maps(self, src, tgt)

    def parts(self):
        """The parts whose weights a checkpoint keeps, by DLStudio's names."""
        return {"embeddings_generator_en": self.embeddings_generator_en,
                "embeddings_generator_es": self.embeddings_generator_es,
                "encoder": self.encoder, "decoder": self.decoder}

    def description(self):
        """The stacks' sizes, and (``spec``) what its container adds to a checkpoint."""
        enc, dec = self.encoder, self.decoder
        return dict(self.spec, encoder_config={"num_basic_encoders": enc.num_basic_encoders,
                                               "num_atten_heads": enc.num_atten_heads},
                    decoder_config={"num_basic_decoders": dec.num_basic_decoders,
                                    "num_atten_heads": dec.num_atten_heads,
                                    "masking": dec.masking})
