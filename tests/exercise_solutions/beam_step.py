import torch

SOS_INDEX, EOS_INDEX = 0, 1


def beam_step(scores, logp, finished):
    B, K, V = logp.shape
    only_eos = torch.full((V,), float("-inf"), dtype=logp.dtype)
    only_eos[EOS_INDEX] = 0.0
    logp = torch.where(finished[..., None], only_eos, logp)
    total = (scores[..., None] + logp).reshape(B, K * V)
    best, index = torch.sort(total, dim=1, descending=True)
    best, index = best[:, :K], index[:, :K]
    return best, index // V, index % V


def length_normalised(scores, lengths, alpha):
    return scores / torch.clamp(lengths, min=1) ** alpha
