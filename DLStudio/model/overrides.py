"""The override contract: what a student's nested class must accept, and how it is found again.

A subclass of TransformerFG, TransformerPreLN or visTransformer may replace any nested class
(constructors: DLStudio 2.5.8's signatures or ours). These keep that promise honest:

    check_forwards(container, names)
                                when the model is built: every nested class's ``forward``
                                (and, with full_width_heads, a head's constructor) can take
                                what the model passes it (FORWARD_CONTRACT), else a message
                                that names the signature to write, never a TypeError mid-run
    runs_base / own_code        whether a module runs our code, so that a fast path (the
                                batched heads, the key/value cache) is used only where it
                                reproduces what the student's class would compute
    say_once(message)           a class of the student's that a fast path cannot run is run
                                as written (slower), and the user is told once

Only the standard library here: the model imports this module.
"""

import inspect
import logging

__all__ = ["OverrideError", "FORWARD_CONTRACT", "check_forwards", "runs_base", "own_code",
           "say_once"]

log = logging.getLogger("DLStudio")

#: How the model calls each nested class's forward: (positional arguments, keyword
#: arguments, the signature to write). x is always (B, T, ...); see each class's docstring.
FORWARD_CONTRACT = {
    "EmbeddingsGenerator": (1, (), "forward(self, ids)"),
    "AttentionHead": (1, ("mask",), "forward(self, x, mask=None, memory=None)"),
    "CrossAttentionHead": (1, ("mask", "memory"), "forward(self, x, mask=None, memory=None)"),
    "SelfAttention": (2, (), "forward(self, x, mask=None)"),
    "CrossAttention": (3, (), "forward(self, x, memory, mask=None)"),
    "FeedForward": (1, (), "forward(self, x)"),
    "BasicEncoder": (2, (), "forward(self, x, mask=None)"),
    "MasterEncoder": (2, (), "forward(self, x, mask=None)"),
    "BasicDecoderWithMasking": (4, (), "forward(self, x, memory, self_mask=None, "
                                       "cross_mask=None)"),
    "MasterDecoderWithMasking": (4, (), "forward(self, x, memory, cross_mask=None, "
                                        "keep=None)"),
}

_WHY_MASKS = ("the model hands every attention its mask (padding, and in the decoder the "
              "causal mask); without it words would attend to padding and to the very words "
              "they must predict")


class OverrideError(TypeError):
    """A student's nested class that the model cannot call; the message says what to write."""


def _takes(fn, positional, keywords):
    try:
        inspect.signature(fn).bind(None, *range(positional), **dict.fromkeys(keywords))
        return True
    except TypeError:
        return False


def check_forwards(container, names, classes=None):
    """Refuse, before any training, a nested class whose ``forward`` cannot take the model's
    arguments: ``names`` are looked up on the container; ``classes`` maps a contract name to
    the class used for it (cross-attention's head may be the AttentionHead)."""
    classes = {**{name: getattr(container, name) for name in names}, **(classes or {})}
    for name, cls in classes.items():
        positional, keywords, wanted = FORWARD_CONTRACT[name]
        if _takes(cls.forward, positional, keywords):
            continue
        why = _WHY_MASKS if "mask" in wanted else "this is how the model calls it"
        if name == "CrossAttentionHead" and cls.__name__ != name:
            why = ("cross-attention uses your AttentionHead too, with keys and values from "
                   "the encoder's output (memory=); or override CrossAttentionHead as well")
        raise OverrideError(
            f"{cls.__qualname__} has forward{inspect.signature(cls.forward)}, which the model "
            f"cannot call: {why}. Write it as def {wanted}: (the docstring of {name} gives "
            "the shapes).")
    for name in ("AttentionHead", "CrossAttentionHead"):
        cls = classes.get(name)
        if getattr(container, "full_width_heads", False) and cls is not None and \
                not _takes(cls.__init__, 4, ("input_size",)):
            raise OverrideError(
                f"{cls.__qualname__}.__init__ takes no input_size, which full_width_heads=True "
                "needs (each head then reads the whole embedding, M numbers): add "
                "input_size=None to its constructor and pass it on, or leave full_width_heads "
                "off.")


def runs_base(obj, base, *methods):
    """Whether ``obj`` runs ``base``'s own code for these methods (no student override)."""
    return all(getattr(type(obj), m) is getattr(base, m) for m in methods)


def own_code(checks):
    """The student's classes among ``checks`` [(module, our class, methods)]: a module whose
    class overrides one of the methods, or an attention whose heads run one by one (then the
    head's class is named)."""
    own = []
    for module, cls, methods in checks:
        if not runs_base(module, cls, *methods):
            own.append(type(module))
        elif not getattr(module, "batched", True):
            own.append(type(module.heads[0]))
    return own


_said = set()


def say_once(message):
    """Log a warning the first time ``message`` comes up in this process."""
    if message not in _said:
        _said.add(message)
        log.warning(message)
