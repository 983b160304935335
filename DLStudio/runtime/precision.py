"""The number format training computes in: ``--precision {fp32,bf16,fp16,auto}``.

    fp32   every operation in 32-bit floats (the default, see docs/performance.md)
    bf16   autocast: matrix products in bfloat16 (8 bits of mantissa, fp32's range), the
           weights, the softmax, the LayerNorms and the loss in fp32. Fast where the hardware
           multiplies bf16 natively: recent GPUs, and CPUs with AVX512-BF16 or AMX.
    fp16   autocast in float16 with a gradient scaler (its small range would flush small
           gradients to zero); CUDA only.
    auto   bf16 where the device has it natively, fp32 elsewhere.
"""

import logging

import torch

__all__ = ["PRECISIONS", "Precision", "native_bf16"]

PRECISIONS = ("fp32", "bf16", "fp16", "auto")
log = logging.getLogger(__name__)


def native_bf16(device):
    """Does ``device`` multiply bfloat16 in hardware? (CUDA: compute capability 8 and up;
    CPU: the avx512_bf16 or amx_bf16 flag of /proc/cpuinfo.)"""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        try:
            with open("/proc/cpuinfo") as f:
                flags = f.read()
        except OSError:
            return False
        return " avx512_bf16" in flags or " amx_bf16" in flags
    return False


class Precision:
    """What ``--precision`` means on one device: ``autocast()`` around the forward pass and
    the loss, and ``scaler`` (a GradScaler, active with fp16 only) around backward and step.

    Args: name (one of PRECISIONS), device.
    Raises ValueError for fp16 off CUDA, and for an unknown name.
    """

    _warned = False          # bf16 emulated on this CPU: said once per process

    def __init__(self, name, device):
        if name not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {name!r}")
        if name == "auto":
            name = "bf16" if native_bf16(device) else "fp32"
        if name == "fp16" and device.type != "cuda":
            raise ValueError(f"--precision fp16 needs a CUDA GPU (its gradient scaler is "
                             f"CUDA's); on {device.type}, use bf16 or fp32")
        if name == "bf16" and device.type == "cpu" and not native_bf16(device) \
                and not Precision._warned:
            Precision._warned = True
            log.warning("this CPU has no native bfloat16 (no avx512_bf16 / amx_bf16): bf16 "
                        "is emulated here and is likely slower than fp32")
        self.name, self.device = name, device
        self.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16,
                      "fp16": torch.float16}[name]
        self.scaler = torch.amp.GradScaler(device.type, enabled=name == "fp16")

    def autocast(self):
        return torch.autocast(self.device.type, dtype=self.dtype, enabled=self.name != "fp32")

    @property
    def scales(self):
        """True when the gradient scaler is active: an infinite gradient then only means
        that the scale was too large (the step is skipped and the scale lowered)."""
        return self.scaler.is_enabled()

    def __repr__(self):
        return f"Precision({self.name!r}, {self.device})"
