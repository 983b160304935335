"""Checks of the exercise `masks`: causal_mask(T) and padding_mask(ids)."""

import contextlib
import threading

import torch

from ..model import architecture, tokens
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    differs,
    drawn,
    finite,
    fresh,
    question,
    same,
    student_code,
    tensor,
)
from .rigs import NOT_A_NUMBER, T_MAX, V_EN, sees_future, translator, words

CHECKS = []


@question
def causal_of(module, T):
    with student_code():
        return module.causal_mask(T)


@question
def padding_of(module, ids):
    with student_code():
        return module.padding_mask(ids)


def causal(T):
    mask = tensor(ask(causal_of, T), f"causal_mask({T})", (T, T))
    if mask.dtype != torch.bool:
        raise Mistake(f"causal_mask({T}) has dtype {mask.dtype}: it must be torch.bool "
                      "(True where a position may not look)")
    return mask


def padded(ids):
    mask = tensor(ask(padding_of, ids), "padding_mask(ids)", ids.shape)
    if mask.dtype != torch.bool:
        raise Mistake(f"padding_mask(ids) has dtype {mask.dtype}: it must be torch.bool")
    return mask


def as_used(mask, what, shape):
    """A mask as the model uses it: a bool tensor that broadcasts to ``shape``."""
    mask = tensor(mask, what)
    if mask.dtype != torch.bool:
        raise Mistake(f"{what} has dtype {mask.dtype}: it must be torch.bool")
    try:
        return mask.broadcast_to(shape)
    except RuntimeError:
        raise Mistake(f"{what} has shape {tuple(mask.shape)}, which does not fit "
                      f"{shape}") from None


#: The masks a thread's model takes while `answered_masks` runs in it (the grader grades
#: several files at once, each in a thread of its own: a mask is asked of that thread's
#: file only, and every other model in the process keeps the package's own masks).
_answering = threading.local()
_installed = threading.Lock()


def _per_thread(name, original):
    def mask(*args, **kwargs):
        answered = getattr(_answering, "masks", None)
        return (original if answered is None else answered[name])(*args, **kwargs)
    mask.__doc__, mask.original = original.__doc__, original
    return mask


@contextlib.contextmanager
def answered_masks():
    """Our model's masks are, in this thread and for the duration of ``with``, the values
    the student's functions give: asked for one mask at a time and checked here (type and
    shape), while the model itself runs in the grader. Nothing the student's process says
    about the model's outputs is taken: only its masks."""
    with _installed:
        if not hasattr(architecture.causal_mask, "original"):
            architecture.causal_mask = _per_thread("causal", architecture.causal_mask)
            architecture.padding_mask = _per_thread("padding", architecture.padding_mask)
    _answering.masks = {
        "causal": lambda T, device=None: as_used(
            ask(causal_of, T), f"causal_mask({T})", (T, T)).to(device),
        "padding": lambda ids: as_used(
            ask(padding_of, ids.cpu()), "padding_mask(ids)", tuple(ids.shape)).to(ids.device)}
    try:
        yield
    finally:
        _answering.masks = None


@check(CHECKS, "causal_values", "True above the diagonal only (position t sees 0..t)")
def causal_values():
    T = drawn(20).randrange(4, 13)
    mask, want = causal(T), tokens.causal_mask(T)
    if same(mask.double(), (~want).double()):
        raise Mistake("causal_mask is inverted: True must mark the positions a word may NOT "
                      "see (those after it)", exhibit="no_causal_mask")
    if same(mask.double(), want.double() + torch.eye(T, dtype=torch.float64)):
        raise Mistake("causal_mask masks the diagonal too: a position may see itself")
    if same(mask.double(), torch.zeros(T, T).double()):
        raise Mistake("causal_mask allows everything: the decoder would see the word it must "
                      "predict", exhibit="no_causal_mask")
    close(mask, want, f"causal_mask({T})", hint="True where column > row")


@check(CHECKS, "padding_values", "True after each row's first EOS; that EOS is not padding")
def padding_values():
    ids = torch.cat([torch.zeros(4, 1, dtype=torch.long),
                     words(4, 7, V_EN, seed=fresh(3), eos_at=[3, 5, 7, 1])], dim=1)  # (4, 8)
    mask, want = padded(ids), tokens.padding_mask(ids)
    if same(mask.double(), (ids == tokens.EOS_INDEX).double()):
        raise Mistake("padding_mask marks every EOS, the sentence's own EOS included: only "
                      "the positions after a row's first EOS are padding")
    if same(mask.double(), (~want).double()):
        raise Mistake("padding_mask is inverted: True marks the padding",
                      exhibit="no_padding_mask")
    close(mask, want, "padding_mask", hint="padding is every position after a row's first "
          "EOS (row 2 has no padding)")


@check(CHECKS, "decoder_causal", "with your causal mask the decoder cannot see the future")
def decoder_causal():
    model = translator(seed=0)
    with answered_masks(), torch.no_grad():
        sees_future(lambda src, targets: [model(src, tgt) for tgt in targets])


@check(CHECKS, "encoder_padding", "with your padding mask no word reads the padding")
def encoder_padding():
    src = words(2, T_MAX - 2, V_EN, seed=fresh(4), eos_at=[4, 6])
    other = src.clone()
    other[0, 5:], other[1, 7:] = 7, 9                # the padding changed, nothing else
    model = translator(seed=0)
    with answered_masks(), torch.no_grad():
        encodings = [model.encode(s)[0] for s in (src, other)]       # (B, T_src, M)
    before, after = (finite(tensor(e, "the encoder's output", (2, T_MAX - 2, 16)),
                            "the encoder's output", NOT_A_NUMBER) for e in encodings)
    for row, real in enumerate((5, 7)):
        moved = differs(before[row, :real], after[row, :real]).any(-1).nonzero()
        if len(moved):
            raise Mistake(f"changing the padding of sentence {row} changed the encoder's "
                          f"output at word {int(moved[0])}: the words read the padding",
                          exhibit="no_padding_mask")


EXERCISE = Exercise(
    name="masks",
    summary="the causal mask and the padding mask (True where attention is not allowed)",
    defines=("causal_mask", "padding_mask"),
    forbids=lambda: [(tokens, "causal_mask", "the model's causal_mask"),
                     (tokens, "padding_mask", "the model's padding_mask")],
    checks=CHECKS)
