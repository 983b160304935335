"""The budget schedule (schedule="budget", --schedule budget): the rate warms up as FG's does,
then falls to zero exactly where the budget ends, in steps or in time; a resumed run ends at
zero too, on the same rates as a run that was never stopped."""

import pytest

from DLStudio import DLStudio, TransformerFG, TransformerPreLN
from DLStudio.checkpoints import checkpoint_files, load_checkpoint
from DLStudio.data import generate_corpus
from DLStudio.training.schedule import BudgetedOptim

CORPUS = generate_corpus(300, seed=4)


def budget_run(folder, cls=TransformerFG, epochs=100, warmup=10, **options):
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=epochs, seed=1, learning_rate=1e-3)
    x = cls(dl_studio=dls, corpus=CORPUS, embedding_size=16, num_warmup_steps=warmup,
            checkpoint_freq=1000, schedule="budget")
    enc = x.MasterEncoder(dls, x, num_basic_encoders=1, num_atten_heads=2)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=1, num_atten_heads=2)
    return x, x.trainer(enc, dec, str(folder), **options)


def rates(trainer, stop_at=None):
    """Run; the rate of every step (and stop after ``stop_at`` steps, as Ctrl-C would)."""
    seen = {}

    def watch(t):
        seen[t.step] = t.current_lr()
        return stop_at is not None and t.step >= stop_at
    trainer.run(callback=watch)
    seen[trainer.step] = trainer.current_lr()    # the last step (a budget's end calls no one)
    return [seen[step] for step in sorted(seen)]


def test_the_rate_warms_up_then_falls_linearly_to_zero_at_the_end():
    opt = BudgetedOptim(None, peak=2e-3, n_warmup_steps=10, total_steps=30)
    assert [opt.lr_at(s) for s in (1, 5, 10)] == pytest.approx([2e-4, 1e-3, 2e-3])
    assert [opt.lr_at(s) for s in (20, 29, 30, 31)] == pytest.approx([1e-3, 1e-4, 0, 0])
    short = BudgetedOptim(None, peak=1.0, n_warmup_steps=10, total_steps=8)   # < the warm-up
    assert [short.lr_at(s) for s in (2, 4, 6, 8)] == pytest.approx([0.5, 1.0, 0.5, 0.0])


def test_the_cooldown_keeps_the_peak_then_falls_over_the_last_fifth():
    opt = BudgetedOptim(None, peak=1.0, n_warmup_steps=0, total_steps=100, cooldown=0.2)
    assert [opt.lr_at(s) for s in (1, 50, 80, 90, 99, 100, 101)] == pytest.approx(
        [1.0, 1.0, 1.0, 0.5, 0.05, 0.0, 0.0])
    warm = BudgetedOptim(None, peak=1.0, n_warmup_steps=10, total_steps=110, cooldown=0.5)
    assert [warm.lr_at(s) for s in (5, 10, 60, 85, 110)] == pytest.approx(
        [0.5, 1.0, 1.0, 0.5, 0.0])                     # falls over half of the 100 after it
    whole = BudgetedOptim(None, peak=2e-3, n_warmup_steps=10, total_steps=30, cooldown=1.0)
    assert [whole.lr_at(s) for s in (20, 29)] == pytest.approx([1e-3, 1e-4])  # = "budget"
    with pytest.raises(ValueError, match="0 < cooldown <= 1"):
        BudgetedOptim(None, peak=1.0, n_warmup_steps=0, cooldown=0.0)


def test_pre_ln_cools_down_over_the_last_fifth_of_its_steps(tmp_path):
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=100, seed=1, learning_rate=1e-3)
    x = TransformerPreLN(dl_studio=dls, corpus=CORPUS, embedding_size=16, checkpoint_freq=1000,
                         schedule="cooldown")
    enc = x.MasterEncoder(dls, x, num_basic_encoders=1, num_atten_heads=2)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=1, num_atten_heads=2)
    seen = rates(x.trainer(enc, dec, str(tmp_path / "ck"), max_steps=50))
    assert len(seen) == 50 and seen[:40] == pytest.approx([1e-3] * 40)
    assert seen[-1] == 0.0 and all(a > b for a, b in zip(seen[39:], seen[40:]))


def test_a_step_budget_ends_at_zero_from_fgs_peak(tmp_path):
    x, t = budget_run(tmp_path / "ck", max_steps=40)
    seen = rates(t)
    peak = TransformerFG.ScheduledOptim(None, 1.0, 16, 10).lr_at(10)
    assert len(seen) == 40 and seen[-1] == 0.0
    assert max(seen) == pytest.approx(peak) and seen.index(max(seen)) == 9    # step 10
    assert all(a >= b for a, b in zip(seen[9:], seen[10:]))                 # falls after


def test_pre_ln_starts_at_its_rate_and_ends_at_zero(tmp_path):
    _, t = budget_run(tmp_path / "ck", cls=TransformerPreLN, max_steps=20)
    seen = rates(t)
    assert seen[0] == pytest.approx(1e-3 * 19 / 20) and seen[-1] == 0.0


