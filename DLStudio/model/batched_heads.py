"""The batched path of multi-head attention, beside the cache it reads: what
`SelfAttention.per_head` computes head by head (its definition, architecture.py), computed
for all heads at once. Head i's W_Q, W_K, W_V are the i-th of H stacked matrices, and one
batched product applies each to its slice of every word; while decoding, the stacked
weights and the earlier words' keys and values come from the `KeyValueCache`. It runs for
the standard head only (`can_batch`): a student's head runs as written.

    class SelfAttention(BatchedHeads, nn.Module): ...      # architecture.py
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import since_2023
from .lora import with_branches
from .overrides import runs_base, say_once
from .quantize import QuantizedLinear
from .relative_positions import stacked_bias
from .since_2017 import repeat_kv

__all__ = ["BatchedHeads"]


def _adjacent(tensors):
    """Whether the tensors lie one after another in one block of memory, in this order."""
    first = tensors[0]
    where, at = first.untyped_storage().data_ptr(), first.storage_offset()
    for t in tensors:
        if t.untyped_storage().data_ptr() != where or t.storage_offset() != at \
                or not t.is_contiguous():
            return False
        at += t.numel()
    return True


def _joined(tensors):
    """The `_adjacent` tensors as one, stacked along their first axis: a view, no copy."""
    first = tensors[0]
    return first.as_strided((sum(t.size(0) for t in tensors), *first.shape[1:]),
                            first.stride())


def dequantized(quantized, H, dtype):
    """A `QuantizedLinear`'s W' and bias as `BatchedHeads.stacked` gives them (heads reading
    their own slices: the batched product of a dequantized copy, at each call)."""
    W = quantized.dequantized().to(dtype)                                      # (H k s, s_in)
    b = W.new_zeros(W.size(0)) if quantized.bias is None else quantized.bias.to(dtype)
    return b.view(H, 1, -1), W.view(H, -1, W.size(-1)).transpose(1, 2)


#: PyTorch's fused attention reads G key/value heads for H query heads itself (torch 2.5).
GQA_IN_SDPA = tuple(int(n) for n in torch.__version__.split(".")[:2]) >= (2, 5)


class BatchedHeads:
    """The batched arithmetic of `SelfAttention` (which provides ``heads``, ``qkv_size``,
    ``num_atten_heads``, ``full_width``, ``kv_cache``, ``record_attention`` and
    ``weighted``, the readable attention, ``group``, ``rotary``, ``q_norm``,
    ``k_norm``, ``score_scale``). Line (A) is in `all_heads`."""

    fused = True       # F.scaled_dot_product_attention in the batched path (measured)
    fused_cpu_bf16 = False   # ... for bf16 on a CPU too (a real model's, as transformers)
    one_block = True   # the heads' weights in one block (`shared`); False: FSDP lays them out

    def all_heads(self, x_q, x_kv, mask):
        """What `per_head` computes, without a loop over heads: head i's W_Q, W_K, W_V are
        the i-th of H stacked matrices, and one batched product (torch.baddbmm) applies
        each to its slice of every word (the numbers `per_head` gives). Line (A): PyTorch's
        fused attention (unless a hook reads the scores or the pattern: hooks.py), but for
        bf16 on a CPU, where it measured slower (benchmarks/
        bench_attention.py), unless ``fused_cpu_bf16`` (a real model's folder: the kernel
        transformers computes it with); attention maps use the readable one (``self.weighted``:
        architecture.scaled_dot_product), which returns the weights."""
        B, T_q, M = x_q.shape
        Q, K, V = self.queries_keys_values(x_q, x_kv)                  # (B, H, T, s_qkv)
        cpu_bf16 = Q.dtype == torch.bfloat16 and Q.device.type == "cpu" \
            and not self.fused_cpu_bf16
        bias = self.positions_bias(Q, K)              # relative positions, ALiBi, or None
        looked_at = self.hook_attn_scores.active or self.hook_pattern.active   # (hooks.py)
        if self.fused and not self.record_attention and not cpu_bf16 and not looked_at:  # (A)
            grouped = {"enable_gqa": True} if GQA_IN_SDPA and self.group > 1 else {}
            if not grouped:        # (torch < 2.5: the groups' keys and values, repeated)
                K, V = repeat_kv(K, self.group), repeat_kv(V, self.group)
            allowed = None if mask is None else ~mask
            if bias is not None:               # one float mask: the terms, -inf where masked
                allowed = bias if mask is None else bias.masked_fill(mask, float("-inf"))
            out = F.scaled_dot_product_attention(
                Q, K, V, attn_mask=allowed, scale=self.score_scale,
                **grouped)                                             # (B, H, T_q, s_qkv)
        else:
            extra = () if bias is None else (bias,)
            out, weights = self.weighted(Q, K, V, mask, *extra)        # (B, H, T_q, s_qkv)
            if self.record_attention:
                self.attention_weights = weights.detach()              # (B, H, T_q, T_k)
        out = self.hook_z(out)                     # each head's output (hooks.py)
        return out.transpose(1, 2).reshape(B, T_q, -1)                 # (B, T_q, H s_qkv)

    def positions_bias(self, Q, K):
        """The heads' relative-position or ALiBi terms (relative_positions.py), all heads at
        once, or None. Shape: Q (B, H, T_q, s_qkv), K (B, G, T_k, s_qkv) -> (B | 1, H, T_q, T_k)
        """
        first = self.heads[0]
        if all(getattr(first, kind, None) is None for kind in ("relative", "alibi", "t5")):
            return None
        scale = self.score_scale or Q.size(-1) ** -0.5
        return stacked_bias(list(self.heads), Q, repeat_kv(K, self.group), scale)

    reads_memory = False    # CrossAttention: keys and values from the encoder's output

    def queries_keys_values(self, x_q, x_kv):
        """Self-attention: the earlier words' K, V (the cache), then these; cross-attention:
        the memory's K, V, computed at the first step of decoding and kept. With
        ``kv_heads`` (``group`` > 1) K and V are computed, and cached, for the G key/value
        heads only (`all_heads` repeats them for their groups' query heads); with RoPE, Q
        and K of self-attention are turned, counting from the words already in the cache.
        Shape: -> Q (B, H, T_q, s_qkv), K and V (B, G, T_k, s_qkv)"""
        kv_heads = list(self.heads)[::self.group]             # every head's, or one a group
        if self.reads_memory:
            Q, = self.project(x_q, ("WQ",))
            K, V = self.kv_cache.once(lambda: self.normed_keys(
                self.project(x_kv, ("WK", "WV"), kv_heads)))
            Q = Q if self.q_norm is None else self.normed(self.q_norm, Q)
            return self.hook_q(Q), self.hook_k(K), self.hook_v(V)     # (hooks.py)
        else:
            if self.group == 1:                                # one product for all three
                Q, K, V = self.project(x_q, ("WQ", "WK", "WV"))
            else:
                (Q,), (K, V) = self.project(x_q, ("WQ",)), self.project(x_q, ("WK", "WV"),
                                                                         kv_heads)
            if self.q_norm is not None:                       # QK-norm, before the turn
                Q, (K, V) = self.normed(self.q_norm, Q), self.normed_keys((K, V))
            if self.rotary is not None:
                offset = self.kv_cache.length                 # the newest word's position
                Q, K = self.rotary(Q, offset), self.rotary(K, offset)
            Q, K, V = self.hook_q(Q), self.hook_k(K), self.hook_v(V)  # new words' (hooks.py)
            K, V = self.kv_cache.extend(K, V)
        return Q, K, V

    def normed_keys(self, kv):
        """(K, V) with K normalised by ``k_norm`` (QK-norm; since_2023.py), where there is one."""
        K, V = kv
        return (K if self.k_norm is None else self.normed(self.k_norm, K)), V

    qk_across_heads = False    # qk_norm="all_heads": its norms read all heads at once

    def normed(self, norm, X):
        """X (B, H, T, s_qkv) through a QK-norm: each head's numbers, or all heads' at once
        (``qk_across_heads``, qk_norm="all_heads": a norm of H s_qkv numbers)."""
        return since_2023.across_heads(norm, X) if self.qk_across_heads else norm(X)

    def project(self, x, names, heads=None):
        """Each of ``heads``' (all by default) W_<name> for each name, applied to its slice of
        every word (all of it with full-width heads).

        Shape: x (B, T, M) -> one (B, H, T, s_qkv) per name (H: len(heads))
        """
        B, T, M = x.shape
        heads = self.heads if heads is None else heads
        H, s = len(heads), self.qkv_size
        quantized = self._modules.get("quantized")             # after model.quantize
        quantized = None if quantized is None else quantized[",".join(names)]
        if quantized is not None and self.full_width:       # weights in fewer bits
            out = quantized(x.reshape(B * T, M))                        # (B T, H k s)
            return list(out.view(B, T, H, -1).transpose(1, 2).chunk(len(names), dim=-1))
        b, W = self.kv_cache.weights(names, lambda n: self.stacked(n, heads)) \
            if quantized is None else dequantized(quantized, H, x.dtype)
        if self.full_width:      # every head reads all of x: one (M, H k s) product
            out = torch.addmm(b.reshape(1, -1), x.reshape(B * T, M),
                              W.transpose(1, 2).reshape(-1, M).t())     # (B T, H k s)
            outs = list(out.view(B, T, H, -1).transpose(1, 2)            # (B, H, T, k s)
                        .chunk(len(names), dim=-1))                     # (B, H, T, s_qkv)
            if self.training:                   # LoRA in training: B A x beside W x
                outs = with_branches(x, outs, [[getattr(h, n) for h in heads] for n in names])
            return outs
        x = x.reshape(B * T, H, s).transpose(0, 1)                      # (H, B T, s_qkv)
        out = torch.baddbmm(b, x, W)                                    # (H, B T, k s)
        return [t.view(H, B, T, s).transpose(0, 1)                      # (B, H, T, s_qkv)
                for t in out.chunk(len(names), dim=-1)]

    def stacked(self, names, heads):
        """The heads' weights and biases side by side: (H, 1, k s), (H, s_in, k s). While
        gradients are recorded, one cat of the heads' parameters (autograd then hands each
        head its share). Without them (decoding, evaluation), a view: the heads' weights
        are moved, the first time, into one block of memory in this order (`shared`), each
        head's Parameter a view of its rows, so that reading all of them copies nothing and
        the model's weights stay one copy (the same numbers either way)."""
        H, layers = len(heads), [getattr(h, n) for h in heads for n in names]
        if not torch.is_grad_enabled() and self.one_block:
            W, b = self.shared(names, layers)
        else:
            W = torch.cat([layer.weight for layer in layers])         # (H k s, s_in)
            b = torch.cat([layer.bias for layer in layers])           # (H k s)
        return b.view(H, 1, -1), W.view(H, -1, W.size(-1)).transpose(1, 2)

    @staticmethod
    def shared(names, layers):
        """(W (H k s, s_in), b (H k s)): the layers' weights and biases as views of one
        block each. The first time (and again after the model is moved or cast, which gives
        each Parameter memory of its own) their numbers are moved into such a block, each
        Parameter keeping its name, values and optimiser state as a view of its rows."""
        weights, biases = [layer.weight for layer in layers], [layer.bias for layer in layers]
        if not (_adjacent(weights) and _adjacent(biases)):
            with torch.inference_mode(False), torch.no_grad():   # (plain tensors, always)
                for params in (weights, biases):
                    block, at = torch.cat(params), 0
                    for p in params:
                        p.data = block[at:at + p.size(0)]              # a view of its rows
                        at += p.size(0)
        return _joined(weights), _joined(biases)

    def quantized_projections(self, quantizer):
        """For ``model.quantize`` (quantize.py): the heads' W_Q, W_K, W_V (the G key/value
        heads' W_K, W_V) as `project` reads them, one `QuantizedLinear` over the stacked rows
        of each group of names; the heads' float matrices are let go. A student's head runs
        its own code: its Linears are quantized one by one instead (by the model)."""
        if not self.batched:
            return
        heads, kv_heads = list(self.heads), list(self.heads)[::self.group]
        groups = ([(("WQ",), heads), (("WK", "WV"), kv_heads)]
                  if self.group > 1 or self.reads_memory else [(("WQ", "WK", "WV"), heads)])
        made = {}
        for names, some in groups:
            layers = [getattr(h, n) for h in some for n in names]       # stacked's order
            made[",".join(names)] = QuantizedLinear(
                quantizer, torch.cat([layer.weight for layer in layers]),
                torch.cat([layer.bias for layer in layers]))
        self.quantized = nn.ModuleDict(made)      # {"WQ,WK,WV": QuantizedLinear, ...}
        for head in heads:
            head.WQ = head.WK = head.WV = None

    def can_batch(self, standard_head):
        """The batched product reproduces ``standard_head`` only: a student's head (its
        own forward, or W_Q, W_K, W_V other than Linear with bias) runs head by head."""
        for head in self.heads:
            standard = runs_base(head, standard_head, "forward") and all(
                isinstance(getattr(head, n, None), nn.Linear)
                and getattr(head, n).bias is not None for n in ("WQ", "WK", "WV"))
            if not standard:
                say_once(f"{type(head).__qualname__} is not the standard head: its heads "
                         "run one by one (its own code runs; the batched product does not)")
                return False
        return True
