"""The standard analyses of mechanistic interpretability, each a few lines over the model's
``run_with_cache`` and ``run_with_hooks`` (model/hooks.py), on every model of ours and every
folder we read:

    ablate(model, inputs, layer, head)                 a head or a layer switched off (zero)
                                                       or replaced by its mean (Meyes 2019)
    patch_residual(model, clean, corrupted, metric)    activation patching: a clean run's
    patch_heads(model, clean, corrupted, metric)       residual stream (layers x positions) or
                                                       heads' outputs put into a corrupted run
                                                       (Meng et al. 2022; Wang et al. 2022)
    logit_lens(model, inputs)                          each layer's residual stream read by the
    accumulated_resid(model, cache)                    output layer (nostalgebraist 2020)
    direct_logit_attribution(model, inputs, ...)       what each layer and head adds to a logit
                                                       difference (Elhage et al. 2021)
    pattern_scores(pattern, half)                      previous-token, duplicate-token and
    head_scores(model, ids, half)                      induction heads on repeated random tokens
                                                       (Olsson et al. 2022): one layer's
                                                       weights, or every layer's

Shapes: B batch, T positions, L layers, H heads, M width, V vocabulary. ``stack``: for the
translation model, "decoder" (default) or "encoder"; ``inputs``: what the model's forward
takes (ids, or (src, tgt)).
"""

from collections import namedtuple

import torch

__all__ = ["anatomy", "layer_hook", "ablate", "logit_diff", "normalised", "patch_residual",
           "patch_heads", "accumulated_resid", "logit_lens", "top_tokens",
           "direct_logit_attribution", "repeated_tokens", "pattern_scores", "head_scores",
           "in_context_loss"]

#: A model's stack as the analyses see it: the layers' module paths (``prefix``.i), the
#: layers themselves, the stack's final norm and the map from a state to logits (or None).
Anatomy = namedtuple("Anatomy", "prefix layers final_norm readout")


def anatomy(model, stack=None):
    """The stack of ``model`` that the analyses read: a GPT's, BERT's and the vision model's
    only stack, or the translation model's ``stack`` ("decoder" by default: the one whose
    output layer gives words). ``readout``: last states (..., M) -> logits (..., V)."""
    if hasattr(model, "master_decoder"):                          # a GPT, a real folder
        return _anatomy("master_decoder.basic_decoder_arr", model.master_decoder)
    if hasattr(model, "decoder") and hasattr(model, "encoder"):   # the translation model
        if stack not in (None, "decoder", "encoder"):
            raise ValueError(f"stack must be 'decoder' or 'encoder', got {stack!r}")
        if stack == "encoder":
            enc = model.encoder
            return Anatomy("encoder.basic_encoder_arr", list(enc.basic_encoder_arr),
                           enc.final_norm, None)
        return _anatomy("decoder.basic_decoder_arr", model.decoder)
    enc = model.master_encoder                                    # BERT, the vision model
    head = model.mlm_head if hasattr(model, "mlm_head") else model.classifier
    return Anatomy("master_encoder.basic_encoder_arr", list(enc.basic_encoder_arr),
                   enc.final_norm, lambda x: head(enc.final_norm(x)))


def _anatomy(prefix, decoder):
    def readout(x):
        x = decoder.final_norm(x)
        return decoder.out(x if decoder.output_scale is None else x * decoder.output_scale)
    return Anatomy(prefix, list(decoder.basic_decoder_arr), decoder.final_norm, readout)


def layer_hook(model, layer, point, stack=None):
    """The full name of hook point ``point`` ("hook_resid_pre", "self_attention.hook_z", ...)
    of layer ``layer`` (negative: from the end)."""
    parts = anatomy(model, stack)
    return f"{parts.prefix}.{range(len(parts.layers))[layer]}.{point}"


def _heads(model, stack=None):
    return anatomy(model, stack).layers[0].self_attention.num_atten_heads


# ── ablation ───────────────────────────────────────────────────────────────────────────

