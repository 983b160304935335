import torch

from DLStudio.Transformers import visTransformer


class MyPatchEmbedding(visTransformer.PatchEmbeddingGenerator):
    def forward(self, images):
        B, C, H, W = images.shape
        P_h, P_w = self.patch_size
        rows = []
        for top in range(0, H, P_h):
            for left in range(0, W, P_w):
                rows.append(images[:, :, top:top + P_h, left:left + P_w].reshape(B, -1))
        patches = torch.stack(rows, dim=1)
        x = self.W_E(patches)
        cls = self.class_token.expand(B, 1, -1)
        x = torch.cat([cls, x], dim=1) + self.position_embeddings
        return self.dropout(x)


class MyViT(visTransformer):
    PatchEmbeddingGenerator = MyPatchEmbedding
