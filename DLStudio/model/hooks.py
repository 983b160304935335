"""Looking inside a model and changing what it computes: hook points, a cache of every
activation, and interventions that last one call (torch only, beside the architecture).

Each part of architecture.py names the activations it passes on with a `HookPoint`, a
nested class of the parts (``xformer.HookPoint()``) that returns its input unchanged. A
function registered on one reads the activation there, or hands back another in its place:

    logits, cache = gpt.run_with_cache(ids)                 # every activation, by its name
    cache["master_decoder.basic_decoder_arr.0.self_attention.hook_pattern"]  # (B, H, T, T)

    def knock_out(z, name):                                 # head 3 of layer 1 switched off
        z = z.clone(); z[:, 3] = 0; return z
    logits = gpt.run_with_hooks(ids, hooks=[("master_decoder.basic_decoder_arr.1."
                                             "self_attention.hook_z", knock_out)])

A hook point's name is its module's path in the model and its attribute there
(``model.hook_points()[name]`` is the hook point); ``model.hook_names("*hook_pattern")``
lists them. Where they sit, in each layer
(BasicEncoder, a GPT layer; the translation decoder's layer has a second middle,
``hook_resid_mid2``, after cross-attention):

    hook_resid_pre ─> self_attention ─> (+) hook_resid_mid ─> feed_forward ─> (+) hook_resid_post
        self_attention.hook_q, hook_k, hook_v   (B, H | G, T, s_qkv) after QK-norm and RoPE
                       hook_attn_scores         (B, H, T_q, T_k) scaled, masked (-inf)
                       hook_pattern             (B, H, T_q, T_k) softmax of the scores
                       hook_z                   (B, H, T_q, s_qkv) each head's output
                       hook_out                 (B, T_q, M) after W^O: what the residual adds
        feed_forward.hook_hidden                (B, T, F) after the activation (SwiGLU: the gated
                       hook_out                 (B, T, M)  product)
and ``embeddings_generator.hook_embed`` (B, T, M), each stack's ``hook_final`` (after its
final norm), the output layer's ``hook_logits``. A hook on a head's activations sees all H
heads at once (index the head's axis) and the batched product keeps running; only a hook
on the scores or the pattern turns PyTorch's fused attention off, for the readable one
that computes them. A student's own head (its own forward, run head by head) shows
``hook_z`` and ``hook_out``; the queries, keys, scores and pattern are inside its code.
With the key/value cache, q, k and v are the new words' (k and v before they are cached).
"""

import contextlib
import difflib
import fnmatch

__all__ = ["HookPoint", "Hooked", "add_hook_points"]


class HookPoint:
    """An activation's place in the model: the identity, unless a hook is registered on it
    (`register_forward_hook`: `Hooked.hooks` does) or a student's subclass computes
    something else (``class Parts(TransformerFG): class HookPoint(...)``: every hook point
    of the model is then theirs). Not a module: a plain object costs a model that no one
    looks inside one Python call a point (benchmarks/bench_hooks.py measures it), where a
    module's call costs several. Shape: any -> the same"""

    def __init__(self):
        self.forward_hooks = {}            # handle id -> fn(point, inputs, output)

    def forward(self, x):
        return x

    def __call__(self, x):
        x = self.forward(x)
        if self.forward_hooks:                # as torch runs a module's forward hooks
            for fn in list(self.forward_hooks.values()):
                out = fn(self, (x,), x)
                x = x if out is None else out
        return x

    def register_forward_hook(self, fn):
        """Run ``fn(point, inputs, output)`` after each call, as nn.Module's forward hooks
        run; what it returns, when not None, is the output instead. Returns a handle whose
        ``remove()`` takes it off."""
        return _Handle(self.forward_hooks, fn)

    @property
    def active(self):
        """Whether this point does anything: a hook on it, or a subclass's own forward."""
        return bool(self.forward_hooks) or type(self).forward is not HookPoint.forward


