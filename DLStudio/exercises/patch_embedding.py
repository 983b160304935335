"""Checks of the exercise `patch_embedding`: MyPatchEmbedding.forward(images)."""

import torch

from ..model.vision import VisionParts
from ..Transformers import visTransformer
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
BASE = VisionParts.PatchEmbeddingGenerator
B, C, H, W, P, M = 2, 3, 8, 12, 4, 10
N_P = (H // P) * (W // P)


def vision():
    return VisionParts(num_classes=3, patch_size=(P, P), image_size=(H, W), in_channels=C,
                       embedding_size=M, num_basic_encoders=1, num_atten_heads=2)


def generator(seed=0):
    """The reference patch embedding, whose weights the student's gets."""
    vit = vision()
    torch.manual_seed(fresh(seed))
    return BASE(vit, C, (P, P), (H, W), M).double()


def images(seed=0):
    return torch.rand(B, C, H, W, generator=torch.Generator().manual_seed(fresh(seed)),
                      dtype=torch.float64)


@question
def embedded(module, weights, x):
    gen = module.MyPatchEmbedding(vision(), C, (P, P), (H, W), M).double()
    gen.load_state_dict(weights)
    with student_code():
        return gen(x)


def run(gen, x):
    return tensor(ask(embedded, gen.state_dict(), x), "the output", (B, 1 + N_P, M))


def with_patches(gen, patches):
    """What forward gives for these (B, N_p, C P P) patches."""
    x = gen.W_E(patches)
    return torch.cat([gen.class_token.expand(B, -1, -1), x], 1) + gen.position_embeddings


@check(CHECKS, "shape", "(B, C, H, W) -> (B, 1 + N_p, M)")
def shape():
    run(generator(), images())


@check(CHECKS, "class_token_first", "position 0 is the class token plus position 0's vector")
def class_token_first():
    gen = generator(1)
    out = run(gen, images(1))
    cls = (gen.class_token + gen.position_embeddings[:, :1]).expand(B, 1, M)
    if same(out[:, -1:], (gen.class_token + gen.position_embeddings[:, -1:]).expand(B, 1, M)):
        raise Mistake("the class token is at the end: it goes in front of the patches")
    close(out[:, :1], cls, "position 0 of the output", hint="the class token, then the "
          "position embeddings added")


@check(CHECKS, "patches", "patches row by row, each flattened channel by channel, then W_E")
def patches():
    gen, x = generator(2), images(2)
    out, want = run(gen, x), BASE.forward(gen, x)
    if same(out, want):
        return
    grid = x.unfold(2, P, P).unfold(3, P, P)                # (B, C, H/P, W/P, P, P)
    by_columns = grid.permute(0, 3, 2, 1, 4, 5).reshape(B, N_P, -1)
    pixel_major = grid.permute(0, 2, 3, 4, 5, 1).reshape(B, N_P, -1)
    if same(out, with_patches(gen, by_columns)):
        raise Mistake("the patches are in column order: take them row by row (left to "
                      "right along the top row first)")
    if same(out, with_patches(gen, pixel_major)):
        raise Mistake("each patch is flattened pixel by pixel (channels innermost): flatten "
                      "it channel by channel, in the order patch[c, i, j]")
    close(out, want, "the output", hint="W_E of each patch, class token in front, position "
          "embeddings added")


@check(CHECKS, "positions", "the position embeddings are added at every position")
def positions():
    gen, x = generator(3), images(3)
    out = run(gen, x)
    no_positions = BASE.forward(gen, x) - gen.position_embeddings
    if same(out, no_positions):
        raise Mistake("the position embeddings are not added: without them the encoder "
                      "cannot tell where a patch was")
    close(out, BASE.forward(gen, x), "the output")


EXERCISE = Exercise(
    name="patch_embedding",
    summary="the visTransformer's patch embedding: patches, W_E, the class token, positions",
    defines=("MyPatchEmbedding", "MyViT"),
    forbids=lambda: [(BASE, "forward", "the standard patch embedding's forward"),
                     (BASE, "patches", "the standard patch cutting")],
    checks=CHECKS, container="MyViT", base=visTransformer)
