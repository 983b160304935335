"""An image read as a sentence of patches (Dosovitskiy et al. 2020): the encoder of
architecture.py (the file to read first) with a patch embedding in front and a class token's
classifier behind. Torch only, built from sizes."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .architecture import TransformerParts
from .hooks import Hooked
from .overrides import check_forwards
from .recorder import record_attention
from .small_images import ConvTokenizer, SequencePooling, conv_tokens

__all__ = ["VisionParts"]


class VisionParts(Hooked, TransformerParts, nn.Module):
    """A vision transformer (Dosovitskiy et al. 2020): an image is read as a sentence of
    patches by the translation model's own encoder classes, and classified from a class token.

        image ──> PatchEmbeddingGenerator ──────────> MasterEncoder ──> class token ──> Linear
        (B, C, H, W)  patches, W_E, class token,       (N x BasicEncoder,  its output   (B, K)
                      positions: (B, 1 + N_p, M)        FG or PreLN)       (B, M)

    Shapes add C channels, H x W image, P_h x P_w patch, N_p = (H / P_h)(W / P_w), K classes.
    Args (keyword-only): num_classes (K), patch_size (P_h, P_w) dividing image_size (H, W),
        in_channels (C), num_basic_encoders (N), num_atten_heads (H), norm_first (pre-LN by
        default), and the sizes of `TransformerParts` (max_seq_length is 1 + N_p).
        The small-data switches (small_images.py): tokenizer ("patches" | "conv":
        ConvTokenizer of conv_layers layers), pooling ("class_token" | "sequence":
        SequencePooling, no class token).
    Shape: images (B, C, H, W), floats in [0, 1] -> logits (B, K)
    """

    norm_first = True
    ConvTokenizer, SequencePooling = ConvTokenizer, SequencePooling     # small_images.py
    TOKENIZERS, POOLINGS = ("patches", "conv"), ("class_token", "sequence")

    class PatchEmbeddingGenerator(nn.Module):
        """Patches -> vectors: cut every image into P_h x P_w patches, flatten each with its
        C channels together (C P_h P_w numbers, channel by channel), project to M with W_E,
        put the learnable class token in front and add the learnable position embeddings
        (Dosovitskiy et al. 2020, eq. 1).

        Shape: images (B, C, H, W) -> (B, 1 + N_p, M)
        """

        def __init__(self, vit, in_channels, patch_size, image_size, embedding_size):
            super().__init__()
            (P_h, P_w), (H, W) = patch_size, image_size
            if H % P_h or W % P_w:
                raise ValueError(f"patch_size {tuple(patch_size)} does not divide image_size "
                                 f"{tuple(image_size)}: choose a patch size that does")
            self.patch_size = (P_h, P_w)
            self.num_patches = (H // P_h) * (W // P_w)
            self.W_E = nn.Linear(in_channels * P_h * P_w, embedding_size)
            self.class_token = nn.Parameter(torch.randn(1, 1, embedding_size) * 0.02)
            self.position_embeddings = nn.Parameter(
                torch.randn(1, 1 + self.num_patches, embedding_size) * 0.02)
            self.dropout = nn.Dropout(vit.dropout)

        @staticmethod
        def patches(images, patch_size):
            """Shape: (B, C, H, W) -> (B, N_p, C P_h P_w), patches row by row."""
            B, C, H, W = images.shape
            P_h, P_w = patch_size
            x = images.unfold(2, P_h, P_h).unfold(3, P_w, P_w)   # (B, C, H/P_h, W/P_w, P_h, P_w)
            x = x.permute(0, 2, 3, 1, 4, 5)                       # (B, H/P_h, W/P_w, C, P_h, P_w)
            return x.reshape(B, -1, C * P_h * P_w)                # (B, N_p, C P_h P_w)

        def forward(self, images):
            x = self.W_E(self.patches(images, self.patch_size))              # (B, N_p, M)
            cls = self.class_token.expand(x.size(0), -1, -1)                 # (B, 1, M)
            x = torch.cat([cls, x], dim=1) + self.position_embeddings         # (B, 1 + N_p, M)
            return self.dropout(x)

    def __init__(self, *, num_classes, patch_size=(8, 8), image_size=(32, 32), in_channels=3,
                 num_basic_encoders=4, num_atten_heads=4, tokenizer="patches",
                 pooling="class_token", conv_layers=2, **sizes):
        nn.Module.__init__(self)
        (P_h, P_w), (H, W) = patch_size, image_size
        if sizes.get("positions", "learned") not in ("learned", "sinusoidal"):
            raise ValueError(f"positions={sizes['positions']!r} is not for images: the patches "
                             "carry learned position embeddings (a 2-D grid), so the queries "
                             "and keys are not turned too; leave positions out")
        for name, value, allowed in (("tokenizer", tokenizer, self.TOKENIZERS),
                                     ("pooling", pooling, self.POOLINGS)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        self.tokenizer, self.pooling, self.conv_layers = tokenizer, pooling, conv_layers
        tokens = (conv_tokens(image_size, conv_layers) + (pooling == "class_token")
                  if tokenizer == "conv" else 1 + (H // P_h) * (W // P_w))
        TransformerParts.__init__(self, max_seq_length=tokens, **sizes)
        self.patch_size, self.image_size = tuple(patch_size), tuple(image_size)
        self.in_channels = in_channels
        self.num_basic_encoders, self.num_atten_heads = num_basic_encoders, num_atten_heads
        check_forwards(self, ["AttentionHead", "SelfAttention", "FeedForward", "BasicEncoder",
                              "MasterEncoder"])
        if tokenizer == "conv":        # convolutions make the tokens (small_images.py)
            self.patch_embedding_generator = self.ConvTokenizer(
                self, in_channels, self.image_size, self.embedding_size, conv_layers,
                class_token=pooling == "class_token")
        else:           # (with pooling="sequence" its class token is pooled with the rest)
            self.patch_embedding_generator = self.PatchEmbeddingGenerator(
                self, in_channels, self.patch_size, self.image_size, self.embedding_size)
        self.sequence_pooling = (self.SequencePooling(self.embedding_size)
                                 if pooling == "sequence" else None)
        self.master_encoder = self.MasterEncoder(None, self, num_basic_encoders,
                                                 num_atten_heads)
        self.classifier = nn.Linear(self.embedding_size, num_classes)       # (B, M) -> (B, K)
        # Pixel statistics of the training images, kept with the weights.
        self.register_buffer("pixel_mean", torch.full((in_channels,), 0.5))
        self.register_buffer("pixel_std", torch.full((in_channels,), 0.25))

    def forward(self, images):
        x = (images - self.pixel_mean[:, None, None]) / self.pixel_std[:, None, None]
        x = self.patch_embedding_generator(x)                               # (B, 1 + N_p, M)
        x = self.master_encoder(x)                                          # (B, 1 + N_p, M)
        if self.sequence_pooling is not None:        # every token, weighted: (B, M)
            return self.classifier(self.sequence_pooling(x))                # (B, K)
        return self.classifier(x[:, 0])                                     # (B, K)

    def loss(self, images, labels, label_smoothing=0.0, run=None):
        """As EncoderDecoder.loss. Shape: images (B, C, H, W), labels (B,) -> sum, B"""
        logits = (self if run is None else run)(images)                   # (B, K)
        return F.cross_entropy(logits, labels, reduction="sum",
                               label_smoothing=label_smoothing), len(labels)

    def attention_maps(self, images):
        """The self-attention weights of every encoder layer for these images: a list (one
        per layer) of (B, H, 1 + N_p, 1 + N_p); row 0 is where the class token looks."""
        layers = [enc.self_attention for enc in self.master_encoder.basic_encoder_arr]
        with torch.no_grad():
            return record_attention(layers, lambda: self(images))

