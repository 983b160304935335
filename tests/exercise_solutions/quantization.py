import torch

from DLStudio.Transformers import TransformerGPT


class MyInt8(TransformerGPT.Int8Quantizer):
    def quantize(self, W):
        scale = W.abs().amax(dim=1).clamp(min=1e-12) / 127
        q = torch.round(W / scale[:, None]).clamp(-127, 127).to(torch.int8)
        return {"q": q, "scale": scale}

    def dequantize(self, parts):
        return parts["q"].to(parts["scale"].dtype) * parts["scale"][:, None]


class MyInt4(TransformerGPT.Int4Quantizer):
    def quantize(self, W):
        N, K = W.shape
        g = self.group_of(K)
        Wg = W.reshape(N, K // g, g)
        low, high = Wg.amin(-1).clamp(max=0), Wg.amax(-1).clamp(min=0)
        scale = ((high - low) / 15).clamp(min=1e-12)
        zero = torch.round(-low / scale)
        q = (torch.round(Wg / scale[..., None]) + zero[..., None]).clamp(0, 15)
        return {"q": q.reshape(N, K).to(torch.uint8), "scale": scale, "zero": zero}

    def dequantize(self, parts):
        q, scale, zero = parts["q"], parts["scale"], parts["zero"]
        N, K = q.shape
        Wg = q.reshape(N, scale.size(1), -1).to(scale.dtype) - zero[..., None]
        return (Wg * scale[..., None]).reshape(N, K)


class MyTransformer(TransformerGPT):
    Int8Quantizer = MyInt8
    Int4Quantizer = MyInt4
