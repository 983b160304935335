"""LoRA, low-rank adaptation (Hu et al. 2021): fine-tune a large model by learning, for some
of its projections W (out x in), a change of low rank while W itself stays frozen:

    W x   ->   W x + (alpha / r) B A x          A (r x in), B (out x r), r << in, out

B starts at zero, so at step 0 the model is exactly the one it adapts; A starts random
(Kaiming-uniform, as PEFT). Only A and B learn: for a 135M-parameter model with r = 8 on
its four attention projections, well under 1% of the weights. After training, B A can be
added into W once (`merge`): the adapted model then costs what the base costs.

One projection has one A and one B, as PEFT has them, whatever our per-head layout: head h
of W_Q reads rows h s .. (h + 1) s of B A (grouped keys and values: the group's rows). The
change is a parametrisation of each head's weight (torch.nn.utils.parametrize): the weight
a head (or the batched path, which stacks the heads' weights) reads is W + (alpha / r) B A
rows, so the model's own code runs unchanged, head by head or batched.

    gpt.add_lora(rank=8, alpha=16, targets=("WQ", "WK", "WV", "W_O"))   # or q_proj, ...
    ... train: only the LoRA parameters require gradients ...
    gpt.merge_lora()       # B A folded into W; gpt.unmerge_lora() takes it out again

While training, the change is added to the projection's output instead, as PEFT does:
W x + (alpha / r) B A dropout(x) (`LoRA.branch`; dropout, PEFT's ``lora_dropout``, one mask
a projection and input however many heads read it). Then the frozen W gets no gradient:
only A's and B's are formed, never the (out x in) gradient of W + (alpha / r) B A. In
evaluation the weight's form above gives the same numbers with no second product (and a
subclass with its own `delta` or `merged` trains in it too: `LoRA.branching`).

A subclass of `LoRA` (rsLoRA's alpha / sqrt(r) scale, say) is used wherever the model
names its ``LoRA``.
"""

import contextlib
import math
import weakref

import torch
import torch.nn as nn
from torch.nn.utils import parametrize

__all__ = ["LoRA", "LoRAAdapting", "TranslationLoRA", "HF_TARGETS", "GPT2_TARGETS",
           "SEQ2SEQ_TARGETS", "ATTENTION", "CROSS", "FEED_FORWARD", "with_branches"]

ATTENTION = ("WQ", "WK", "WV", "W_O")
FEED_FORWARD = ("W1", "V", "W2")
FUSED = ("QKV",)         # W_Q, W_K and W_V as one projection: GPT-2's c_attn
CROSS = tuple(f"cross_{n}" for n in ATTENTION)    # a translation decoder's cross-attention
#: Hugging Face's (PEFT's) names of the projections, and ours.
HF_TARGETS = {"q_proj": "WQ", "k_proj": "WK", "v_proj": "WV", "o_proj": "W_O",
              "gate_proj": "W1", "up_proj": "V", "down_proj": "W2"}
#: GPT-2's module names (its c_proj is two modules, the attention's and the MLP's).
GPT2_TARGETS = {"c_attn": ("QKV",), "c_proj": ("W_O", "W2"), "c_fc": ("W1",)}
#: A translation model's (Marian's, BART's) module names: q_proj is in self- and
#: cross-attention alike, as PEFT matches it.
SEQ2SEQ_TARGETS = {"q_proj": ("WQ", "cross_WQ"), "k_proj": ("WK", "cross_WK"),
                   "v_proj": ("WV", "cross_WV"), "out_proj": ("W_O", "cross_W_O"),
                   "fc1": ("W1",), "fc2": ("W2",),
                   # T5's: q, k, v, o in both attentions; wi (ReLU) or wi_0, wi_1 (gated); wo
                   **{n: (f"W{n.upper()}", f"cross_W{n.upper()}") for n in "qkv"},
                   "o": ("W_O", "cross_W_O"), "wi": ("W1",), "wi_0": ("W1",),
                   "wi_1": ("V",), "wo": ("W2",)}


