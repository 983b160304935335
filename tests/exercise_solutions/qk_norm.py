
from DLStudio.model.architecture import scaled_dot_product
from DLStudio.Transformers import TransformerGPT


class MyHead(TransformerGPT.AttentionHead):
    def forward(self, x, mask=None, memory=None):
        kv = x if memory is None else memory
        Q, K = self.WQ(x), self.WK(kv)
        if self.q_norm is not None:
            Q, K = self.q_norm(Q), self.k_norm(K)
        if self.rotary is not None:
            Q, K = self.rotary(Q), self.rotary(K)
        out, weights = scaled_dot_product(Q, K, self.WV(kv), mask)
        self.keep_weights(weights)
        return out


class MyTransformer(TransformerGPT):
    AttentionHead = MyHead