class _Handle:
    """A registered hook; ``remove()`` takes it off (torch's RemovableHandle's one method)."""
    _next = 0

    def __init__(self, hooks, fn):
        _Handle._next += 1
        self.hooks, self.id = hooks, _Handle._next
        hooks[self.id] = fn

    def remove(self):
        self.hooks.pop(self.id, None)


def add_hook_points(module, xformer, *names):
    """Give ``module`` a hook point ``hook_<name>`` for each name, of the parts' class
    (``xformer.HookPoint``: a student's subclass where they wrote one; ours where the
    object of sizes is not a parts class)."""
    cls = getattr(xformer, "HookPoint", HookPoint)
    for name in names:
        setattr(module, "hook_" + name, cls())


def _as_tuple(inputs):
    return inputs if isinstance(inputs, (tuple, list)) else (inputs,)


class Hooked:
    """What a whole model (a GPT, the translation model, BERT, the vision model: an
    nn.Module holding the parts) does with its hook points."""

    def hook_points(self):
        """{name: HookPoint} for every hook point of the model, in the order of its modules:
        a module's path, a dot, the hook point's attribute."""
        return {f"{path}.{attr}" if path else attr: point
                for path, module in self.named_modules()
                for attr, point in vars(module).items() if isinstance(point, HookPoint)}

    def hook_names(self, pattern="*"):
        """The hook points' names matching ``pattern`` (shell-style: "*.0.*hook_pattern")."""
        return [name for name in self.hook_points() if fnmatch.fnmatchcase(name, pattern)]

    def chosen_hooks(self, names):
        """The names that ``names`` selects: None (all), a name, a pattern, a list of them, or
        a function of a name (TransformerLens's names_filter). A name that matches nothing
        is refused with the nearest names."""
        points = list(self.hook_points())
        if names is None:
            return points
        if callable(names):
            return [n for n in points if names(n)]
        chosen = []
        exact = set(points)
        for wanted in ([names] if isinstance(names, str) else names):
            found = [wanted] if wanted in exact else [
                n for n in points if fnmatch.fnmatchcase(n, wanted)]
            if not found:
                near = difflib.get_close_matches(wanted, points, n=3, cutoff=0.5)
                raise KeyError(f"no hook point {wanted!r} in this {type(self).__name__}"
                               + (f"; did you mean {', '.join(near)}?" if near else "")
                               + " (model.hook_names() lists them)")
            chosen += [n for n in found if n not in chosen]
        return chosen

    @contextlib.contextmanager
    def hooks(self, hooks):
        """Within the ``with`` block, each ``(names, fn)`` of ``hooks`` runs ``fn(activation,
        name)`` at its hook points (``names``: as `chosen_hooks`); what ``fn`` returns, when
        not None, replaces the activation. Every hook is removed when the block ends, also
        after an error. Around ``generate`` too: the hooks then run at every step."""
        points, handles = self.hook_points(), []
        try:
            for names, fn in hooks:
                for name in self.chosen_hooks(names):
                    handles.append(points[name].register_forward_hook(
                        lambda module, inputs, output, name=name, fn=fn: fn(output, name)))
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def run_with_hooks(self, inputs, hooks=(), **kwargs):
        """The model's output for ``inputs`` (the forward's arguments: ids, or a tuple such as
        (src, tgt)) with ``hooks`` in place for this one call (see `hooks`)."""
        with self.hooks(hooks):
            return self(*_as_tuple(inputs), **kwargs)

    def run_with_cache(self, inputs, names=None, device=None, hooks=(), **kwargs):
        """(output, cache): the model's output for ``inputs`` and ``cache``, {name: activation}
        for every hook point that ``names`` chooses (all by default; see `chosen_hooks`), in
        the order they ran, detached, on ``device`` ("cpu", say) or where they were computed.
        ``hooks``: interventions in place during the run (the cache shows their effect)."""
        cache = {}

        def keep(x, name):
            cache[name] = x.detach() if device is None else x.detach().to(device)

        with self.hooks(list(hooks) + [(self.chosen_hooks(names), keep)]):
            out = self(*_as_tuple(inputs), **kwargs)
        return out, cache
