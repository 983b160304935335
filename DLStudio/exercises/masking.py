"""Checks of the exercise `masking`: mask_tokens(ids, special, generator, mask_id,
vocab_size, special_ids) and masked_loss(logits, targets, selected). The masking checks
are statistical: the student's code is asked for many draws (questions run it; nothing it
says about itself counts), and each check measures a rate against the rule, with a margin
of about five standard deviations (a correct solution fails one by chance far less than
once in a million gradings)."""

import math

import torch
import torch.nn.functional as F

from ..data import bert_text
from ..Transformers import TransformerBERT
from .checking import (
    Exercise,
    Mistake,
    ask,
    check,
    close,
    fresh,
    near,
    question,
    student_code,
    tensor,
    with_grad,
)

CHECKS = []
B, T, V, MASK_ID = 256, 40, 500, 4
SPECIAL_IDS = (0, 1, 2, 3, 4)                  # [PAD], [UNK], [CLS], [SEP], [MASK]
ORDINARY = V - len(SPECIAL_IDS)                # the ids a random token is drawn from
DRAWS = 8             # calls of one generator: about 45,000 tokens that may be selected


def batch(seed=0):
    """ids (B, T) and special (B, T): [CLS] first, [SEP] after a sentence of 5 to 37 tokens,
    [PAD] after it; specials get ids 0 to 3, words 5 to V - 1."""
    g = torch.Generator().manual_seed(fresh(seed))
    ids = torch.randint(5, V, (B, T), generator=g)
    lengths = torch.randint(5, T - 2, (B,), generator=g)
    position = torch.arange(T)[None, :]
    ids[:, 0] = 2
    ids[position == lengths[:, None] + 1] = 3
    ids[position > lengths[:, None] + 1] = 0
    special = (position == 0) | (position >= lengths[:, None] + 1)
    return ids, special


@question
def draws_of(module, ids, special, seed, calls):
    """``calls`` successive calls with one generator of ``seed`` (one per epoch)."""
    g = torch.Generator().manual_seed(seed)
    with student_code():
        return [module.mask_tokens(ids, special, g, mask_id=MASK_ID, vocab_size=V,
                                   special_ids=SPECIAL_IDS) for _ in range(calls)]


@question
def loss_of(module, logits, targets, selected):
    with student_code():
        return module.masked_loss(logits, targets, selected)


@question
def gradient_of(module, logits, targets, selected):
    mine = logits.clone().requires_grad_()
    with torch.enable_grad(), student_code():
        result = module.masked_loss(mine, targets, selected)
        loss = result[0] if isinstance(result, tuple) and len(result) == 2 else result
        carries = isinstance(loss, torch.Tensor) and loss.requires_grad
        if carries:
            loss.backward()
    return result, carries, mine.grad


def draws(seed=0, calls=DRAWS):
    """[(ids, special, corrupted, selected)] of the student's ``calls`` draws."""
    ids, special = batch(seed)
    out = ask(draws_of, ids, special, fresh(100 + seed), calls)
    if not isinstance(out, list) or len(out) != calls:
        raise Mistake("mask_tokens should return (corrupted ids, selected)")
    found = []
    for result in out:
        if not isinstance(result, tuple) or len(result) != 2:
            raise Mistake("mask_tokens should return two things: (corrupted ids, selected)")
        corrupted = tensor(result[0], "the corrupted ids", ids.shape)
        selected = tensor(result[1], "selected", ids.shape)
        if selected.dtype != torch.bool:
            raise Mistake(f"selected has dtype {selected.dtype}: it must be torch.bool "
                          "(True where a token was chosen)")
        found.append((ids, special, corrupted, selected))
    chosen = sum(int(s.sum()) for *_, s in found)
    candidates = calls * int((~special).sum())
    if chosen < MIN_SELECTED * candidates:   # a property of nothing selected proves nothing
        raise Mistake(f"{chosen} tokens selected of {candidates} candidates in {calls} "
                      "calls: select each token that is not special with probability "
                      "MASK_RATE")
    return found


