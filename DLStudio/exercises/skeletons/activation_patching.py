"""Exercise `activation_patching`: where does a model keep what decides a prediction?
(Meng et al. 2022; Wang et al. 2022)

Run a model on a clean text and on a corrupted one (another word somewhere) that predicts
something else; then run the corrupted text again with one activation taken from the clean
run. Where that single activation brings the clean prediction back, the information lives.
Write `patch_residual(model, clean, corrupted, metric, names)`:
    model: a GPT of ours; `model.run_with_cache(ids, names=...)` returns (logits, cache) and
        `model.run_with_hooks(ids, hooks=[(name, fn)])` the logits, with fn(activation,
        name) returning the activation to use instead (DLStudio/model/hooks.py).
    clean, corrupted: token ids (1, T), as many tokens each.
    metric: logits (1, T, V) -> a number (a 0-dim tensor): how much the clean answer wins.
    names: hook points, one a layer (each layer's residual stream, hook_resid_pre).
    Returns (len(names), T): for names[i] and position t, the metric of the corrupted run
        with that activation at position t ONLY replaced by the clean run's, normalised:
            (metric(patched) - metric(corrupted)) / (metric(clean) - metric(corrupted))
        0: the patch restores nothing, 1: all of the clean run's metric.
Leave no hook registered on the model when you return (run_with_hooks removes its own).
The library's DLStudio.evaluation.interpret.patch_residual is switched off while the checks
run.

    dlstudio check activation_patching activation_patching.py
    python3 look_inside.py checkpoints_GPT 4 "ellos no están" --patch "ella no está"
"""
import torch


def patch_residual(model, clean, corrupted, metric, names):
    raise NotImplementedError