class LoRA(nn.Module):
    """One projection's low-rank change: ``delta(rows)`` = (alpha / r) B[rows] A.

    Args: in_size, out_size (of W), rank (r), alpha, dropout (on the change's input, while
    training).
    Shape: A (r, in_size), B (out_size, r); delta -> (len(rows), in_size)
    """

    def __init__(self, in_size, out_size, rank=8, alpha=16, dropout=0.0):
        super().__init__()
        if rank < 1:
            raise ValueError(f"a LoRA's rank is at least 1, got {rank}")
        if not 0 <= dropout < 1:
            raise ValueError(f"a LoRA's dropout is in [0, 1), got {dropout}")
        self.rank, self.alpha, self.scale = rank, alpha, alpha / rank
        self.A = nn.Parameter(torch.empty(rank, in_size))
        self.B = nn.Parameter(torch.empty(out_size, rank))
        self.dropout = nn.Dropout(dropout)
        self.enabled = True                                 # False: the base model's W alone
        self._low = None                    # (the input, A dropout(input)) last computed
        self.reset_parameters()

    def reset_parameters(self):
        """A random (Kaiming-uniform, as PEFT), B zero: the change starts at 0."""
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
            self.B.zero_()

    def delta(self, rows=slice(None)):
        return self.scale * (self.B[rows] @ self.A)

    def merged(self, W, rows=slice(None)):
        """W (its ``rows``) with the change folded in: W + (alpha / r) B[rows] A."""
        return W + self.delta(rows).to(W.dtype)

    @property
    def branching(self):
        """Whether the change goes to the projection's output (`branch`), not its weight:
        while training. Then no gradient of the whole W + (alpha / r) B A is formed (an
        (out x in) product over every token of the batch), only A's and B's. A subclass
        with a `delta` or `merged` of its own (DoRA, say) trains in the weight's form, so
        that its code runs, unless it asks for dropout (then it overrides `branch` too)."""
        own = type(self).delta is not LoRA.delta or type(self).merged is not LoRA.merged
        return self.enabled and self.training and (self.dropout.p > 0 or not own)

    def branch(self, x, rows=slice(None)):
        """(alpha / r) B[rows] A dropout(x), PEFT's branch: what the rows of the projection's
        output gain. One dropout mask an input: every head reading x (each its rows) reads
        the same A dropout(x).

        Shape: x (..., in_size) -> (..., len(rows))
        """
        if self._low is None or self._low[0]() is not x:
            self._low = (weakref.ref(x), self.dropout(x) @ self.A.t().to(x.dtype))
        return self.scale * (self._low[1] @ self.B[rows].t().to(x.dtype))


def _rows_of(module):
    """The `_Rows` parametrising ``module``'s weight, or None (no LoRA, or merged)."""
    if not parametrize.is_parametrized(module, "weight"):
        return None
    return next((p for p in module.parametrizations.weight if isinstance(p, _Rows)), None)


def _add_branch(module, inputs, output):
    """A forward hook of an adapted Linear: its output plus the LoRA's `branch`, while
    the LoRA is branching (its weight then is W alone)."""
    rows = _rows_of(module)
    if rows is not None and rows.lora.branching:
        return output + rows.lora.branch(inputs[0], rows.rows)
    return None


def with_branches(x, outs, modules):
    """The batched path's projections (one (B, H, T, s) a name, from the heads' stacked
    weights, which no hook sees), each plus its LoRA's `branch` where it is branching:
    ``modules``, for each name, the heads' Linear in order (their rows one run of B's)."""
    for i, heads in enumerate(modules):
        first = _rows_of(heads[0])
        if first is None or not first.lora.branching:
            continue
        B, H, T, s = outs[i].shape
        rows = slice(first.rows.start, _rows_of(heads[-1]).rows.stop)
        outs[i] = outs[i] + first.lora.branch(x, rows).view(B, T, H, s).transpose(1, 2)
    return outs


