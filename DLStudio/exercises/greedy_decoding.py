"""Checks of the exercise `greedy_decoding`: MyCache.extend and greedy_decode."""

import torch

from ..evaluation import decode_and_score
from ..model.kv_cache import KeyValueCache
from ..model.tokens import EOS_INDEX
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    fresh,
    question,
    student_code,
    tensor,
)
from .rigs import T_MAX, V_EN, translator, words

CHECKS = []


def model_and_src(seed=1, eos_bias=0.5):
    """A small model whose sentences end at different steps (seed 1: words 5 and 2, two run
    to max_len; seed 2 with no bias: words 3 and 3), EOS made likelier by ``eos_bias``."""
    model = translator(seed=seed)
    model.decoder.out.bias.data[EOS_INDEX] += eos_bias
    return model, words(4, 7, V_EN, seed=seed, eos_at=[7, 5, 3, 6])


def reference(model, src):
    return decode_and_score.greedy_decode(model, src, T_MAX)


@question
def decoded(module, seed, eos_bias):
    """The student's greedy_decode on our small model ``model_and_src(seed, eos_bias)``."""
    model, src = model_and_src(seed, eos_bias)
    with student_code():
        return module.greedy_decode(model, src, T_MAX)


@question
def extended(module, steps):
    """What MyCache().extend returns after each step's (K, V)."""
    with student_code():
        cache = module.MyCache()
        return [cache.extend(K, V) for K, V in steps]


#: The token the cached step favours at the third word (`marked`), and by how much.
MARK, MARK_GAIN = 5, 50.0


def marked(model):
    """``model`` whose cached step marks its logits: at the third word (ys of 3 tokens),
    token MARK gains MARK_GAIN, in ``decode_newest`` only. Decoding through the cache then
    gives other words than re-reading the prefix (``model(...)``, ``model.decode``) does,
    so words equal to the marked model's greedy decoding, computed by the grader, show
    that the cache was used, whatever the student's process reports."""
    newest = model.decode_newest

    def decode_newest(ys, *args, **kwargs):
        logits = newest(ys, *args, **kwargs)
        if ys.size(1) == 3:
            logits = logits.clone()
            logits[:, MARK] += MARK_GAIN
        return logits
    model.decode_newest = decode_newest
    return model


@question
def how_it_decodes(module, seed, eos_bias):
    """How the student's greedy_decode runs our model (its cached step `marked`): whether
    inside model.decoding with a cache of theirs, and the words the decoder was given at
    each call."""
    model, src = model_and_src(seed, eos_bias)
    marked(model)
    seen, classes = [], []
    decoder_forward, decoding = model.decoder.forward, model.decoding

    def counted(x, *args, **kwargs):
        seen.append(x.size(1))
        return decoder_forward(x, *args, **kwargs)

    def recorded(cache_class=KeyValueCache):
        classes.append(cache_class)
        return decoding(cache_class)
    model.decoder.forward, model.decoding = counted, recorded
    with student_code():
        result = module.greedy_decode(model, src, T_MAX)
    return {"their_cache": bool(classes) and isinstance(classes[0], type)
            and issubclass(classes[0], module.MyCache), "words_per_call": seen,
            "result": result}


def the_words(got, seed, bias, what):
    """``got`` (the student's decoding) against greedy decoding computed here: a check of a
    property (EOS kept, the cache used) also needs the words right, or a constant passes."""
    want = reference(*model_and_src(seed, bias))
    if got.shape != want.shape or not torch.equal(got, want):
        raise Mistake(f"{what}, but the words are not greedy decoding's: got "
                      f"{got[0].tolist()} for sentence 0, expected {want[0].tolist()}")


def theirs(seed, eos_bias):
    return tensor(ask(decoded, seed, eos_bias), "greedy_decode's result").long()


@check(CHECKS, "cache_extend", "extend keeps each step's K, V and returns all, oldest first")
def cache_extend():
    g = torch.Generator().manual_seed(fresh(0))
    steps = [(torch.randn(2, 3, 1, 4, generator=g), torch.randn(2, 3, 1, 4, generator=g))
             for _ in range(3)]
    returned = ask(extended, steps)
    for t, result in enumerate(returned, start=1):
        if not isinstance(result, tuple) or len(result) != 2:
            raise Mistake(f"extend should return two tensors (the keys, the values), got "
                          f"{type(result).__name__} at step {t}")
        K_all, V_all = result
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
def same_words():
    model, src = model_and_src(fresh(1))
    want, got = reference(model, src), theirs(fresh(1), 0.5)
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
def after_eos():
    seed, bias = fresh(2), 0.0
    while bias < 4 and not (reference(*model_and_src(seed, bias))[:, 1:-1] == EOS_INDEX).any():
        bias += 0.5                          # (graded: a model where some sentence ends early)
    got = theirs(seed, bias)
    for row in range(len(got)):
        ends = (got[row] == EOS_INDEX).nonzero()
        if len(ends) and (got[row, int(ends[0]):] != EOS_INDEX).any():
            raise Mistake(f"sentence {row} goes on after its EOS: {got[row].tolist()}")
    the_words(got, seed, bias, "every sentence holds EOS after its end")


@check(CHECKS, "uses_the_cache", "decodes inside model.decoding(MyCache), one word a step")
def uses_the_cache():
    found = ask(how_it_decodes, fresh(3), 0.0)        # (a model whose sentences run on)
    if not found["their_cache"]:
        raise Mistake("decoding does not run inside `with model.decoding(MyCache)`: "
                      "the model's attentions get no cache of yours")
    seen = found["words_per_call"]
    if max(seen[1:], default=1) > 1:
        raise Mistake(f"a step ran the decoder on {max(seen[1:])} words: with the cache each "
                      "step computes the newest word only (model.decode_newest)")
    got = tensor(found.get("result"), "greedy_decode's result").long()
    model, src = model_and_src(fresh(3), 0.0)
    unmarked = reference(model, src)
    want = reference(marked(model), src)
    if got.shape == unmarked.shape and torch.equal(got, unmarked) and \
            not torch.equal(want, unmarked):
        raise Mistake("the words are those of re-reading the prefix at every step: the "
                      "newest word's logits must come from model.decode_newest inside "
                      "model.decoding(MyCache), which reads the earlier words from the cache")
    if got.shape != want.shape or not torch.equal(got, want):
        raise Mistake(f"decoding runs inside model.decoding(MyCache), but the words are not "
                      f"greedy decoding's through the cache: got {got[0].tolist()} for "
                      f"sentence 0, expected {want[0].tolist()}")


EXERCISE = Exercise(
    name="greedy_decoding",
    summary="greedy decoding with a key/value cache (the cache's extend, and the loop)",
    defines=("MyCache", "greedy_decode"),
    forbids=lambda: [(decode_and_score, "greedy_decode", "the model's greedy_decode"),
                     (decode_and_score, "beam_search", "the model's beam_search (one beam "
                      "is greedy decoding)"),
                     (KeyValueCache, "extend", "KeyValueCache.extend")],
    checks=CHECKS)