#: The least share of the candidates the draws must select before their properties are
#: judged (the reference selects 15% of about 5,000 a call: under 1% never happens).
MIN_SELECTED = 0.01
#: Fewest events a rate is judged on (0 of 0 is no rate).
MIN_COUNT = 30


def rate_near(count, n, p, what, hint):
    """``count`` of ``n`` is within five standard deviations of the rate ``p``, judged on at
    least MIN_COUNT of them."""
    if n < MIN_COUNT:
        raise Mistake(f"{what}: {count} of {n}, too few to judge a rate of {100 * p:.0f}% "
                      f"(at least {MIN_COUNT} are needed){': ' + hint if hint else ''}")
    margin = 5 * math.sqrt(p * (1 - p) / n)
    got = count / n
    if not near(got, p, margin):
        raise Mistake(f"{what}: {100 * got:.1f}% of {n}, expected {100 * p:.0f}% "
                      f"(within {100 * margin:.1f}%){': ' + hint if hint else ''}")


@check(CHECKS, "never_special", "[CLS], [SEP] and [PAD] are never selected, nor changed")
def never_special():
    for ids, special, corrupted, selected in draws(1):
        if (selected & special).any():
            raise Mistake("a special token ([CLS], [SEP] or [PAD]) was selected: leave the "
                          "positions where special is True out of the selection")
        if not torch.equal(corrupted[special], ids[special]):
            raise Mistake("a special token was changed in the corrupted ids")


@check(CHECKS, "rate", "each other token is selected with probability 0.15")
def rate():
    found = draws(2)
    selected = sum(int(s.sum()) for _, _, _, s in found)
    candidates = sum(int((~sp).sum()) for _, sp, _, _ in found)
    rate_near(selected, candidates, 0.15, "the tokens selected",
              "select each token that is not special with probability MASK_RATE")


@check(CHECKS, "eighty_ten_ten", "of the selected: 80% [MASK], 10% random, 10% unchanged")
def eighty_ten_ten():
    found = draws(3)
    masked = sum(int((c[s] == MASK_ID).sum()) for i, _, c, s in found)
    kept = sum(int((c[s] == i[s]).sum()) for i, _, c, s in found)
    n = sum(int(s.sum()) for _, _, _, s in found)
    rule = ("of the selected, 80% become [MASK], 10% a random token and 10% stay as they "
            "were (so that the model learns to read every position, not only [MASK]s)")
    rate_near(masked, n, 0.8, "the selected tokens made [MASK]", rule)
    rate_near(kept, n, 0.1 + 0.1 / ORDINARY, "the selected tokens left unchanged", rule)
    random = n - masked - kept                  # (a random token is the same once in ORDINARY)
    rate_near(random, n, 0.1 - 0.1 / ORDINARY, "the selected tokens made a random token", rule)


