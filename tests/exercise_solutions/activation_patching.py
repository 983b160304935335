import torch


def patch_residual(model, clean, corrupted, metric, names):
    with torch.no_grad():
        clean_logits, cache = model.run_with_cache(clean, names=names)
        base, top = metric(model(corrupted)), metric(clean_logits)
        result = torch.zeros(len(names), clean.size(1))
        for i, name in enumerate(names):
            for t in range(clean.size(1)):
                def patch(x, _name, name=name, t=t):
                    x = x.clone()
                    x[:, t] = cache[name][:, t]
                    return x
                patched = model.run_with_hooks(corrupted, hooks=[(name, patch)])
                result[i, t] = (metric(patched) - base) / (top - base)
    return result