def ablate(model, inputs, layer, head=None, how="zero", part="self_attention", stack=None,
           reference=None):
    """The model's output with head ``head`` of layer ``layer`` switched off (its output z,
    B x T x s_qkv, all 0, or its mean over the batch and positions: ``how="mean"``), or with
    no head given the whole ``part`` ("self_attention" or "feed_forward": what it adds to
    the residual stream). The mean is ``reference``'s (other inputs) or these inputs'."""
    if how not in ("zero", "mean"):
        raise ValueError(f"how must be 'zero' or 'mean', got {how!r}")
    name = layer_hook(model, layer, f"{part}.hook_z" if head is not None
                      else f"{part}.hook_out", stack)
    mean = None
    if how == "mean":
        _, cache = model.run_with_cache(inputs if reference is None else reference,
                                        names=name)
        mean = cache[name]
        mean = mean[:, head] if head is not None else mean
        mean = mean.flatten(0, -2).mean(0)                                # (s_qkv) | (M)

    def switch_off(x, _name):
        x = x.clone()
        at = (slice(None), head) if head is not None else (slice(None),)
        x[at] = 0 if mean is None else mean.to(x.dtype)
        return x
    return model.run_with_hooks(inputs, hooks=[(name, switch_off)])


# ── activation patching ────────────────────────────────────────────────────────────────

def logit_diff(logits, right, wrong, position=-1):
    """The mean over the batch of logit[right] - logit[wrong] at ``position``: the usual
    metric of patching. right, wrong: token ids, one or one a row. Shape: (B, T, V) -> ()"""
    at = logits[:, position]                                              # (B, V)
    rows = torch.arange(len(at), device=at.device)
    right, wrong = (torch.as_tensor(t, device=at.device).expand(len(at)) for t in (right, wrong))
    return (at[rows, right] - at[rows, wrong]).mean()


def normalised(metric, clean_value, corrupted_value):
    """(metric - corrupted) / (clean - corrupted): 0 where a patch restores nothing, 1 where it
    restores the clean run's value."""
    return (metric - corrupted_value) / (clean_value - corrupted_value)


def patch_residual(model, clean, corrupted, metric, point="hook_resid_pre", stack=None):
    """Activation patching over layers x positions: for each layer and position, the
    corrupted run with that layer's residual stream (``point``) at that position replaced by
    the clean run's; ``metric(logits)`` of each, normalised (see `normalised`). clean and
    corrupted: inputs of one shape (the same number of tokens). Returns (L, T)."""
    parts = anatomy(model, stack)
    with torch.no_grad():
        clean_logits, cache = model.run_with_cache(clean, names=f"{parts.prefix}.*.{point}")
        base, top = metric(model.run_with_hooks(corrupted)), metric(clean_logits)
        T = cache[layer_hook(model, 0, point, stack)].size(1)
        result = torch.zeros(len(parts.layers), T)
        for layer in range(len(parts.layers)):
            name = layer_hook(model, layer, point, stack)
            for position in range(T):
                def patch(x, _name, name=name, position=position):
                    x = x.clone()
                    x[:, position] = cache[name][:, position]
                    return x
                patched = model.run_with_hooks(corrupted, hooks=[(name, patch)])
                result[layer, position] = normalised(metric(patched), top, base)
    return result                                                         # (L, T)


def patch_heads(model, clean, corrupted, metric, stack=None):
    """Activation patching over heads: the corrupted run with one head's output (z, at every
    position) taken from the clean run, normalised as `patch_residual`. Returns (L, H)."""
    parts = anatomy(model, stack)
    with torch.no_grad():
        clean_logits, cache = model.run_with_cache(
            clean, names=f"{parts.prefix}.*.self_attention.hook_z")
        base, top = metric(model.run_with_hooks(corrupted)), metric(clean_logits)
        result = torch.zeros(len(parts.layers), _heads(model, stack))
        for layer in range(len(parts.layers)):
            name = layer_hook(model, layer, "self_attention.hook_z", stack)
            for head in range(result.size(1)):
                def patch(z, _name, name=name, head=head):
                    z = z.clone()
                    z[:, head] = cache[name][:, head]
                    return z
                patched = model.run_with_hooks(corrupted, hooks=[(name, patch)])
                result[layer, head] = normalised(metric(patched), top, base)
    return result                                                         # (L, H)


# ── the logit lens ─────────────────────────────────────────────────────────────────────

def accumulated_resid(model, cache, stack=None):
    """The residual stream before each layer and after the last, from a cache of
    ``run_with_cache``: (L + 1, B, T, M), as TransformerLens's ``accumulated_resid``."""
    parts = anatomy(model, stack)
    names = [layer_hook(model, i, "hook_resid_pre", stack) for i in range(len(parts.layers))]
    return torch.stack([cache[n] for n in names]
                       + [cache[layer_hook(model, -1, "hook_resid_post", stack)]])


