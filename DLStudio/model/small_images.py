"""A vision transformer that learns from a few thousand small images: the two parts of the
Compact Convolutional Transformer (Hassani et al. 2021) as switches of VisionParts
(vision.py, read first), each a nested class a subclass may override.

    tokenizer="conv"      ConvTokenizer     a few 3x3 convolutions (each with ReLU and a
                                            3x3 max-pool of stride 2) make the tokens,
                                            instead of cutting the image into patches
    pooling="sequence"    SequencePooling   the encoder's outputs averaged with weights it
                                            learns, instead of a class token's output

A patch cut at a fixed grid knows nothing of its neighbours, and a plain ViT must learn
from its data what convolutions know by their shape (that near pixels belong together, and
that a stroke is a stroke wherever it lies); with a few thousand images it cannot. The
convolutions give each token an overlapping view of its neighbourhood, and pooling the
whole sequence lets every token speak for the image. Both run on any image size whose
sides the pooling halves evenly.

Shapes: B images, C channels, H x W pixels, L convolution layers, N tokens
(H / 2^L)(W / 2^L), M embedding_size.
"""

import torch
import torch.nn as nn

__all__ = ["ConvTokenizer", "SequencePooling", "conv_tokens"]


def conv_tokens(image_size, layers):
    """How many tokens a ConvTokenizer of ``layers`` makes of an image of ``image_size``
    (H, W): each pool halves both sides, rounding up."""
    H, W = image_size
    for _ in range(layers):
        H, W = (H + 1) // 2, (W + 1) // 2
    return H * W


class ConvTokenizer(nn.Module):
    """Tokens from convolutions (Hassani et al. 2021, sec. 3.2): L times Conv2d 3x3 (stride
    1, no bias), ReLU, MaxPool 3x3 of stride 2; the last has M channels and each pixel of
    its output is a token, with a learned position vector (one per token, as the patches').
    The hidden layers have 64 channels. No class token: `SequencePooling` reads them all
    (with pooling="class_token" one is put in front, as the patches').

    Args: vit (dropout), in_channels (C), image_size (H, W), embedding_size (M), layers (L),
        class_token (a class token in front).
    Shape: images (B, C, H, W) -> (B, N (+ 1), M)
    """

    hidden = 64

    def __init__(self, vit, in_channels, image_size, embedding_size, layers=2,
                 class_token=False):
        super().__init__()
        widths = [in_channels] + [self.hidden] * (layers - 1) + [embedding_size]
        self.convolutions = nn.Sequential(*[
            nn.Sequential(nn.Conv2d(a, b, 3, padding=1, bias=False), nn.ReLU(),
                          nn.MaxPool2d(3, stride=2, padding=1))
            for a, b in zip(widths, widths[1:])])
        self.num_patches = conv_tokens(image_size, layers)          # the tokens, N
        self.class_token = (nn.Parameter(torch.randn(1, 1, embedding_size) * 0.02)
                            if class_token else None)
        self.position_embeddings = nn.Parameter(
            torch.randn(1, self.num_patches + bool(class_token), embedding_size) * 0.02)
        self.dropout = nn.Dropout(vit.dropout)

    def forward(self, images):
        x = self.convolutions(images).flatten(2).transpose(1, 2)             # (B, N, M)
        if self.class_token is not None:
            x = torch.cat([self.class_token.expand(x.size(0), -1, -1), x], dim=1)
        return self.dropout(x + self.position_embeddings)                   # (B, N (+1), M)


class SequencePooling(nn.Module):
    """Attention pooling over the encoder's outputs (Hassani et al. 2021, eq. 2-4): each
    token x_t gets a weight w = softmax_t(g(x_t)), g a Linear M -> 1, and the image is
    z = sum_t w_t x_t.

    Args: embedding_size (M). Shape: (B, N, M) -> (B, M)
    """

    def __init__(self, embedding_size):
        super().__init__()
        self.g = nn.Linear(embedding_size, 1)

    def forward(self, x):
        w = torch.softmax(self.g(x), dim=1)                                 # (B, N, 1)
        return (w * x).sum(dim=1)                                           # (B, M)