@check(CHECKS, "random_tokens", "a random token is any ordinary id, evenly, never a special")
def random_tokens():
    found = draws(4, 12)
    swapped = torch.cat([c[s & (c != MASK_ID) & (c != i)] for i, _, c, s in found])
    if len(swapped) and ((swapped < 0) | (swapped >= V)).any():
        raise Mistake(f"a random token is outside [0, vocab_size) (vocab_size {V})")
    drawn_special = swapped[torch.isin(swapped, torch.tensor(SPECIAL_IDS))]
    if len(drawn_special):
        raise Mistake(f"a random token is the special id {int(drawn_special[0])}: draw the "
                      "random tokens from the ordinary ids only (not in special_ids); a "
                      "random [PAD] hides a position the model must predict")
    lower = sum(1 for i in range(V // 2) if i not in SPECIAL_IDS)
    halves = int((swapped < V // 2).sum()), len(swapped)
    rate_near(*halves, lower / ORDINARY, "random tokens in the lower half of the vocabulary",
              "draw them evenly from every ordinary id (torch.randint over them)")


@check(CHECKS, "unselected_unchanged", "tokens not selected are left as they were")
def unselected_unchanged():
    for ids, _, corrupted, selected in draws(5, 2):
        close(corrupted[~selected], ids[~selected], "a token that was not selected", 0)


@check(CHECKS, "anew_each_epoch", "every call draws anew from the generator it is given")
def anew_each_epoch():
    (_, _, corrupted, first), (_, _, _, second) = draws(6, 2)
    if torch.equal(first, second):
        raise Mistake("two calls with the same generator selected the same tokens: every "
                      "epoch would mask alike. Draw every random number from generator")
    (_, _, corrupted_again, again), _ = draws(6, 2)
    if not torch.equal(first, again) or not torch.equal(corrupted, corrupted_again):
        raise Mistake("the same generator seed gave other masks: draw every random "
                      "number from generator (not torch's global one), so that a resumed "
                      "run masks as an unbroken one")


def loss_inputs(seed=0):
    g = torch.Generator().manual_seed(fresh(200 + seed))
    logits = torch.randn(4, 9, 13, generator=g, dtype=torch.float64) * 2
    targets = torch.randint(13, (4, 9), generator=g)
    selected = torch.rand(4, 9, generator=g) < 0.3
    selected[0, 0] = True
    return logits, targets, selected


def loss_answer(logits, targets, selected):
    result = ask(loss_of, logits, targets, selected)
    if not isinstance(result, tuple) or len(result) != 2:
        raise Mistake("masked_loss should return two things: (the summed loss, N)")
    return tensor(result[0], "the loss", ()), result[1]


@check(CHECKS, "loss_selected_only", "the loss counts the selected positions only")
def loss_selected_only():
    logits, targets, selected = loss_inputs(1)
    a, n = loss_answer(logits, targets, selected)
    noisy = logits.clone()
    noisy[~selected] = torch.randn(int((~selected).sum()), 13, dtype=torch.float64) * 5
    b, _ = loss_answer(noisy, targets, selected)
    if not near(a, b) or int(n) != int(selected.sum()):
        raise Mistake("the loss changed with the logits at positions that were not selected "
                      f"(or N is {int(n)}, not the {int(selected.sum())} selected): the model "
                      "saw those tokens; count the selected positions only")


@check(CHECKS, "loss_value", "the cross-entropy summed over the selected positions")
def loss_value():
    logits, targets, selected = loss_inputs(2)
    loss, _ = loss_answer(logits, targets, selected)
    want = F.cross_entropy(logits[selected], targets[selected], reduction="sum")
    if abs(loss.item() - want.item() / int(selected.sum())) < 1e-9:
        raise Mistake("the loss is the mean: return the sum (the trainer divides by N)")
    close(loss, want, "the loss")


@check(CHECKS, "loss_gradient", "the loss is differentiable, with the reference's gradient")
@with_grad
def loss_gradient():
    logits, targets, selected = loss_inputs(3)
    result, carries, grad = ask(gradient_of, logits, targets, selected)
    if not carries:
        raise Mistake("the loss carries no gradient: training could not learn from it")
    ref = logits.clone().requires_grad_()
    F.cross_entropy(ref[selected], targets[selected], reduction="sum").backward()
    close(tensor(grad, "the gradient of the logits", ref.shape), ref.grad, "the gradient")


EXERCISE = Exercise(
    name="masking",
    summary="BERT's masking (15%; 80/10/10) and the loss at the selected tokens only",
    defines=("mask_tokens", "masked_loss", "MyBERT"),
    forbids=lambda: [(bert_text, "mask_tokens", "DLStudio's mask_tokens"),
                     (F, "cross_entropy", "F.cross_entropy"), (F, "nll_loss", "F.nll_loss")],
    checks=CHECKS, container="MyBERT", base=TransformerBERT)