def logit_lens(model, inputs, stack=None):
    """Each layer's residual stream read as the model reads its last one: through the final
    norm (recomputed for each layer, as nostalgebraist's lens does) and the output layer.
    Returns (L + 1, B, T, V): row i is before layer i, the last row the model's own logits
    (BERT: its masked-word head, at every position; the vision model: its classifier)."""
    parts = anatomy(model, stack)
    if parts.readout is None:
        raise ValueError("the encoder has no output layer to read its states with: "
                         "use stack='decoder'")
    with torch.no_grad():
        _, cache = model.run_with_cache(inputs, names=f"{parts.prefix}.*.hook_resid_*")
        return parts.readout(accumulated_resid(model, cache, stack))     # (L + 1, B, T, V)


def top_tokens(lens, k=3, position=-1, row=0):
    """The ``k`` likeliest tokens at ``position`` of batch row ``row`` after each layer:
    ((L + 1) lists of (id, probability))."""
    probs = lens[:, row, position].float().softmax(-1)                   # (L + 1, V)
    top = probs.topk(k, dim=-1)
    return [list(zip(i.tolist(), p.tolist())) for p, i in zip(top.values, top.indices)]


# ── direct logit attribution ───────────────────────────────────────────────────────────

def direct_logit_attribution(model, inputs, right, wrong, position=-1, stack=None):
    """What each part adds to logit[right] - logit[wrong] at ``position`` (mean over the
    batch) through the residual stream: the embeddings, each layer's attention (and each of
    its heads) and feed-forward network, and the final norm's bias. The final norm's scale
    is frozen at the last residual stream's (as TransformerLens does): then the parts' terms
    add up to the logit difference exactly. Pre-LN models only (a GPT, every folder we
    read): a post-LN layer normalises the stream, which is then no sum of the parts.
    "bias": the final norm's and the output layer's biases.
    Returns {"embeddings": (), "attention": (L,), "heads": (L, H), "feed_forward": (L,),
    "bias": (), "total": (), "logit_diff": ()}."""
    parts = anatomy(model, stack)
    layer0 = parts.layers[0]
    if not layer0.norm_first or not isinstance(getattr(layer0, "post_norm1", None),
                                               torch.nn.Identity):
        raise ValueError("direct logit attribution reads the residual stream as the sum of "
                         "what each layer adds: this model normalises it inside its layers "
                         "(post-LN or norms after the sublayers); use patching instead")
    with torch.no_grad():
        logits, cache = model.run_with_cache(inputs)
        resid = accumulated_resid(model, cache, stack)[:, :, position]   # (L + 1, B, M)
        direction, output_bias = _unembedding(model, right, wrong, resid)  # (B, M), (B,)

        def through_norm(x):            # the final norm's linear part, its scale frozen
            return _frozen_norm(parts.final_norm, x, resid[-1])          # (..., B, M)

        def attributed(x):
            return (through_norm(x) * direction).sum(-1).mean(-1)        # (...,)
        attention = resid.new_zeros(len(parts.layers))
        feed = resid.new_zeros(len(parts.layers))
        heads = resid.new_zeros(len(parts.layers), _heads(model, stack))
        for i, layer in enumerate(parts.layers):
            pre, mid, post = (cache[layer_hook(model, i, p, stack)][:, position]
                              for p in ("hook_resid_pre", "hook_resid_mid", "hook_resid_post"))
            attention[i], feed[i] = attributed(mid - pre), attributed(post - mid)
            z = cache[layer_hook(model, i, "self_attention.hook_z", stack)][:, :, position]
            heads[i] = attributed(_head_outputs(layer.self_attention, z))   # (H,)
        embeddings = attributed(resid[0])
        bias = ((_norm_bias(parts.final_norm, resid[-1]) * direction).sum(-1)
                + output_bias).mean()
        total = embeddings + attention.sum() + feed.sum() + bias
    return {"embeddings": embeddings, "attention": attention, "heads": heads,
            "feed_forward": feed, "bias": bias, "total": total,
            "logit_diff": logit_diff(logits, right, wrong, position)}


def _unembedding(model, right, wrong, resid):
    """The output layer's row of ``right`` minus that of ``wrong`` (times T5's output scale):
    the direction in the final norm's output that the logit difference reads (B, M); and
    the difference of the two logits' biases (B,)."""
    out = model.master_decoder if hasattr(model, "master_decoder") else model.decoder
    W, b = out.out.weight, out.out.bias                                   # (V, M), (V,)
    B = resid.size(1)
    right, wrong = (torch.as_tensor(t, device=W.device).expand(B) for t in (right, wrong))
    d = W[right] - W[wrong]                                               # (B, M)
    d = d if out.output_scale is None else d * out.output_scale
    return d, (W.new_zeros(B) if b is None else b[right] - b[wrong])


