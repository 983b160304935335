from DLStudio.Transformers import TransformerFG, TransformerPreLN


class MyEncoderLayer(TransformerFG.BasicEncoder):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.dropout(self.self_attention(self.norm1(x), mask))
            return x + self.dropout(self.feed_forward(self.norm2(x)))
        x = self.norm1(x + self.dropout(self.self_attention(x, mask)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class MyTransformer(TransformerFG):
    BasicEncoder = MyEncoderLayer


class MyTransformerPreLN(TransformerPreLN):
    BasicEncoder = MyEncoderLayer
