"""The training loss's fast backward (model/summed_loss.py) against its definition,
F.cross_entropy(..., reduction="sum"): the same loss, the same gradient to
rounding, and the closed form against the numerical derivative."""

import pytest
import torch
import torch.nn.functional as F

from DLStudio.model.summed_loss import summed_cross_entropy

from .close import assert_close, tolerance


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_summed_loss_is_pytorchs_and_so_is_its_gradient(eps):
    g = torch.Generator().manual_seed(0)
    z = (3 * torch.randn(37, 1000, generator=g)).requires_grad_()
    y = torch.randint(1000, (37,), generator=g)
    want = F.cross_entropy(z, y, label_smoothing=eps, reduction="sum")
    got = summed_cross_entropy(z, y, eps)
    assert torch.equal(got, want)
    (g_want,), (g_got,) = (torch.autograd.grad(loss / 37, z) for loss in (want, got))
    assert_close(g_got, g_want)          # NaN fails this comparison
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
    assert_close(analytic, numeric, dtype=torch.float32)   # to float32 precision: h is small


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
    assert_close(grads[0][1], grads[1][1])


def test_a_second_backward_through_one_loss_is_refused_in_words():
    z = torch.randn(3, 4, requires_grad=True)
    loss = summed_cross_entropy(z, torch.tensor([0, 1, 2]))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward runs once"):
        loss.backward()


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_labels_of_minus_100_are_left_out_as_pytorch_leaves_them_out(eps):
    g = torch.Generator().manual_seed(1)
    z = (3 * torch.randn(9, 50, generator=g)).requires_grad_()
    y = torch.randint(50, (9,), generator=g)
    y[[0, 4, 8]] = -100
    want = F.cross_entropy(z, y, label_smoothing=eps, reduction="sum")
    got = summed_cross_entropy(z, y, eps)
    assert_close(got, want)
    (g_want,), (g_got,) = (torch.autograd.grad(loss, z) for loss in (want, got))
    assert_close(g_got, g_want)               # NaN fails this comparison
    assert torch.equal(g_got[[0, 4, 8]], torch.zeros(3, 50))   # column V - 100 untouched
    with pytest.raises(ValueError, match="a label of -1"):
        summed_cross_entropy(z, torch.full((9,), -1), eps)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_every_parameters_gradient_is_autograds_through_cross_entropy(eps):
    """A whole model's gradients with the closed form against autograd's through
    F.cross_entropy, at a tolerance that a backward without the smoothing's eps / V fails."""
    from DLStudio.model.architecture import EncoderDecoderParts
    torch.manual_seed(0)
    model = EncoderDecoderParts(vocab_en_size=40, vocab_es_size=60, max_seq_length=12,
                                embedding_size=32).encoder_decoder(num_basic_encoders=1,
                                                                   num_basic_decoders=2)
    src, tgt = torch.randint(2, 40, (6, 12)), torch.randint(2, 60, (6, 12))
    tgt[:, 0], tgt[:3, 8:] = 0, 1                              # SOS; three padded rows
    grads = []
    for how in ("closed form", "autograd", "without eps / V"):
        model.zero_grad()
        if how == "closed form":
            loss, _ = model.loss(src, tgt, label_smoothing=eps)
        else:
            from DLStudio.model.tokens import padding_mask
            keep = ~padding_mask(tgt[:, 1:])
            logits = model(src, tgt[:, :-1], keep)
            loss = F.cross_entropy(logits, tgt[:, 1:][keep], label_smoothing=eps,
                                   reduction="sum")
            if how == "without eps / V":
                loss = loss + eps / logits.size(-1) * logits.sum()
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    ours, theirs, wrong = grads
    scale = max(g.abs().max().item() for g in theirs.values())
    tol = tolerance(theirs[next(iter(theirs))], scale=scale)
    for n in ours:                                  # NaN fails
        assert_close(ours[n], theirs[n], scale=scale, what=n)
    if eps:
        assert max((wrong[n] - theirs[n]).abs().max() for n in ours) > tol
