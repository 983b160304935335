"""Exercise `patch_embedding`: an image as a sentence of patches, with a class token
(Dosovitskiy et al. 2020, eq. 1).

Write `MyPatchEmbedding.forward(images)`. The constructor (given) builds self.patch_size
(P_h, P_w), self.num_patches (N_p), self.W_E (nn.Linear(C P_h P_w, M)), self.class_token
(a parameter of shape (1, 1, M)), self.position_embeddings ((1, 1 + N_p, M)), self.dropout.
    images (B, C, H, W) -> (B, 1 + N_p, M):
    1. cut each image into P_h x P_w patches, row by row (left to right, then down);
    2. flatten each patch channel by channel: its C P_h P_w numbers in the order of
       patch[c, i, j] (all of channel 0 first);
    3. project every patch with W_E: (B, N_p, M);
    4. put the class token in front of every image's patches: (B, 1 + N_p, M);
    5. add the position embeddings, then apply self.dropout.
The model's own forward and patch cutting are switched off for your class while the checks
run. MyViT is a visTransformer that builds your class.

    dlstudio check patch_embedding patch_embedding.py [--train]
    python3 image_recog_with_visTransformer.py --model-class patch_embedding:MyViT
"""
import torch

from DLStudio.Transformers import visTransformer


class MyPatchEmbedding(visTransformer.PatchEmbeddingGenerator):
    def forward(self, images):
        raise NotImplementedError


class MyViT(visTransformer):
    PatchEmbeddingGenerator = MyPatchEmbedding
