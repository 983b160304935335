"""Exercise `residual_blocks`: an encoder layer, post-LN (FG) and pre-LN (PreLN).

Write `MyEncoderLayer.forward(x, mask)`. The constructor (given) builds self.self_attention
(called as self.self_attention(y, mask)), self.feed_forward (self.feed_forward(y)),
self.norm1 and self.norm2 (LayerNorms over M), self.dropout, and self.norm_first.
    x (B, T, M); mask: None, or bool broadcastable to (B, H, T, T). Returns (B, T, M).
Each sublayer (first self-attention, then the feed-forward network) sits inside a residual
connection, with dropout on the sublayer's output:
    post-LN (norm_first False; Vaswani et al. 2017, sec. 3.1):  x = norm(x + drop(sub(x)))
    pre-LN  (norm_first True; Xiong et al. 2020, Fig. 1(b)):     x = x + drop(sub(norm(x)))
self.norm1 goes with the self-attention, self.norm2 with the feed-forward network. The
model's own layer and its residual function are switched off for your class while the checks
run. MyTransformer (FG) and MyTransformerPreLN use your layer in their encoders.

    dlstudio check residual_blocks residual_blocks.py [--train]
    python3 seq2seq_with_transformerFG.py --model-class residual_blocks:MyTransformer
    python3 seq2seq_with_transformerPreLN.py --model-class residual_blocks:MyTransformerPreLN
"""
from DLStudio.Transformers import TransformerFG, TransformerPreLN


class MyEncoderLayer(TransformerFG.BasicEncoder):
    def forward(self, x, mask=None):
        raise NotImplementedError


class MyTransformer(TransformerFG):
    BasicEncoder = MyEncoderLayer


class MyTransformerPreLN(TransformerPreLN):
    BasicEncoder = MyEncoderLayer