def test_a_resumed_budget_takes_the_rates_of_an_unbroken_run(tmp_path):
    _, whole = budget_run(tmp_path / "whole", max_steps=50)
    unbroken = rates(whole)
    _, first = budget_run(tmp_path / "parts", max_steps=50)
    before = rates(first, stop_at=23)                       # stopped inside an epoch
    _, rest = budget_run(tmp_path / "parts", max_steps=50, resume=True)
    after = rates(rest)
    assert before + after == pytest.approx(unbroken, rel=1e-12) and after[-1] == 0.0


def test_a_budget_schedule_needs_a_budget(tmp_path):
    with pytest.raises(ValueError, match="--max-minutes or --max-steps"):
        budget_run(tmp_path / "ck")
    with pytest.raises(ValueError, match="schedule must be one of warmup, budget, cooldown"):
        TransformerFG(dl_studio=DLStudio(use_gpu=False), corpus=CORPUS, schedule="cosine")


def test_the_script_flag_trains_on_the_budget(tmp_path):
    from DLStudio.cli.translation import train_main
    assert train_main("FG", ["--archive", "bundled", "--embedding-size", "16", "--num-layers",
                             "1", "--num-atten-heads", "2", "--batch-size", "32", "--epochs",
                             "3", "--num-warmup-steps", "5", "--schedule", "budget",
                             "--max-steps", "12", "--checkpoints-dir", str(tmp_path / "ck"),
                             "--no-eval", "--cpu"]) == 0
    payload = load_checkpoint(checkpoint_files(tmp_path / "ck")[-1])
    assert payload["container_args"]["schedule"] == "budget"
    assert payload["optimizer"]["total_steps"] == 12 and payload["step"] == 12
    assert payload["optimizer"]["optimizer"]["param_groups"][0]["lr"] == 0.0   # the last


# ---------------------------------------------------------------------------------------
# The budget given now wins on --resume; the warm-up is fixed once; the nearest limit ends it.
def test_a_larger_max_steps_on_resume_takes_the_rates_of_an_unbroken_longer_run(tmp_path):
    _, whole = budget_run(tmp_path / "whole", max_steps=80)
    unbroken = rates(whole)
    _, first = budget_run(tmp_path / "parts", max_steps=40)
    before = rates(first)
    _, rest = budget_run(tmp_path / "parts", max_steps=80, resume=True)
    after = rates(rest)
    assert len(before) == 40 and len(after) == 40
    assert after == pytest.approx(unbroken[40:], rel=1e-12) and after[-1] == 0.0


def test_a_smaller_max_steps_on_resume_ends_at_zero_there(tmp_path):
    _, first = budget_run(tmp_path / "ck", max_steps=80)
    rates(first, stop_at=30)
    _, rest = budget_run(tmp_path / "ck", max_steps=40, resume=True)
    after = rates(rest)
    assert rest.step == 40 and len(after) == 10 and after[-1] == 0.0
    assert all(a > b for a, b in zip(after, after[1:]))       # falling all the way


class StepClock:
    """A clock read off the trainer's step: the first step takes ``first`` seconds, every
    other one ``each``."""

    def __init__(self, first, each):
        self.trainer, self.first, self.each = None, first, each

    def __call__(self):
        step = self.trainer.step if self.trainer else 0
        return 0.0 if step == 0 else self.first + self.each * (step - 1)


def test_a_slow_first_step_neither_shortens_the_warm_up_nor_the_time_estimate(tmp_path):
    _, t = budget_run(tmp_path / "ck", max_minutes=30, warmup=1000)
    clock = t.clock = StepClock(first=60.0, each=1.0)
    clock.trainer = t
    seen = rates(t, stop_at=4)
    peak = t.optimizer.peak
    assert seen[1] == pytest.approx(peak * 2 / 1000)     # step 2: the warm-up's own rate
    # after step 4: 1,800 s less 63 s, at one step a second (the first step left out)
    assert t.optimizer.total_steps == 4 + 1800 - 63
    assert t.optimizer.state_dict()["warmup"] == 1000


def clocked(trainer, each):
    trainer.clock = StepClock(first=each, each=each)
    trainer.clock.trainer = trainer
    return trainer


def test_a_time_budget_is_counted_over_resumes_and_ends_at_zero(tmp_path):
    # 3 s at 1/8 s a step: 24 steps, by a clock that counts steps (the same on any machine)
    _, whole = budget_run(tmp_path / "whole", max_minutes=0.05)
    unbroken = rates(clocked(whole, 0.125))
    _, first = budget_run(tmp_path / "ck", max_minutes=0.05)
    before = rates(clocked(first, 0.125), stop_at=15)
    _, rest = budget_run(tmp_path / "ck", max_minutes=0.05, resume=True)
    after = rates(clocked(rest, 0.125))
    payload = load_checkpoint(checkpoint_files(tmp_path / "ck")[-1])
    assert payload["train_seconds"] == pytest.approx(0.125 * payload["step"])  # both runs'
    assert payload["optimizer"]["total_steps"] == 24 and unbroken[23] == 0.0
    assert (before + after)[2:24] == pytest.approx(unbroken[2:24], rel=1e-12)


def test_the_epoch_limit_ends_a_budget_when_it_comes_first(tmp_path):
    _, t = budget_run(tmp_path / "ck", epochs=2, max_minutes=10)
    seen = rates(t)
    assert t.step == len(seen) == 2 * t.batches_per_epoch()
    assert seen[-1] == 0.0 and max(seen) > 0