class _Rows(nn.Module):
    """The parametrisation of one weight: W + its rows of the LoRA's change (the LoRA is
    the layer's, held here without registering it twice)."""

    def __init__(self, lora, rows):
        super().__init__()
        self.__dict__["lora"], self.rows = lora, rows

    def forward(self, W):
        on = self.lora.enabled and not self.lora.branching   # (branching: `branch` adds it)
        return self.lora.merged(W, self.rows) if on else W


def _places(layer, name):
    """(module, rows) for each weight of a layer's projection ``name`` that its LoRA
    changes: each head's (a group's once), or the one Linear's. "QKV": W_Q's heads, then
    W_K's, then W_V's, one change of 3 M rows (GPT-2's fused c_attn); "cross_WQ" ...: the
    cross-attention's."""
    attention, ff = layer.self_attention, layer.feed_forward
    if name.startswith("cross_"):
        attention, name = layer.cross_attention, name[len("cross_"):]
    if name == "QKV":
        places, at = [], 0
        for part in ("WQ", "WK", "WV"):
            for module, rows in _places(layer, part):
                places.append((module, slice(at + rows.start, at + rows.stop)))
            at = places[-1][1].stop
        return places
    if name in ("WQ", "WK", "WV"):
        if not attention.full_width:
            raise ValueError("LoRA on W_Q, W_K, W_V needs full-width heads (a sliced head "
                             "reads its own slice of each word: no one A for all of them)")
        heads = list(attention.heads) if name == "WQ" else \
            list(attention.heads)[::attention.group]
        s = attention.qkv_size
        return [(getattr(head, name), slice(h * s, (h + 1) * s)) for h, head in
                enumerate(heads)]
    module = attention.W_O if name == "W_O" else getattr(ff, name, None)
    if not isinstance(module, nn.Linear):
        raise ValueError(f"this model has no projection {name} to adapt")
    return [(module, slice(None))]


