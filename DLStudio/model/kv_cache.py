"""The key/value cache of word-by-word decoding, as its own small object.

While a translation is decoded one word at a time, each attention module of the decoder
holds a `KeyValueCache`: self-attention appends the newest word's keys and values to those
of the earlier words, cross-attention computes the memory's once. During training the
modules hold `NO_CACHE`, which keeps nothing, so the training path has no branch for it.
"""

import contextlib

import torch

from .overrides import own_code, say_once
from .quantize import Quantizing

__all__ = ["KeyValueCache", "NO_CACHE", "attached", "attached_if_valid", "attached_to_decoder",
           "TranslationDecoding", "GPTDecoding"]


class KeyValueCache:
    """What one attention module keeps while a translation is decoded word by word, so that
    each step computes the newest word only. Attached by `EncoderDecoder.decoding`
    (architecture.py); during training the attention modules hold `NO_CACHE`, which keeps nothing.

        extend(K, V)    self-attention: the earlier words' keys and values, then the newest's
        once(compute)   cross-attention: the memory's keys and values, computed at step one
        weights(...)    the heads' W_Q, W_K, W_V stacked once for all steps
        select(rows)    go on with these rows (a finished sentence, a beam's reordering)
        keep(n)         the first n words only; widened(mask): new words' mask over all keys
    ``of_memory`` says which kind it holds: a beam's hypotheses of one sentence share the
    memory, so reordering them leaves the memory's keys and values as they are.
    """

    def __init__(self):
        self.K = self.V = None
        self.stacked = {}
        self.of_memory = False

    @property
    def length(self):
        """How many words' keys and values it holds: the newest word's position (RoPE)."""
        return 0 if self.K is None else self.K.size(2)

    def extend(self, K, V):
        if self.K is not None:
            K = torch.cat([self.K, K], dim=2)                             # (B, H, T_k, s_qkv)
            V = torch.cat([self.V, V], dim=2)
        self.K, self.V = K, V
        return K, V

    def once(self, compute):
        if self.K is None:
            self.K, self.V = compute()
            self.of_memory = True
        return self.K, self.V

    def weights(self, names, stack):
        if names not in self.stacked:
            self.stacked[names] = stack(names)
        return self.stacked[names]

    def select(self, rows):
        if self.K is not None:
            self.K, self.V = self.K[rows], self.V[rows]

    def keep(self, n):
        """Keep the first ``n`` words' keys and values only (a conversation whose earlier
        words stay as they were: generation.PrefixCache)."""
        if self.K is not None:
            self.K, self.V = self.K[:, :, :n], self.V[:, :, :n]

    def widened(self, mask):
        """A mask over the new words' keys (..., T_q, T_q), widened to the keys held before
        them, which every new word sees: (..., T_q, length + T_q). Other masks unchanged."""
        if mask is None or not self.length or mask.size(-1) != mask.size(-2):
            return mask
        return torch.nn.functional.pad(mask, (self.length, 0), value=False)


class _NoCache:
    """Training and whole-sentence passes: nothing is kept."""

    length = 0

    def extend(self, K, V):
        return K, V

    def once(self, compute):
        return compute()

    def weights(self, names, stack):
        return stack(names)

    def widened(self, mask):
        return mask


NO_CACHE = _NoCache()


@contextlib.contextmanager
def attached(attentions, cache_class=KeyValueCache):
    """Give each attention module a fresh ``cache_class()`` (a KeyValueCache, or a student's
    subclass) for the duration of ``with``, and take them away afterwards (also after an
    error), so training never sees one.

    Yields: the caches, in the order of ``attentions``.
    """
    caches = [cache_class() for _ in attentions]
    for attention, cache in zip(attentions, caches):
        attention.kv_cache = cache
    try:
        yield caches
    finally:
        for attention in attentions:
            del attention.kv_cache


def attached_if_valid(attentions, own, masking, what, cache_class=KeyValueCache):
    """`attached` to ``attentions``, or to none (each step then re-reads the whole prefix)
    where the caches would not be valid, said once: ``own``, a student's classes that would
    not read them, or a decoder without the causal mask (``masking`` False), in which every
    earlier word sees the newest one, so that their cached keys and values go stale."""
    why = (f"{own[0].__qualname__} is a class of your own in the {what}" if own else
           None if masking else f"the {what} has no causal mask")
    if why:
        say_once(f"{why}: decoding re-reads the whole prefix at every step (no key/value "
                 "cache)")
    return attached([] if why else attentions, cache_class)


#: The methods of an attention module that read or fill its cache.
ATTENTION_METHODS = ("forward", "attend", "all_heads", "queries_keys_values", "project")


def attached_to_decoder(decoder, parts, what, cache_class=KeyValueCache):
    """`attached_if_valid` for the attentions of a decoder stack (``decoder``) of the
    reference classes ``parts`` (EncoderDecoderParts or GPTParts: its stack, its layer, and
    the attentions of a layer, self-attention and, where ``parts`` has it,
    cross-attention). A student's class in any of them means code that would not read the
    caches. ``cache_class``: as for `attached`."""
    attentions = {"self_attention": parts.SelfAttention}
    if hasattr(parts, "CrossAttention"):
        attentions["cross_attention"] = parts.CrossAttention
    layers = list(decoder.basic_decoder_arr)
    own = own_code([(decoder, parts.MasterDecoderWithMasking, ("forward",))]
                   + [(d, parts.BasicDecoderWithMasking, ("forward",)) for d in layers]
                   + [(getattr(d, name), cls, ATTENTION_METHODS)
                      for d in layers for name, cls in attentions.items()])
    return attached_if_valid([getattr(d, name) for d in layers for name in attentions], own,
                             decoder.masking, what, cache_class)


class TranslationDecoding(Quantizing):
    """Word by word through the caches: the translation model's (EncoderDecoder's) mixin;
    ``reference_parts``: the parts class whose code reads them (EncoderDecoderParts).
    ``quantize``: its weights in 8 or 4 bits for decoding (quantize.py)."""

    reference_parts = None

    def decode_newest(self, ys, memory, cross_mask):
        """Inside `decoding`: logits for the word after ys (B, t), computing the newest
        position only (the earlier ones are in the caches). Shape: -> (B, V_es)"""
        x = self.embeddings_generator_es(ys)[:, -1:]                      # (B, 1, M)
        return self.decoder(x, memory, cross_mask)[:, -1]                 # (B, V_es)

    def decoding(self, cache_class=KeyValueCache):
        """``with model.decoding() as caches``: a KeyValueCache (or ``cache_class``) on each
        attention of the decoder, or none where they would not be read."""
        return attached_to_decoder(self.decoder, self.reference_parts, "decoder", cache_class)


class GPTDecoding(Quantizing):
    """The same for a GPT (GPTParts' mixin)."""

    reference_parts = None

    def decode_newest(self, ys):
        """Inside `decoding`: logits (B, V) for the token after ys (B, t), the newest only."""
        return self.master_decoder(self.embeddings_generator(ys)[:, -1:], None)[:, -1]

    def decoding(self):
        """``with gpt.decoding() as caches``: see TranslationDecoding.decoding."""
        return attached_to_decoder(self.master_decoder, self.reference_parts, "GPT")
