"""Checks of the exercise `positional_encoding`: MyEmbeddings.sinusoids(T, M, base)."""

import torch

from ..model.architecture import TransformerParts
from ..Transformers import TransformerFG
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    drawn,
    grading,
    question,
    same,
    student_code,
    tensor,
)
from .rigs import translator

CHECKS = []
BASE = TransformerParts.EmbeddingsGenerator
TOL = 1e-5


@question
def code_of(module, T, M, base):
    with student_code():
        return module.MyEmbeddings.sinusoids(T, M, base)


@question
def code_in_the_model(module, embedding_size):
    """The position code the embeddings of a small MyTransformer carry."""
    with student_code():
        model = translator(module.MyTransformer, embedding_size=embedding_size)
        return model.embeddings_generator_en.positional_encoding


def theirs(T, M, base):
    pe = ask(code_of, T, M, base)
    return tensor(pe, f"sinusoids({T}, {M}, {base:g})", (T, M)).double()


def want(T, M, base):
    return BASE.sinusoids(T, M, base).double()


def sizes(n):
    """(T, M) of seed ``n``: drawn when grading, so that no table of codes passes."""
    rng = drawn(n)
    return rng.randrange(5, 40), 2 * rng.randrange(3, 24)


@check(CHECKS, "shape", "(num_positions, embedding_size)")
def shape():
    theirs(*sizes(0), 10000.0)


@check(CHECKS, "position_0", "position 0 is sin 0, cos 0, ... = 0, 1, 0, 1, ...")
def position_0():
    T, M = sizes(1)
    pe = theirs(T, M, 10000.0)
    close(pe[0], want(T, M, 10000.0)[0], "row 0", TOL, hint="at position 0 every even "
          "column is sin 0 = 0 and every odd column is cos 0 = 1")


@check(CHECKS, "values", "equal to the formula for every position and column")
def values():
    (T, M), base = sizes(2), 10000.0
    pe, expected = theirs(T, M, base), want(T, M, base)
    if same(pe, expected, TOL):
        return
    swapped = expected.view(T, M // 2, 2).flip(-1).reshape(T, M)
    if same(pe, swapped, TOL):
        raise Mistake("sin and cos are swapped: even columns (2i) take the sine, odd "
                      "columns (2i + 1) the cosine")
    i = torch.arange(M // 2, dtype=torch.float64).repeat_interleave(2)
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    angle = pos / base ** (i / M)                     # i, not 2i, in the exponent
    alternating = torch.where(torch.arange(M) % 2 == 0, angle.sin(), angle.cos())
    if same(pe, alternating, TOL):
        raise Mistake("the exponent is i / M: it must be 2i / M (columns 2i and 2i + 1 share "
                      "one frequency)")
    close(pe, expected, "the code", TOL, hint="PE[pos, 2i] = sin(pos / base^(2i/M)), "
          "PE[pos, 2i+1] = cos(pos / base^(2i/M))")


@check(CHECKS, "base", "uses the base it is given (the lecture's 100, or another)")
def base():
    (T, M), base = sizes(3), 100.0 if not grading() else round(drawn(4).uniform(20, 5000), 2)
    pe = theirs(T, M, base)
    if same(pe, want(T, M, 10000.0), TOL):
        raise Mistake(f"with base={base:g} the code is the one of base 10000: use the "
                      "argument")
    close(pe, want(T, M, base), f"the code of base {base:g}", TOL)


@check(CHECKS, "in_the_model", "the embeddings of MyTransformer carry this code")
def in_the_model():
    M = 4 * drawn(5).randrange(2, 9)                  # two heads: a multiple of 4
    close(ask(code_in_the_model, M), want(10, M, BASE.positional_base),
          "the model's position code", TOL)


EXERCISE = Exercise(
    name="positional_encoding",
    summary="the sinusoidal position code: sin and cos of pos / base^(2i/M)",
    defines=("MyEmbeddings", "MyTransformer"),
    forbids=lambda: [(BASE, "sinusoids", "the model's own sinusoids")],
    checks=CHECKS, container="MyTransformer", base=TransformerFG)