class LoRAAdapting:
    """LoRA on a GPT's layers (a container mixin: ``self.master_decoder.basic_decoder_arr``;
    `TranslationLoRA`: a translation model's encoder and decoder layers)."""

    LoRA = LoRA
    #: the targets' other names (Hugging Face's, GPT-2's) and the projections they are
    TARGET_NAMES = {**{k: (v,) for k, v in HF_TARGETS.items()}, **GPT2_TARGETS}

    def lora_layers(self):
        """The layers LoRA may adapt, in order (`lora_places` counts them so)."""
        return list(self.master_decoder.basic_decoder_arr)

    def add_lora(self, rank=8, alpha=16, targets=ATTENTION, dropout=0.0):
        """A `LoRA` (the class's nested ``LoRA``) on each layer's ``targets`` (ours: WQ,
        WK, WV, W_O, W1, V, W2, or QKV: the three as one; Hugging Face's q_proj, ...,
        down_proj; GPT-2's c_attn, c_proj, c_fc), ``dropout`` on its input while training;
        every other weight frozen. Returns the number of trainable parameters."""
        names = list(dict.fromkeys(n for t in targets for n in self.TARGET_NAMES.get(t, (t,))))
        ours = ATTENTION + FEED_FORWARD + FUSED + (CROSS if self.TARGET_NAMES is
                                                  SEQ2SEQ_TARGETS else ())
        unknown = sorted(set(names) - set(ours))
        if unknown or not names:
            raise ValueError(f"LoRA targets are {', '.join(ours)} (or "
                             f"{', '.join(self.TARGET_NAMES)}), got "
                             f"{', '.join(unknown) or 'none'}")
        if getattr(self, "lora_targets", None):
            raise ValueError("this model has LoRA already: merge_lora() first")
        for p in self.parameters():
            p.requires_grad_(False)
        device = next(self.parameters()).device
        self._lora_hooks = []
        for layer in self.lora_layers():
            layer.loras = nn.ModuleDict()
            for name in names:
                if name.startswith("cross_") and not hasattr(layer, "cross_attention"):
                    continue                          # an encoder layer has none
                places = _places(layer, name)
                in_size = places[0][0].in_features
                out_size = sum(m.out_features for m, _ in places)
                more = {"dropout": dropout} if dropout else {}  # (a subclass may take none)
                lora = self.LoRA(in_size, out_size, rank, alpha, **more).to(device)
                lora.train(self.training)                    # the model's mode, as it is
                for module, rows in places:
                    parametrize.register_parametrization(module, "weight", _Rows(lora, rows))
                    self._lora_hooks.append(module.register_forward_hook(_add_branch))
                layer.loras[name] = lora
        self.lora_targets, self.lora_merged = tuple(names), False
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def lora_settings(self):
        """What `add_lora` was given (rank, alpha, targets, dropout), for a checkpoint; None
        without LoRA."""
        places = list(self.lora_places())
        if not places:
            return None
        lora = places[0][2]         # (the layers', whichever model object holds them)
        return {"rank": lora.rank, "alpha": lora.alpha, "dropout": lora.dropout.p,
                "targets": list(dict.fromkeys(name for _, name, _, _ in places))}

    def lora_places(self):
        """(layer index, name, LoRA, [(module, rows), ...]) of every LoRA."""
        for i, layer in enumerate(self.lora_layers()):
            for name, lora in getattr(layer, "loras", {}).items():
                yield i, name, lora, _places(layer, name)

    def merge_lora(self):
        """Fold each B A into its W (the model then costs what the base costs); the LoRAs
        are kept, so that `unmerge_lora` can take them out again."""
        for _, _, _, places in self.lora_places():
            for module, _ in places:
                if parametrize.is_parametrized(module, "weight"):
                    parametrize.remove_parametrizations(module, "weight",
                                                        leave_parametrized=True)
                    module.weight.requires_grad_(False)
        self.lora_merged = True

    def unmerge_lora(self):
        """W back to the base (B A taken out), the LoRAs again a parametrisation of it."""
        if not getattr(self, "lora_merged", False):
            return
        with torch.no_grad():
            for _, _, lora, places in self.lora_places():
                for module, rows in places:
                    module.weight.sub_(lora.delta(rows).to(module.weight.dtype))
                    parametrize.register_parametrization(module, "weight", _Rows(lora, rows))
        self.lora_merged = False

    @contextlib.contextmanager
    def lora_off(self):
        """``with gpt.lora_off():`` the base model, every LoRA switched off (DPO's reference
        model without a second copy of the weights)."""
        if getattr(self, "lora_merged", False):
            raise ValueError("the LoRAs are merged into the weights: unmerge_lora() first")
        loras = [lora for _, _, lora, _ in self.lora_places()]
        for lora in loras:
            lora.enabled = False
        try:
            yield self
        finally:
            for lora in loras:
                lora.enabled = True

    def remove_lora(self):
        """Fold every LoRA into its weight for good and forget them: the model is a plain
        one again (its checkpoint reads as any other); every weight learns again."""
        if getattr(self, "lora_targets", None) and not self.lora_merged:
            self.merge_lora()
        for layer in self.lora_layers():
            if hasattr(layer, "loras"):
                del layer.loras
        for hook in getattr(self, "_lora_hooks", ()):
            hook.remove()
        self._lora_hooks = []
        self.lora_targets, self.lora_merged = (), False
        for p in self.parameters():
            p.requires_grad_(True)


class TranslationLoRA(LoRAAdapting):
    """LoRA on a translation model's layers (the EncoderDecoder's mixin): the encoder's,
    then the decoder's, whose cross-attention has projections of its own (``cross_WQ``,
    ...; Marian's and BART's q_proj, ... name both attentions' at once, as PEFT has it)."""

    TARGET_NAMES = SEQ2SEQ_TARGETS

    def lora_layers(self):
        return [*self.encoder.basic_encoder_arr, *self.decoder.basic_decoder_arr]
