
from DLStudio.model.architecture import scaled_dot_product
from DLStudio.Transformers import TransformerPreLN


class MyGroupedAttention:
    def weighted(self, Q, K, V, mask):
        K = K.repeat_interleave(self.group, dim=1)                 # (B, H, T_k, s)
        V = V.repeat_interleave(self.group, dim=1)
        return scaled_dot_product(Q, K, V, mask)


class MySelfAttention(MyGroupedAttention, TransformerPreLN.SelfAttention):
    pass


class MyCrossAttention(MyGroupedAttention, TransformerPreLN.CrossAttention):
    pass


class MyTransformer(TransformerPreLN):
    SelfAttention = MySelfAttention
    CrossAttention = MyCrossAttention
