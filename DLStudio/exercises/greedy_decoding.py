"""Checks of the exercise `greedy_decoding`: MyCache.extend and greedy_decode."""

import torch

from ..evaluation import decode_and_score
from ..model.kv_cache import KeyValueCache
from ..model.tokens import EOS_INDEX
from .checking import Exercise, Mistake, check, close, student_code, tensor
from .models import T_MAX, V_EN, translator, words

CHECKS = []


def model_and_src(seed=1, eos_bias=0.5):
    """A small model whose sentences end at different steps (seed 1: words 5 and 2, two run
    to max_len; seed 2 with no bias: words 3 and 3), EOS made likelier by ``eos_bias``."""
    model = translator(seed=seed)
    model.decoder.out.bias.data[EOS_INDEX] += eos_bias
    return model, words(4, 7, V_EN, seed=seed, eos_at=[7, 5, 3, 6])


def reference(model, src):
    return decode_and_score.greedy_decode(model, src, T_MAX)


def theirs(module, model, src):
    with student_code():
        out = module.greedy_decode(model, src, T_MAX)
    return tensor(out, "greedy_decode's result").long()


@check(CHECKS, "cache_extend", "extend keeps each step's K, V and returns all, oldest first")
def cache_extend(module):
    g = torch.Generator().manual_seed(0)
    steps = [(torch.randn(2, 3, 1, 4, generator=g), torch.randn(2, 3, 1, 4, generator=g))
             for _ in range(3)]
    with student_code():
        cache = module.MyCache()
        for t, (K, V) in enumerate(steps, start=1):
            K_all, V_all = cache.extend(K, V)
            tensor(K_all, f"the keys extend returns at step {t}")
            if K_all.shape[2] == 1 and t > 1:
                raise Mistake(f"at step {t} extend returns the newest word's keys only: the "
                              "cache is never extended (keep the earlier words' K and V)")
            close(K_all, torch.cat([k for k, _ in steps[:t]], dim=2),
                  f"the keys at step {t}", hint="the earlier words' keys, then the newest, "
                  "along dim 2")
            close(V_all, torch.cat([v for _, v in steps[:t]], dim=2),
                  f"the values at step {t}")


@check(CHECKS, "same_words", "the same translations as greedy decoding without a cache")
def same_words(module):
    model, src = model_and_src()
    want, got = reference(model, src), theirs(module, model, src)
    n = min(want.size(1), got.size(1))
    bad = (got[:, :n] != want[:, :n]).nonzero()
    if len(bad):
        row, t = (int(i) for i in bad[0])
        raise Mistake(f"sentence {row} differs at word {t}: {got[row, :t + 1].tolist()}, "
                      f"expected {want[row, :t + 1].tolist()} (if the cache forgets the "
                      "earlier words, each step sees the newest word only)")
    if got.shape != want.shape:
        raise Mistake(f"the result has {got.size(1)} steps, expected {want.size(1)}: stop "
                      "when every sentence has produced EOS, or after max_len - 1 words")


@check(CHECKS, "after_eos", "after a sentence's EOS its row holds EOS")
def after_eos(module):
    model, src = model_and_src(2, eos_bias=0.0)
    got = theirs(module, model, src)
    for row in range(len(got)):
        ends = (got[row] == EOS_INDEX).nonzero()
        if len(ends) and (got[row, int(ends[0]):] != EOS_INDEX).any():
            raise Mistake(f"sentence {row} goes on after its EOS: {got[row].tolist()}")


@check(CHECKS, "uses_the_cache", "decodes inside model.decoding(MyCache), one word a step")
def uses_the_cache(module):
    model, src = model_and_src()
    seen, classes = [], []
    decoder_forward, decoding = model.decoder.forward, model.decoding

    def counted(x, *args, **kwargs):
        seen.append(x.size(1))
        return decoder_forward(x, *args, **kwargs)

    def recorded(cache_class=KeyValueCache):
        classes.append(cache_class)
        return decoding(cache_class)
    model.decoder.forward, model.decoding = counted, recorded
    theirs(module, model, src)
    if not classes or not issubclass(classes[0], module.MyCache):
        raise Mistake("decoding does not run inside `with model.decoding(MyCache)`: "
                      "the model's attentions get no cache of yours")
    if max(seen[1:], default=1) > 1:
        raise Mistake(f"a step ran the decoder on {max(seen[1:])} words: with the cache each "
                      "step computes the newest word only (model.decode_newest)")


EXERCISE = Exercise(
    name="greedy_decoding",
    summary="greedy decoding with a key/value cache (the cache's extend, and the loop)",
    defines=("MyCache", "greedy_decode"),
    forbids=lambda: [(decode_and_score, "greedy_decode", "the model's greedy_decode"),
                     (KeyValueCache, "extend", "KeyValueCache.extend")],
    checks=CHECKS)
