"""How the tests compare floating-point results: relative to the reference's scale and to the
dtype's epsilon, so that a comparison holds on every CPU (AVX2, AVX-512, the plain kernels
of ``ATEN_CPU_CAPABILITY=default``) and fails wherever the code is wrong.

Two computations of the same numbers differ by rounding: each sum of n products is off by a
few units of the dtype's epsilon times the size of what it adds up, and different kernels
(blocked or not, fused multiply-add or not) round in a different order. An absolute
tolerance such as 1e-5 is then a guess about the size of the numbers: logits of 10 already
sit near 1e-6 of rounding apiece, and a wider kernel crosses it. Here the allowed difference
is ``ulps`` units of the dtype's epsilon times the reference's largest magnitude (its scale;
give ``scale`` where the numbers were computed from larger ones, a difference of two near-
equal sums say), or ``rel``, a share of the scale, where the code itself moves the numbers
by more than rounding (a norm's epsilon, a quantised copy). A NaN or an infinity on either
side fails, and so do different shapes; an infinity passes only where the other side has
the same one (a masked score).

The default, 256 units in float32 and float64 (3e-5 of the scale in float32) and 4 in the
16-bit types (3% in bfloat16, whose epsilon is 1/128), is a bound on rounding for the depths
the tests use, and far below what a wrong mask, a missing scale or a misread weight does (a
tenth of the scale or more): ``differ`` checks that gap the other way.
"""

import math

import torch

__all__ = ["tolerance", "close", "assert_close", "differ"]

#: Units of epsilon allowed by default, by the width of the dtype: see the module's docstring.
ULPS = {64: 256, 32: 256, 16: 4}


def _pair(got, want):
    got, want = torch.as_tensor(got), torch.as_tensor(want)
    if got.shape != want.shape:
        raise AssertionError(f"shapes differ: {tuple(got.shape)} against {tuple(want.shape)}")
    return got, want


def tolerance(want, ulps=None, dtype=None, scale=None, rel=None):
    """The difference allowed against the reference ``want``: ``ulps`` epsilons of ``dtype``
    (by default ``want``'s), or ``rel``, times ``scale`` (by default its largest magnitude)."""
    want = torch.as_tensor(want)
    dtype = dtype or (want.dtype if want.is_floating_point() else torch.float32)
    if scale is None:
        scale = want.detach().double().abs().max().item() if want.numel() else 0.0
    ulps = ULPS[torch.finfo(dtype).bits] if ulps is None else ulps
    share = ulps * torch.finfo(dtype).eps if rel is None else rel
    return share * max(scale, torch.finfo(dtype).tiny)


def _worst(got, want, ulps, dtype, scale, rel=None):
    got, want = _pair(got, want)
    if dtype is None:            # the coarser of the two: a bf16 result against a fp32 one
        kinds = [t.dtype for t in (got, want) if t.is_floating_point()] or [torch.float32]
        dtype = max(kinds, key=lambda d: torch.finfo(d).eps)
    got, want = got.detach().double(), want.detach().double()
    infinite = want.isinf()            # a -inf where a mask put one: the same on both sides
    if got.isnan().any() or want.isnan().any() or not torch.equal(got.isinf(), infinite) \
            or not torch.equal(got[infinite], want[infinite]):
        return math.nan, 0.0
    diff = (got - want)[~infinite].abs()
    worst = diff.max().item() if diff.numel() else 0.0
    return worst, tolerance(want[~infinite], ulps, dtype, scale, rel)


def close(got, want, ulps=None, dtype=None, scale=None, rel=None):
    """Whether ``got`` is ``want`` up to rounding (False on NaN, infinity or other shapes)."""
    try:
        worst, tol = _worst(got, want, ulps, dtype, scale, rel)
    except AssertionError:
        return False
    return worst <= tol            # NaN compares False


def assert_close(got, want, ulps=None, dtype=None, scale=None, rel=None, what=""):
    """Fail, saying by how much and against what, unless ``got`` is ``want`` up to
    rounding."""
    worst, tol = _worst(got, want, ulps, dtype, scale, rel)
    if not worst <= tol:           # NaN compares False
        allowed = f"{ulps or 'the default'} epsilons" if rel is None else f"{rel:g}"
        raise AssertionError(f"{what + ': ' if what else ''}differs by {worst:.3g} where "
                             f"{tol:.3g} is allowed ({allowed} of the scale)")


def differ(got, want, by=1e-2):
    """Whether ``got`` is away from ``want`` by more than ``by`` of ``want``'s scale: a change
    that rounding cannot make. False on NaN."""
    got, want = _pair(got, want)
    diff = (got.detach().double() - want.detach().double()).abs().max().item()
    return diff > by * want.detach().double().abs().max().item()
