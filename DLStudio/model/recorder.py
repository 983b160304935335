"""The attention recorder: every attention module keeps its weights for one pass, for the
pictures of attention (torch only, beside the architecture)."""

__all__ = ["record_attention"]


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
