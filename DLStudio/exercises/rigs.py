"""The checks' test rigs: small models and inputs a student's part runs in (fp64, fixed seeds)."""

import types

import torch

from ..model.architecture import EncoderDecoderParts
from ..model.tokens import EOS_INDEX, SOS_INDEX
from .checking import Mistake, ask, differs, finite, fresh, question, student_code, tensor

__all__ = ["NESTED", "translator", "words", "sees_future", "decoder_outputs", "standing_in"]

#: The nested classes a container may override that a translation model is built from.
NESTED = ("EmbeddingsGenerator", "AttentionHead", "SelfAttention", "CrossAttentionHead",
          "CrossAttention", "FeedForward", "BasicEncoder", "MasterEncoder",
          "BasicDecoderWithMasking", "MasterDecoderWithMasking", "EncoderDecoder")

V_EN, V_ES, T_MAX = 17, 19, 10
#: Why a model's output is NaN, most often: a row of attention weights with every key masked.
NOT_A_NUMBER = ("a softmax over a row where every score is -inf gives NaN: does the mask "
                "forbid every key of some query?")


def translator(container=None, seed=0, layers=2, heads=2, embedding_size=16, **switches):
    """A small EncoderDecoder (fp64, eval mode) of ``container``'s nested classes (a student's
    container class, or None for the reference), built from sizes alone."""
    classes = {}
    if container is not None:
        classes = {name: getattr(container, name) for name in NESTED}
        classes["norm_first"] = container.norm_first
    parts_class = type("CheckedParts", (EncoderDecoderParts,), classes)
    torch.manual_seed(seed)
    parts = parts_class(vocab_en_size=V_EN, vocab_es_size=V_ES, max_seq_length=T_MAX,
                        embedding_size=embedding_size, **switches)
    model = parts.encoder_decoder(layers, layers, heads).double().eval()
    for attention in model.modules():      # the readable product, not PyTorch's fused one
        if hasattr(attention, "fused"):
            attention.fused = False
    return model


def standing_in(model, cls, answer):
    """``model`` (the grader's, which the check runs here) with each of its modules of
    exactly ``cls`` running ``answer(module, *args)`` as its forward: the student's part
    asked for each call and checked here (cross-attention, a subclass, stays the model's).
    Nothing the student's process says about the model's outputs is taken: only what
    their part gives for what the model hands it. Heads are run one by one."""
    for module in model.modules():
        if type(module) is cls:
            module.forward = types.MethodType(answer, module)
        if hasattr(module, "batched"):
            module.batched = False
    return model


def words(B, T, vocab, seed=0, eos_at=None):
    """(B, T) random word ids (never SOS or EOS); with ``eos_at`` (one length per row), EOS
    at that position and after it (the padding)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(EOS_INDEX + 1, vocab, (B, T), generator=g)
    for row, at in enumerate(eos_at or []):
        ids[row, at:] = EOS_INDEX
    return ids


@question
def decoder_outputs(module, container, src, targets, **sizes):
    """The outputs (B, T_tgt, V_es) of a small model of the student's ``container`` class
    on ``src`` and each of ``targets``."""
    model = translator(getattr(module, container), **sizes)
    with student_code():
        return [model(src, tgt) for tgt in targets]


def sees_future(outputs=None, what="the decoder", container="MyTransformer", **sizes):
    """Raise a Mistake if changing target word 5 changes the model's output at an earlier
    position (the causal mask missing, inverted or not passed on), or if changing word 2
    changes no later one (attention that mixes nothing: each position its own word alone,
    or an output that reads no word). ``outputs(src, targets)`` asks for the model's
    outputs (default: a model of the student's ``container``)."""
    src = words(2, 6, V_EN, seed=fresh(1), eos_at=[5, 4])
    tgt = torch.cat([torch.full((2, 1), SOS_INDEX), words(2, 7, V_ES, seed=fresh(2))], dim=1)
    changed, earlier = tgt.clone(), tgt.clone()
    changed[:, 5] = EOS_INDEX + 1 + (tgt[:, 5] - EOS_INDEX) % (V_ES - EOS_INDEX - 1)
    earlier[:, 2] = EOS_INDEX + 1 + (tgt[:, 2] - EOS_INDEX) % (V_ES - EOS_INDEX - 1)
    if outputs is None:
        before, after, mixed = ask(decoder_outputs, container, src, [tgt, changed, earlier],
                                   **sizes)
    else:
        before, after, mixed = outputs(src, [tgt, changed, earlier])   # (B, T_tgt, V_es)
    before, after, mixed = (finite(tensor(out, "the model's output", (2, 8, V_ES)),
                                   "the model's output", NOT_A_NUMBER)
                            for out in (before, after, mixed))
    moved = differs(before[:, :5], after[:, :5]).nonzero()
    if len(moved):
        raise Mistake(f"changing target word 5 changed the output at position "
                      f"{int(moved[0, 1])}: {what} sees the future (the causal mask is "
                      "missing, inverted or not passed on)", exhibit="no_causal_mask")
    if not differs(before[:, 3:], mixed[:, 3:]).any():
        raise Mistake(f"changing target word 2 changed no output after it: {what} mixes "
                      "nothing of the earlier words into a later one (each position reads "
                      "its own word alone, or none)")
