"""Checks of the exercise `sliding_window`: MyAttention.windowed(mask, x, offset, window), the
mask of a sliding window (Mistral's), which self-attention applies while decoding too."""

import torch

from ..model import since_2023
from ..model.architecture import GPTParts, TransformerParts
from ..Transformers import TransformerGPT
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    fresh,
    question,
    same,
    student_code,
    tensor,
)

CHECKS = []
M = 8


def reference(mask, T_q, offset, window):
    return since_2023.windowed(mask, torch.zeros(1, T_q, M), offset, window)


@question
def mask_of(module, mask, T_q, offset, window):
    with student_code():
        return module.MyAttention.windowed(mask, torch.zeros(1, T_q, M), offset, window)


def theirs(mask, T_q, offset, window):
    got = tensor(ask(mask_of, mask, T_q, offset, window), "windowed(...)")
    if got.dtype != torch.bool:
        raise Mistake(f"windowed(...) has dtype {got.dtype}: it must be torch.bool (True "
                      "where a query may not look)")
    want = reference(mask, T_q, offset, window)
    try:
        got = got.expand(want.shape) if got.dim() <= want.dim() else got
    except RuntimeError:
        raise Mistake(f"windowed(...) has shape {tuple(got.shape)}: it must broadcast to "
                      f"{tuple(want.shape)} (B, H, T_q, T_k), T_k = offset + T_q") from None
    return got, want


def causal(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)[None, None]


@check(CHECKS, "window", "query i sees keys i - W + 1 .. i: W of them, itself included")
def window():
    W, T = 3 + fresh(0) % 3, 8 + fresh(4) % 3
    got, want = theirs(None, T, 0, W)
    sees = (~got[0, 0]).sum(-1)
    if same(got, reference(None, T, 0, W + 1)) or same(got, reference(None, T, 0, W - 1)):
        raise Mistake(f"the window is off by one: with window {W} each token sees {W} keys, "
                      "itself and the W - 1 before it (key j is hidden when j <= i - W)")
    if bool(got[0, 0].diagonal().any()):
        raise Mistake("a token does not see itself: its own key is inside its window")
    close(got, want, f"the mask of a window of {W} over {T} tokens", hint=f"key j hidden "
          f"where j <= i - {W}; row i sees {int(sees.max())} keys at most in yours")


@check(CHECKS, "combined", "the window is added to the mask given (causal, padding)")
def combined():
    T, W = 7, 4
    g = torch.Generator().manual_seed(fresh(1))
    padding = torch.rand(2, 1, 1, T, generator=g) < 0.3
    given = causal(T) | padding                                    # (2, 1, T, T)
    got, want = theirs(given, T, 0, W)
    if same(got, reference(None, T, 0, W).expand(want.shape)):
        raise Mistake("the mask given is replaced: a query still may not look ahead, nor at "
                      "padding; combine the two (mask | far)")
    if not bool((got | ~given).all()):
        raise Mistake("a key the mask given hides is visible again: the window only adds "
                      "keys to hide (mask | far)")
    close(got, want, "the combined mask")


@check(CHECKS, "offset", "while decoding: the newest query is at position offset")
def offset():
    W = 3
    for at in (fresh(2) % 5 + 4, 9):
        got, want = theirs(None, 1, at, W)
        if same(got, reference(None, 1, 0, W)[..., :1].expand(want.shape)):
            raise Mistake("the offset is ignored: decoding with the cache, the newest token is "
                          f"at position offset ({at}) and the keys are all {at + 1} tokens so "
                          "far")
        close(got, want, f"the newest token's mask at offset {at}", hint=f"it sees keys "
              f"{at - W + 1} .. {at}")


@question
def decoded_logits(module, ids, cached):
    """A small GPT of MyAttention with a window of 3: its logits at every position, read
    at once, or token by token with the key/value cache."""
    torch.manual_seed(0)
    model = type("Yours", (GPTParts,), {"SelfAttention": module.MyAttention})(
        **SIZES).double().eval()
    with student_code(), torch.no_grad():
        if not cached:
            return model(ids)
        with model.decoding():
            return torch.stack([model.decode_newest(ids[:, :t + 1])
                                for t in range(ids.size(1))], 1)


SIZES = dict(vocab_size=40, embedding_size=32, max_seq_length=16, num_basic_decoders=2,
             num_atten_heads=4, positions="rope", full_width_heads=True, window=3)


@check(CHECKS, "in_a_model", "a GPT of MyAttention: the window's logits, with the cache too")
def in_a_model():
    ids = torch.randint(0, 40, (2, 10), generator=torch.Generator().manual_seed(fresh(3)))
    torch.manual_seed(0)
    model = GPTParts(**SIZES).double().eval()
    with torch.no_grad():
        want = model(ids)
    got = tensor(ask(decoded_logits, ids, False), "the model's logits", tuple(want.shape))
    close(got, want, "the logits of a GPT of your attention", 1e-6,
          "self-attention calls self.windowed(mask, x, self.kv_cache.length, self.window)")
    got = tensor(ask(decoded_logits, ids, True), "the logits while decoding",
                 tuple(want.shape))
    close(got, want, "the logits decoding token by token with the cache", 1e-6,
          "while decoding, offset is self.kv_cache.length: the tokens already cached")


EXERCISE = Exercise(
    name="sliding_window",
    summary="a sliding window's mask (Mistral): W keys per query, with the cache too",
    defines=("MyAttention", "MyTransformer"),
    forbids=lambda: [(since_2023, "windowed", "the model's windowed"),
                     (TransformerParts.SelfAttention, "windowed",
                      "SelfAttention.windowed")],
    checks=CHECKS, container="MyTransformer", base=TransformerGPT)
