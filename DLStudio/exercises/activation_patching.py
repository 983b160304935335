"""Checks of the exercise `activation_patching`: patch_residual(model, clean, corrupted,
metric, names), on small GPTs of ours with weights drawn from the check's seed."""

import torch

from ..evaluation import interpret
from ..model.architecture import GPTParts
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    differs,
    fresh,
    near,
    question,
    student_code,
    tensor,
)

CHECKS = []
V, T = 24, 7
TOL = 1e-5                   # the tables are float32 (the student's zeros) of float64 runs


def model_of(seed, layers=2):
    """In float64: the student's process and the checker's compute the same numbers to far
    below the tolerance, whatever their kernels and threads (a normalised metric divides by
    a difference that may be small)."""
    torch.manual_seed(seed)
    return GPTParts(vocab_size=V, embedding_size=16, max_seq_length=12,
                    num_basic_decoders=layers, num_atten_heads=2, norm_first=True).double().eval()


def texts(seed, at):
    """A clean text and the same with the token at ``at`` changed. (1, T) each"""
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(2, V, (1, T), generator=g)
    shift = 1 + int(torch.randint(0, V - 3, (), generator=g))       # another token
    corrupted = clean.clone()
    corrupted[0, at] = 2 + (clean[0, at] - 2 + shift) % (V - 2)
    return clean, corrupted


def metric_of(model, clean, corrupted):
    """The logit difference of the clean run's likeliest last token over the corrupted's (or
    its runner-up, where they are the same)."""
    with torch.no_grad():
        right, second = model(clean)[0, -1].topk(2).indices
        wrong = model(corrupted)[0, -1].argmax()
    wrong = second if wrong == right else wrong
    return lambda logits: interpret.logit_diff(logits, right, wrong)


def names_of(model):
    return [interpret.layer_hook(model, i, "hook_resid_pre")
            for i in range(len(model.master_decoder.basic_decoder_arr))]


@question
def patched(module, seed, at, layers):
    """The student's table, and the hooks left on the model after it."""
    model = model_of(seed, layers)
    clean, corrupted = texts(seed, at)
    metric, names = metric_of(model, clean, corrupted), names_of(model)
    with student_code():
        result = module.patch_residual(model, clean, corrupted, metric, names)
    left = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()) \
        + sum(len(point.forward_hooks) for point in model.hook_points().values())
    return result, left


def reference(seed, at, layers):
    model = model_of(seed, layers)
    clean, corrupted = texts(seed, at)
    return interpret.patch_residual(model, clean, corrupted,
                                    metric_of(model, clean, corrupted))


def run(seed, at, layers=2):
    answer = ask(patched, seed, at, layers)
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Mistake("patch_residual should return one tensor (len(names), T)")
    result, left = answer
    return tensor(result, "the table", (layers, T)).double(), left


@check(CHECKS, "shape", "returns (len(names), T): a row a hook point, a column a position")
def shape():
    run(fresh(0), 3)


@check(CHECKS, "one_position", "a patch replaces the activation at its position t only")
def one_position():
    at = 1 + fresh(1) % (T - 2)
    result, _ = run(fresh(1), at)
    first = result[0]
    # layer 0's residual stream differs between the runs at `at` alone
    if at < T - 1 and not differs(first[at:], 1.0, 1e-3).any():
        raise Mistake(f"patching position {at + 1} of the first layer restores everything, as "
                      f"position {at} does: the patch replaces positions up to t (or from "
                      "t), not position t alone (x[:, t] = clean[:, t])")
    close(first, torch.nn.functional.one_hot(torch.tensor(at), T).double(),
          "the first layer's row (the texts differ at one position)", TOL,
          f"only position {at} differs between the texts before the first layer: patching "
          "it restores all (1), patching another restores nothing (0)")


@check(CHECKS, "normalised", "(patched - corrupted) / (clean - corrupted): 0 nothing, 1 all")
def normalised():
    at = 1 + fresh(2) % (T - 2)
    result, _ = run(fresh(2), at)
    if not near(result[0, at], 1.0, 1e-3) or differs(result[0, :at], 0.0, 1e-3).any():
        raise Mistake(f"the first layer's patch at position {at} gives "
                      f"{result[0, at].item():.4g} and elsewhere {result[0, 0].item():.4g}: the "
                      "metric is not normalised; subtract metric(corrupted) and divide by "
                      "metric(clean) - metric(corrupted), so that a full restoration is 1 and "
                      "none is 0")
    close(result, reference(fresh(2), at, 2).double(), "the table", TOL)


@check(CHECKS, "no_hooks_left", "no hook stays registered on the model afterwards")
def no_hooks_left():
    _, left = run(fresh(3), 2, layers=1)
    if left:
        raise Mistake(f"{left} hook(s) are still registered on the model when patch_residual "
                      "returns: every later run of the model is patched too; use "
                      "run_with_hooks (or remove each handle register_forward_hook returns)")


@check(CHECKS, "table", "every layer and position as the library's patching gives")
def table():
    at = 1 + fresh(4) % (T - 2)
    result, _ = run(fresh(4), at, layers=3)
    close(result, reference(fresh(4), at, 3).double(), "the table", TOL)


EXERCISE = Exercise(
    name="activation_patching",
    summary="activation patching over layers x positions, the normalised logit difference "
            "(Meng et al. 2022)",
    defines=("patch_residual",),
    forbids=lambda: [(interpret, "patch_residual", "the library's interpret.patch_residual")],
    checks=CHECKS)