def _frozen_norm(norm, x, last):
    """The final norm applied to a part ``x`` of the stream with the scale of ``last`` (the
    whole stream): LayerNorm's centring and division, RMSNorm's division, then the gain.
    Without the bias, which `_norm_bias` gives once. Shape: x (..., B, M), last (B, M)"""
    if isinstance(norm, torch.nn.Identity):
        return x
    eps = norm.eps if hasattr(norm, "eps") else 1e-5
    if isinstance(norm, torch.nn.LayerNorm):
        scale = (last.var(-1, unbiased=False, keepdim=True) + eps).sqrt()
        x = (x - x.mean(-1, keepdim=True)) / scale
        return x if norm.weight is None else x * norm.weight
    scale = (last.float().pow(2).mean(-1, keepdim=True) + eps).sqrt().to(last.dtype)
    y = x / scale
    if getattr(norm, "plus_one", False):
        return y * (1 + norm.weight)
    return y * norm.weight if getattr(norm, "weight", None) is not None else y


def _norm_bias(norm, last):
    bias = getattr(norm, "bias", None)
    return torch.zeros_like(last) if bias is None else bias.expand_as(last)


def _head_outputs(attention, z):
    """What each head writes into the residual stream: its slice of the output (no W^O), or
    its columns of W^O times its output (full-width heads). z (B, H, s_qkv) -> (H, B, M)"""
    B, H, s = z.shape
    if not attention.full_width:
        out = z.new_zeros(H, B, H * s)
        for h in range(H):
            out[h, :, h * s:(h + 1) * s] = z[:, h]
        return out                                                        # (H, B, M)
    W = attention.W_O.weight.view(-1, H, s)                               # (M, H, s)
    return torch.einsum("bhs,mhs->hbm", z, W)                             # (H, B, M)


# ── induction heads ────────────────────────────────────────────────────────────────────

def repeated_tokens(vocab_size, half, batch=8, seed=0, first=None, low=0):
    """Random token sequences repeated once: (B, [1 +] 2 half), ids from ``low`` up; with
    ``first`` (a start token) in front. The second half can only be predicted by copying."""
    g = torch.Generator().manual_seed(seed)
    seq = torch.randint(low, vocab_size, (batch, half), generator=g)
    ids = torch.cat([seq, seq], dim=1)
    return ids if first is None else torch.cat([torch.full((batch, 1), first), ids], 1)


def pattern_scores(pattern, half):
    """One layer's scores of each kind, from its attention weights (B, H, T, T) on texts whose
    last 2 ``half`` tokens are ``half`` tokens repeated: the mean weight, over the batch and
    the second copy's queries q, on key q - 1 ("previous"), q - half (the same token's
    earlier copy: "duplicate") and q - half + 1 (the token after it: "induction", what lets
    a model predict the repeat). Returns {kind: (H,)}, each in [0, 1]."""
    T = pattern.size(-1)
    q = torch.arange(T - half, T, device=pattern.device)       # the second copy's queries
    pattern = pattern if pattern.dtype in (torch.float32, torch.float64) else pattern.float()
    keys = {"previous": q - 1, "duplicate": q - half, "induction": q - half + 1}
    return {kind: pattern[:, :, q, k].mean(dim=(0, 2)) for kind, k in keys.items()}


def head_scores(model, ids, half, stack=None):
    """`pattern_scores` of every layer of ``model`` on ``ids`` of `repeated_tokens` (``half``
    tokens repeated; a start token in front counted off): {kind: (L, H)}."""
    parts = anatomy(model, stack)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names=f"{parts.prefix}.*.hook_pattern")
    layers = [pattern_scores(cache[layer_hook(model, i, "self_attention.hook_pattern", stack)],
                             half) for i in range(len(parts.layers))]
    return {kind: torch.stack([scores[kind] for scores in layers]).float()
            for kind in ("previous", "duplicate", "induction")}                  # (L, H)


def in_context_loss(logits, ids, half):
    """The mean next-token loss on the first repetition and on the second: (first, second).
    A model that has learnt to copy (induction heads) has a much lower second.
    Shape: logits (B, T, V), ids (B, T)"""
    losses = torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten(), reduction="none"
    ).view(len(ids), -1)                                                  # (B, T - 1)
    start = ids.size(1) - 2 * half
    first = losses[:, start:start + half - 1].mean()        # predicting within the first
    second = losses[:, start + half:].mean()                # predicting the repeat
    return first.item(), second.item()
