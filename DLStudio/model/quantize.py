"""Weights in fewer bits: quantization for generating (torch only, beside the architecture).

At batch 1 a step of generation reads every weight once, so it takes as long as the weights
take to stream from memory: a model kept in 8 bits a weight instead of 32 reads a quarter of
the bytes. Weight-only quantization keeps each matrix W (N out x K in) as small integers q
and a few floats, and computes with W' = dequantize(q), which is near W:

    int8, per output channel (absmax):   s_n = max_k |W_nk| / 127     q = round(W / s_n)
                                         W'_nk = s_n q_nk             q in [-127, 127]
    int4, group-wise (asymmetric):       each row cut into groups of g (32 or 64) numbers,
                                         min, max of a group (with 0: 0 is a level),
                                         s = (max - min) / 15, zero point z = round(-min / s)
                                         q = clamp(round(W / s) + z, 0, 15)
                                         W' = s (q - z)              q in [0, 15]

One scale per row (not one per matrix) keeps a row of small weights from being rounded to
zero by another row's outlier; a zero point lets the 16 levels cover [min, max] of a group
that is not centred on zero; rounding to the nearest level (not toward zero) halves the
largest error (s / 2). The round trip's error is at most half a level: s_n / 2 for int8.

`Quantizer` is the format and the product; `Int8Quantizer` and `Int4Quantizer` are nested in
each model (``gpt.Int8Quantizer``), so a student's subclass set there is used by
``gpt.quantize("int8")``. The product (``kernel``) is the readable one, F.linear with
W' computed again at every call, or one PyTorch ships (measured in
benchmarks/bench_generate.py, docs/performance.md):

    "int8pack"   torch's _weight_int8pack_mm: W' x with x as it is (weight-only)
    "fbgemm"     torch's dynamic quantized linear (FBGEMM, x86 CPUs): x rounded to integers
                 too at each call, one scale for the input (7 bits of range: FBGEMM's
                 reduce_range), as llama.cpp's 8-bit format rounds the activations
    "int4pack"   torch's _weight_int4pack_mm_for_cpu (x in bf16 for the product)
    "dequantize" F.linear(x, W'): any device, any shape (the readable fallback)

`Quantizing` is the models' mixin: ``gpt.quantize("int8" | "int4")`` replaces every Linear
the model computes with while generating (the output layer, also when it shares the
embedding's matrix; W_O; the feed-forward's) by a `QuantizedLinear`, and each attention's
W_Q, W_K, W_V of all heads (of the G key/value heads, with grouped heads) by one
`QuantizedLinear` over their stacked rows (batched_heads.py reads it). The embedding table
stays as it was (a step reads one row of it). It is for generating and evaluating: the
float weights are gone (read the model again to train it).
"""

import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize

__all__ = ["Quantizer", "Int8Quantizer", "Int4Quantizer", "QuantizedLinear", "Quantizing"]


class Quantizer:
    """How a matrix W (N, K) is kept in fewer bits: ``quantize`` (the format),
    ``dequantize`` (its round trip), ``pack`` / ``linear`` (what the product reads, and the
    product). A subclass writes ``quantize`` and ``dequantize``; ``linear`` then works."""

    kernel = "dequantize"

    def quantize(self, W):
        """W (N, K) -> {name: tensor}: the integers and the floats that bring them back."""
        raise NotImplementedError

    def dequantize(self, parts):
        """{name: tensor} -> W' (N, K), float32: the numbers the product computes with."""
        raise NotImplementedError

    def pack(self, W):
        """What `linear` reads; by default the parts themselves."""
        return self.by_rows(W)

    def by_rows(self, W, rows=4096):
        """``quantize(W)`` a block of rows at a time (each row is quantized on its own), so
        that a large matrix (the output layer) needs no full-size float temporaries."""
        blocks = [self.quantize(W[i:i + rows].float()) for i in range(0, len(W), rows)]
        return {k: torch.cat([b[k] for b in blocks]) for k in blocks[0]}

    def unpack(self, packed):
        """The parts back from what `linear` reads."""
        return packed

    def linear(self, x, packed, bias=None):
        """x (..., K) -> (..., N): x W'^T + bias. The readable product: W' again each call."""
        return F.linear(x, self.dequantize(self.unpack(packed)).to(x.dtype),
                        None if bias is None else bias.to(x.dtype))

    @staticmethod
    def bytes_of(packed):
        """The bytes a product reads: every tensor of ``packed``."""
        return sum(t.numel() * t.element_size() for t in packed.values()
                   if isinstance(t, torch.Tensor))


