import torch

SOS_INDEX, EOS_INDEX = 0, 1


def causal_mask(T, device=None):
    rows = torch.arange(T, device=device)[:, None]
    cols = torch.arange(T, device=device)[None, :]
    return cols > rows


def padding_mask(ids):
    mask = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
    for b in range(ids.size(0)):
        seen_eos = False
        for t in range(ids.size(1)):
            mask[b, t] = seen_eos
            if ids[b, t] == EOS_INDEX:
                seen_eos = True
    return mask
