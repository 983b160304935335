"""The training loss's fast backward (model/summed_loss.py) against its definition,
F.cross_entropy(..., reduction="sum"): the same loss to the last bit, the same gradient to
rounding, and the closed form against the numerical derivative."""

import pytest
import torch
import torch.nn.functional as F

from DLStudio.model.summed_loss import summed_cross_entropy


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_summed_loss_is_pytorchs_and_so_is_its_gradient(eps):
    g = torch.Generator().manual_seed(0)
    z = (3 * torch.randn(37, 1000, generator=g)).requires_grad_()
    y = torch.randint(1000, (37,), generator=g)
    want = F.cross_entropy(z, y, label_smoothing=eps, reduction="sum")
    got = summed_cross_entropy(z, y, eps)
    assert torch.equal(got, want)
    (g_want,), (g_got,) = (torch.autograd.grad(loss / 37, z) for loss in (want, got))
    assert (g_got - g_want).abs().max() <= 1e-7          # NaN fails this comparison
    assert not torch.equal(g_got, torch.zeros_like(g_got))


def numerical_gradient(f, z, h=1e-6):
    """Central differences of f at z, one entry at a time (float64)."""
    grad = torch.zeros_like(z)
    for i in range(z.numel()):
        step = torch.zeros_like(z).view(-1)
        step[i] = h
        step = step.view_as(z)
        grad.view(-1)[i] = (f(z + step) - f(z - step)) / (2 * h)
    return grad


@pytest.mark.parametrize("eps", [0.0, 0.25])
def test_the_closed_form_is_the_derivative_of_the_loss(eps):
    """autograd's gradcheck, written out (gradcheck runs backward twice on one graph, which
    this loss refuses: see the last test)."""
    z = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 6, 3, 3, 1])
    analytic, = torch.autograd.grad(summed_cross_entropy(z, y, eps) * 0.5, z)
    with torch.no_grad():
        numeric = numerical_gradient(lambda x: summed_cross_entropy(x, y, eps) * 0.5, z)
    assert (analytic - numeric).abs().max() <= 1e-6           # NaN fails this comparison


def test_a_wrong_closed_form_would_be_caught():
    """The check above can fail: a backward that forgets the smoothing's eps / V is off."""
    z = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 6, 3, 3, 1])
    exact = torch.autograd.grad(F.cross_entropy(z, y, label_smoothing=0.25,
                                                reduction="sum"), z)[0]
    wrong = torch.softmax(z, -1).detach()
    wrong[torch.arange(5), y] -= 0.75
    assert (wrong - exact).abs().max() > 1e-3


def test_without_gradients_it_is_the_definition_itself():
    z, y = torch.randn(4, 9), torch.tensor([1, 2, 3, 4])
    with torch.no_grad():
        assert torch.equal(summed_cross_entropy(z, y, 0.1),
                           F.cross_entropy(z, y, label_smoothing=0.1, reduction="sum"))


def test_under_bf16_autocast_it_computes_in_fp32_as_cross_entropy_does():
    torch.manual_seed(0)
    out, x, y = torch.nn.Linear(8, 50), torch.randn(6, 8), torch.randint(50, (6,))
    grads = []
    for loss_of in (summed_cross_entropy,
                    lambda z, y, e: F.cross_entropy(z, y, label_smoothing=e, reduction="sum")):
        out.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = out(x)
            loss = loss_of(logits, y, 0.1)
        loss.backward()
        grads.append((loss, out.weight.grad.clone()))
    assert logits.dtype == torch.bfloat16 and torch.equal(grads[0][0], grads[1][0])
    assert (grads[0][1] - grads[1][1]).abs().max() <= 1e-6


def test_a_second_backward_through_one_loss_is_refused_in_words():
    z = torch.randn(3, 4, requires_grad=True)
    loss = summed_cross_entropy(z, torch.tensor([0, 1, 2]))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward runs once"):
        loss.backward()