class Int8Quantizer(Quantizer):
    """8 bits a weight, one scale per output channel (row): absmax.
    Args: kernel: "auto" (FBGEMM on a CPU that has it, else _weight_int8pack_mm, else
    F.linear), or one of "fbgemm", "int8pack", "dequantize"."""

    kernel_rows = 1     # int8pack for one row (a step); more (a prompt): W' and a matrix
    #                     product (the CPU kernel measured 18x slower than it at 32 rows)

    def __init__(self, kernel="auto"):
        if kernel not in ("auto", "fbgemm", "int8pack", "dequantize"):
            raise ValueError(f"the int8 kernels are auto, fbgemm, int8pack and dequantize, "
                             f"got {kernel!r}")
        self.kernel = kernel

    def quantize(self, W):
        scale = W.abs().amax(dim=1).clamp(min=1e-12) / 127                # (N,) one a row
        q = torch.round(W / scale[:, None]).clamp(-127, 127).to(torch.int8)   # (N, K)
        return {"q": q, "scale": scale.float()}

    def dequantize(self, parts):
        return parts["q"].float() * parts["scale"][:, None]                # (N, K)

    def pack(self, W):
        parts = self.by_rows(W)
        kernel = self.kernel
        if kernel == "auto":
            kernel = "fbgemm" if W.device.type == "cpu" and _has_fbgemm() else "int8pack"
        if kernel == "fbgemm":
            return {"fbgemm": _fbgemm_packed(parts), "shape": tuple(W.shape)}
        return {**parts, "kernel": kernel}

    def unpack(self, packed):
        if "fbgemm" in packed:
            w, _ = torch.ops.quantized.linear_unpack(packed["fbgemm"])
            return {"q": w.int_repr(), "scale": w.q_per_channel_scales().float()}
        return packed

    def linear(self, x, packed, bias=None):
        if "fbgemm" in packed:               # x rounded to 8 bits too, at each call
            y = torch.ops.quantized.linear_dynamic(
                x if x.dtype == torch.float32 else x.float(), packed["fbgemm"], True)
        elif packed["kernel"] == "int8pack" and _int8pack_runs(x) and \
                x.numel() <= self.kernel_rows * x.size(-1):
            shape = x.shape
            y = torch.ops.aten._weight_int8pack_mm(x.reshape(-1, shape[-1]), packed["q"],
                                                   packed["scale"].to(x.dtype))
            y = y.view(*shape[:-1], -1)                                    # (..., N)
        else:
            return super().linear(x, packed, bias)
        y = y if y.dtype == x.dtype else y.to(x.dtype)
        return y if bias is None else y + bias.to(x.dtype)

    @staticmethod
    def bytes_of(packed):
        if "fbgemm" in packed:
            N, K = packed["shape"]
            return N * K + 4 * N
        return Quantizer.bytes_of(packed)


