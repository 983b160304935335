"""Exercise `greedy_decoding`: translate word by word, with a key/value cache.

The decoder predicts one word at a time; greedy decoding feeds back the likeliest. Without
a cache, step t re-runs the decoder on all t words read so far; with one, each attention of
the decoder keeps the keys and values of the words before, so a step computes the newest
word only.

1. `MyCache.extend(K, V)`: self-attention calls it at every step with the newest word's
   keys and values, K and V of shape (B, H, 1, s_qkv). Keep them after those of the earlier
   words (in self.K and self.V, None at the start) and return all of them so far:
   (B, H, t, s_qkv) each, oldest first (concatenate along dim 2).
2. `greedy_decode(model, src, max_len)`: model is the translation model (EncoderDecoder):
       memory, cross_mask = model.encode(src)             once, for src (B, T_src)
       with model.decoding(MyCache) as caches:            your cache in every attention
           logits = model.decode_newest(ys, memory, cross_mask)
                                          (B, V) scores of the word after ys (B, t), which
                                          starts as SOS (id 0) and grows by a word a step
   Take the likeliest word (argmax) for every sentence and append it. Stop when every
   sentence has produced EOS (id 1), or after max_len - 1 words. Return (B, n) LongTensor
   of the predicted words (not SOS), n the number of steps taken; after a sentence's EOS
   its row holds EOS. Keep every row in the batch to the end (simplest: the cache then
   needs nothing more).
The model's own greedy_decode and KeyValueCache.extend are switched off while the checks
run.

    dlstudio check greedy_decoding greedy_decoding.py
"""
import torch

from DLStudio.model.kv_cache import KeyValueCache

SOS_INDEX, EOS_INDEX = 0, 1


class MyCache(KeyValueCache):
    def extend(self, K, V):
        raise NotImplementedError


@torch.no_grad()
def greedy_decode(model, src, max_len):
    raise NotImplementedError
