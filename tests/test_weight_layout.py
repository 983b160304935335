"""Generation at batch 1 on a CPU lays the widening Linear weights out column by column
(runtime/weight_layout.py): the same numbers, the same tokens, and afterwards the model as
it was, trainable."""

import pytest
import torch

from DLStudio.evaluation.generation import generate
from DLStudio.runtime import weight_layout
from DLStudio.runtime.weight_layout import read_by_columns

from .close import assert_close
from .test_real_models import llama_shaped_gpt


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    """Tied output layer (V > M: widening) and a SwiGLU feed-forward (F > M)."""
    return llama_shaped_gpt(tmp_path_factory.mktemp("layout"), steps=2, tie_embeddings=True)


def test_the_widening_weights_lie_by_columns_inside_and_by_rows_after(gpt):
    before = {name: (p, p.detach().clone()) for name, p in gpt.named_parameters()}
    widening = {id(m.weight) for m in gpt.modules() if isinstance(m, torch.nn.Linear)
                and m.weight.size(0) > m.weight.size(1)}
    assert id(gpt.master_decoder.out.weight) in widening and len(widening) > 2   # + SwiGLU's
    with read_by_columns(gpt):
        for name, (p, value) in before.items():
            assert torch.equal(p, value), name                           # the same numbers
            assert p.is_contiguous() == (id(p) not in widening), name
            if id(p) in widening:
                assert p.t().is_contiguous(), name
    for name, (p, value) in before.items():
        assert dict(gpt.named_parameters())[name] is p                 # the same Parameter
        assert p.is_contiguous() and torch.equal(p, value), name
    assert gpt.master_decoder.out.weight is gpt.embeddings_generator.embedding.weight


def test_an_error_inside_leaves_the_weights_by_rows(gpt):
    with pytest.raises(RuntimeError, match="inside"):
        with read_by_columns(gpt):
            raise RuntimeError("inside")
    assert all(p.is_contiguous() for p in gpt.parameters())


def test_generating_by_columns_gives_the_tokens_and_log_probabilities_of_rows(gpt,
                                                                             monkeypatch):
    prompt = torch.tensor([[1, 5, 9, 14]])
    outputs = {}
    for use in (True, False):
        monkeypatch.setattr(weight_layout, "worth_it", lambda *a, use=use: use)
        logprobs = []
        with torch.inference_mode():
            ys = generate(gpt, prompt, max_new_tokens=12, end_ids=(-1,), logprobs=logprobs)
        outputs[use] = ys, torch.stack(logprobs)
    assert torch.equal(outputs[True][0], outputs[False][0])
    assert_close(outputs[True][1], outputs[False][1])


def test_training_after_generating_in_inference_mode_works(gpt):
    with torch.inference_mode():
        generate(gpt, torch.tensor([[1, 5, 9]]), max_new_tokens=10, end_ids=(-1,))
    assert not any(p.is_inference() for p in gpt.parameters())
    gpt.train()
    loss, n = gpt.loss(torch.tensor([[1, 5, 9, 14, 2]]))
    loss.backward()
    assert gpt.master_decoder.out.weight.grad is not None
    gpt.zero_grad(set_to_none=True)
    gpt.eval()


def test_it_is_used_where_it_was_measured_to_pay_only(gpt):
    assert weight_layout.worth_it(gpt, rows=1, steps=64)
    assert not weight_layout.worth_it(gpt, rows=8, steps=64)             # matrix products
    assert not weight_layout.worth_it(gpt, rows=1, steps=2)              # not repaid
    assert not weight_layout.worth_it(gpt.to(torch.bfloat16), rows=1, steps=64)
    gpt.float()