class Int4Quantizer(Quantizer):
    """4 bits a weight, a scale and a zero point for each group of ``group_size`` numbers of
    a row (a row the group does not divide: its last group as if padded with zeros).
    Args: group_size (32 or 64: more groups, smaller error, more bytes), kernel: "auto"
    (torch's int4 kernel where it takes the shape, on a CPU), "int4pack" or "dequantize"."""

    compute_dtype = torch.bfloat16      # the CPU int4 kernel's fast dtype (fp32: measured 10x
    #                                     slower on an AVX2 EPYC)

    def __init__(self, group_size=32, kernel="auto"):
        if group_size < 2 or group_size & (group_size - 1):
            raise ValueError(f"group_size is a power of two (32 or 64), got {group_size}")
        if kernel not in ("auto", "int4pack", "dequantize"):
            raise ValueError(f"the int4 kernels are auto, int4pack and dequantize, got "
                             f"{kernel!r}")
        self.group_size, self.kernel = group_size, kernel

    def group_of(self, K):
        """The group a row of K numbers is cut into: group_size (a row it does not divide is
        quantized as if padded with zeros to whole groups: 0 is a level, nothing changes)."""
        return self.group_size

    def quantize(self, W):
        N, K = W.shape
        g = self.group_of(K)
        Wg = F.pad(W, (0, -K % g)).reshape(N, -1, g)                        # (N, K / g, g)
        low, high = Wg.amin(-1).clamp(max=0), Wg.amax(-1).clamp(min=0)    # 0 is a level
        scale = ((high - low) / 15).clamp(min=1e-12)                        # (N, K / g)
        zero = torch.round(-low / scale).clamp(0, 15)
        q = (torch.round(Wg / scale[..., None]) + zero[..., None]).clamp(0, 15)
        return {"q": q.to(torch.uint8).reshape(N, -1)[:, :K], "scale": scale.float(),
                "zero": zero.to(torch.uint8)}

    def dequantize(self, parts):
        q, scale, zero = parts["q"], parts["scale"], parts["zero"]
        N, K = q.shape
        groups, g = scale.size(1), self.group_of(K)     # (the last group may be padded)
        Wg = F.pad(q.float(), (0, groups * g - K)).view(N, groups, g)
        return ((Wg - zero[..., None].float()) * scale[..., None]).reshape(N, -1)[:, :K]

    def pack(self, W):
        parts = self.by_rows(W)
        N, K = W.shape
        g = self.group_of(K)
        runs = (self.kernel != "dequantize" and W.device.type == "cpu" and g >= 32
                and K % g == 0 and N % 16 == 0
                and hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu"))
        if not runs:
            return parts
        scale, zero = parts["scale"], parts["zero"].float()
        # torch's form: W' = s (q - 8) + c, so c = s (8 - z); stored (K / g, N, 2)
        scales_zeros = torch.stack([scale, scale * (8 - zero)], -1).transpose(0, 1)
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(parts["q"].int(), 1)
        return {"int4": packed, "scales_zeros": scales_zeros.contiguous().to(
            self.compute_dtype), "group": torch.tensor(g), "shape": torch.tensor([N, K])}

    def unpack(self, packed):
        if "int4" not in packed:
            return packed
        K = int(packed["shape"][1])                 # W'^T = identity through the product
        eye = torch.eye(K, dtype=self.compute_dtype)
        W = self.product(eye, packed).float().t()                           # (N, K)
        return self.quantize(W)

    def product(self, x, packed):
        return torch.ops.aten._weight_int4pack_mm_for_cpu(
            x, packed["int4"], int(packed["group"]), packed["scales_zeros"])

    def linear(self, x, packed, bias=None):
        if "int4" not in packed:
            return super().linear(x, packed, bias)
        shape = x.shape
        y = self.product(x.reshape(-1, shape[-1]).to(self.compute_dtype), packed)
        y = y.view(*shape[:-1], -1).to(x.dtype)                             # (..., N)
        return y if bias is None else y + bias.to(x.dtype)

    @staticmethod
    def bytes_of(packed):
        return Quantizer.bytes_of({k: v for k, v in packed.items() if k != "shape"})


def _has_fbgemm():
    return any(e in torch.backends.quantized.supported_engines for e in ("fbgemm", "x86"))


def _fbgemm_packed(parts):
    """The int8 rows and their scales in FBGEMM's packed form (per-channel, zero point 0)."""
    with warnings.catch_warnings():      # (torch marks its quantized tensors as deprecated)
        warnings.simplefilter("ignore")
        q = torch._make_per_channel_quantized_tensor(
            parts["q"], parts["scale"].double(), torch.zeros(len(parts["q"]), dtype=torch.long),
            0)
        return torch.ops.quantized.linear_prepack(q, None)


def _int8pack_runs(x):
    return x.dtype in (torch.float32, torch.bfloat16, torch.float16) and \
        x.device.type in ("cpu", "cuda")


class QuantizedLinear(nn.Module):
    """A Linear whose weight is kept by a `Quantizer`. Made from a matrix and its bias.
    Shape: (..., K) -> (..., N). ``dequantized()``: W' (N, K), the numbers it computes with
    (made again at each call: to look at). It has no ``weight``: code that reads a Linear's
    weight is not given a copy it did not ask for."""

    def __init__(self, quantizer, W, bias=None):
        super().__init__()
        self.quantizer = quantizer
        self.out_features, self.in_features = W.shape
        with torch.no_grad():
            self.packed = quantizer.pack(W.detach())
        for name, t in self.packed.items():             # tensors move with .to(): buffers
            if isinstance(t, torch.Tensor):
                self.register_buffer(f"_{name}", t, persistent=False)
        keep = bias is not None and bool(bias.detach().abs().max() > 0)
        self.register_buffer("bias", bias.detach().clone() if keep else None)

    def _apply(self, fn, recurse=True):
        """(.to(), .cpu() ...: the buffers move; what the kernel reads is made of them again)"""
        module = super()._apply(fn, recurse)
        self.packed = self._parts()
        return module

    def _parts(self):
        return {k: getattr(self, f"_{k}") if isinstance(v, torch.Tensor) else v
                for k, v in self.packed.items()}

    def forward(self, x):
        return self.quantizer.linear(x, self.packed, self.bias)

    def dequantized(self):
        return self.quantizer.dequantize(self.quantizer.unpack(self._parts()))

    def weight_bytes(self):
        """The bytes a product reads (the integers, scales and zero points)."""
        return self.quantizer.bytes_of(self._parts()) + (
            0 if self.bias is None else self.bias.numel() * self.bias.element_size())

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"{type(self.quantizer).__name__}, kernel={self.quantizer.kernel}")


