"""The training loss, summed over the scored words: ``F.cross_entropy(logits, labels,
label_smoothing=eps, reduction="sum")`` (its definition), with a backward pass written for
it (the speed of training, docs/performance.md).

PyTorch's backward goes through log_softmax's general rule: a one-hot tensor of zeros is
written, scattered into, smoothed, summed back over each row and multiplied by the
probabilities; over a vocabulary of 27,000 words that is several passes over an (N, V)
tensor per step. The gradient of this loss has a closed form,

    d loss / d z_ij = p_ij - (1 - eps) [j = y_i] - eps / V        (p = softmax(z))

so the backward pass here writes it over the saved log-probabilities in one exp pass and
one product, in place (and, with label smoothing, one subtraction). The forward pass
is PyTorch's own (log_softmax, then nll_loss and the row sums): the loss it returns is
PyTorch's, and the gradient agrees with PyTorch's to rounding (tests check both, every
parameter's gradient of a whole model too, and the gradient against the numerical
derivative).

Labels of -100 (PyTorch's ``ignore_index``) are left out, as F.cross_entropy leaves them
out (no loss, no gradient, no label-smoothing term); any other negative label is refused
with a ValueError, where F.cross_entropy raises an error of its own.
"""

import torch
import torch.nn.functional as F

__all__ = ["summed_cross_entropy", "IGNORE_INDEX"]


class SummedCrossEntropy(torch.autograd.Function):
    """loss = sum_i (1 - eps) (-log p_i,y_i) + eps (-mean_j log p_ij); gradient as above."""

    @staticmethod
    def forward(ctx, logits, labels, label_smoothing):
        if logits.dtype in (torch.bfloat16, torch.float16):   # as autocast's cross_entropy
            logits = logits.float()
        log_probs = F.log_softmax(logits, dim=-1)                         # (N, V)
        loss = F.nll_loss(log_probs, labels, reduction="sum")
        if label_smoothing:
            smooth = -log_probs.sum() / log_probs.size(-1)
            loss = (1 - label_smoothing) * loss + label_smoothing * smooth
        ctx.save_for_backward(labels)
        ctx.log_probs = log_probs             # the gradient is written over it: see backward
        ctx.label_smoothing = label_smoothing
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        """Writes the gradient over the saved log-probabilities, in place of a fresh (N, V)
        tensor: over a 27,000-word vocabulary that is 38 MB a step, which the operating
        system hands over page by page (14 of an 18 ms backward, measured). So a second
        backward through the same loss (retain_graph) is refused, as PyTorch refuses one
        without retain_graph."""
        log_probs, ctx.log_probs = ctx.log_probs, None
        if log_probs is None:
            raise RuntimeError("summed_cross_entropy: its backward runs once (the gradient "
                               "is written over its saved log-probabilities); compute the "
                               "loss again for a second backward")
        labels, = ctx.saved_tensors
        eps, V = ctx.label_smoothing, log_probs.size(-1)
        grad = log_probs.exp_()                                           # p, (N, V)
        if eps:
            grad.sub_(eps / V)
        rows = torch.arange(len(labels), device=labels.device)
        grad[rows, labels] -= 1 - eps
        return grad.mul_(grad_loss), None, None          # (autograd casts it to the logits')


#: PyTorch's label for "not scored" (F.cross_entropy's default ignore_index).
IGNORE_INDEX = -100


def summed_cross_entropy(logits, labels, label_smoothing=0.0):
    """``F.cross_entropy(logits, labels, label_smoothing=label_smoothing, reduction="sum")``
    with the closed-form backward pass; labels of -100 are not scored, as there.
    Shape: logits (N, V), labels (N,) -> a scalar"""
    if labels.numel() and int(labels.min()) < 0:
        if bool(((labels < 0) & (labels != IGNORE_INDEX)).any()):
            raise ValueError(f"a label of {int(labels.min())}: labels are token ids >= 0, or "
                             f"{IGNORE_INDEX} for a position not scored")
        kept = labels != IGNORE_INDEX
        logits, labels = logits[kept], labels[kept]      # (the left-out rows' gradient: 0)
    if not torch.is_grad_enabled() or not logits.requires_grad or logits.dim() != 2:
        low = logits.dtype in (torch.bfloat16, torch.float16)         # scored in fp32, as
        return F.cross_entropy(logits.float() if low else logits, labels,   # transformers'
                               label_smoothing=label_smoothing, reduction="sum")
    return SummedCrossEntropy.apply(logits, labels, float(label_smoothing))
