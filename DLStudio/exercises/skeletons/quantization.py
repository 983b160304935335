"""Exercise `quantization`: weights in 8 and in 4 bits (weight-only quantization).

At batch 1 a model generates as fast as its weights stream from memory: kept in 8 bits
instead of 32, they stream four times faster. A matrix W (N out x K in) is kept as small
integers q and a few floats that bring them back, W' = dequantize(quantize(W)), near W.
Write four methods:

    MyInt8.quantize(self, W) -> {"q": int8 (N, K), "scale": (N,)}
        absmax, one scale per output channel (row n):  s_n = max_k |W_nk| / 127,
        q = round(W / s_n) to the NEAREST integer, in [-127, 127]
    MyInt8.dequantize(self, parts) -> W' (N, K) = s_n q_nk

    MyInt4.quantize(self, W) -> {"q": uint8 (N, K), "scale": (N, K / g), "zero": (N, K / g)}
        each row cut into groups of g = self.group_of(K) numbers (g = 32 here); for each
        group: low = min(min of the group, 0), high = max(max of the group, 0),
        s = (high - low) / 15, the zero point z = round(-low / s),
        q = clamp(round(W / s) + z, 0, 15)
    MyInt4.dequantize(self, parts) -> W' (N, K) = s (q - z), each group with its own s, z

(Clamp a scale of zero, a row or group of zeros, to 1e-12.) The round trip's error is at
most half a level: s / 2. The model's own Int8Quantizer.quantize and dequantize, and
Int4Quantizer's, are switched off for your code while the checks run. MyTransformer is a
TransformerGPT whose quantize("int8") and quantize("int4") use your classes.

    dlstudio check quantization quantization.py
"""
import torch

from DLStudio.Transformers import TransformerGPT


class MyInt8(TransformerGPT.Int8Quantizer):
    def quantize(self, W):
        raise NotImplementedError

    def dequantize(self, parts):
        raise NotImplementedError


class MyInt4(TransformerGPT.Int4Quantizer):
    def quantize(self, W):
        raise NotImplementedError

    def dequantize(self, parts):
        raise NotImplementedError


class MyTransformer(TransformerGPT):
    Int8Quantizer = MyInt8
    Int4Quantizer = MyInt4