class Quantizing:
    """``model.quantize(...)``: the models' mixin (GPT, translation, BERT). The quantizer
    classes are looked up on the model, so a student's subclass there is used."""

    Int8Quantizer = Int8Quantizer
    Int4Quantizer = Int4Quantizer
    quantized_as = None

    def quantize(self, kind="int8", group_size=32, kernel="auto"):
        """Quantize this model's weights for generating: ``kind`` "int8", "int4" or a
        `Quantizer`. Returns the model (now in evaluation mode)."""
        if isinstance(kind, Quantizer):
            quantizer = kind
        elif kind == "int8":
            quantizer = self.Int8Quantizer(kernel=kernel)
        elif kind == "int4":
            quantizer = self.Int4Quantizer(group_size=group_size, kernel=kernel)
        else:
            raise ValueError(f"quantize takes 'int8', 'int4' or a Quantizer, got {kind!r}")
        if self.quantized_as is not None:
            raise ValueError(f"this model is quantized already ({self.quantized_as}): read it "
                             "again to quantize it another way")
        if any(parametrize.is_parametrized(m) for m in self.modules()):
            raise ValueError("this model has LoRA that is not merged: merge_lora() first, "
                             "then quantize")
        self.eval()
        for attention in [m for m in self.modules() if hasattr(m, "quantized_projections")]:
            attention.quantized_projections(quantizer)
        for parent in list(self.modules()):
            for name, child in list(parent.named_children()):
                if type(child) is nn.Linear:
                    setattr(parent, name, QuantizedLinear(quantizer, child.weight,
                                                          child.bias))
        self.quantized_as = type(quantizer).__name__
        return self

    def weight_bytes(self):
        """The bytes a step at batch 1 reads: each weight matrix and vector once (a matrix
        two modules share, once); an embedding table not, unless a Linear reads it too
        (the lookup reads one row)."""
        seen, total = set(), 0
        tables = {m.weight.data_ptr() for m in self.modules() if isinstance(m, nn.Embedding)}
        read = {m.weight.data_ptr() for m in self.modules() if isinstance(m, nn.Linear)}
        for module in self.modules():
            if isinstance(module, QuantizedLinear):
                total += module.weight_bytes()
            for p in module.parameters(recurse=False):
                ptr = p.data_ptr()
                if ptr not in seen and (ptr not in tables or ptr in read):
                    seen.add(ptr)
                    total += p.numel() * p.element_size()
        return total
