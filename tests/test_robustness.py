"""Nothing lost, nothing run that should not be: resume, interruption, crash safety,
divergence, crafted files, nothing deleted, determinism."""

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from DLStudio import DLStudio, TransformerFG, TransformerGPT, TransformerPreLN
from DLStudio.checkpoints import (
    CheckpointError,
    checkpoint_files,
    list_checkpoints,
    load_checkpoint,
)
from DLStudio.data import generate_corpus, save_archive
from DLStudio.training import TrainingDiverged

from .conftest import ROOT
from .stress_sigkill import kill_trials

CORPUS = generate_corpus(300, seed=4)


def build(cls=TransformerFG, epochs=4, folder=None, dropout=0.1, **kw):
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=epochs, seed=1, learning_rate=1e-3,
                   path_saved_model=str(folder / "saved.pt") if folder else "./saved.pt")
    x = cls(dl_studio=dls, corpus=CORPUS, embedding_size=16, num_warmup_steps=20,
            checkpoint_freq=1, dropout=dropout, **kw)
    enc = x.MasterEncoder(dls, x, num_basic_encoders=1, num_atten_heads=2)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=1, num_atten_heads=2)
    return dls, x, enc, dec


def weights(trainer):
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("cls", [TransformerFG, TransformerPreLN])
def test_resume_reaches_the_same_weights_as_an_uninterrupted_run(tmp_path, cls):
    dls, x, enc, dec = build(cls, epochs=4)
    whole = x.trainer(enc, dec, str(tmp_path / "a"))
    whole.run()
    # the same run stopped after 2 epochs, then resumed in a new process-like setting
    dls, x, enc, dec = build(cls, epochs=2)
    x.trainer(enc, dec, str(tmp_path / "b")).run()
    dls, x, enc, dec = build(cls, epochs=4)
    resumed = x.trainer(enc, dec, str(tmp_path / "b"), resume=True)
    assert (resumed.epoch, resumed.step) == (2, whole.step // 2)
    resumed.run()
    assert same(weights(whole), weights(resumed))
    assert whole.train_losses == resumed.train_losses
    assert resumed.optimizer.state_dict()["optimizer" if cls is TransformerFG else "state"]


def test_resume_inside_an_epoch(tmp_path):
    dls, x, enc, dec = build(epochs=2)
    whole = x.trainer(enc, dec, str(tmp_path / "a"))
    whole.run()
    dls, x, enc, dec = build(epochs=2)
    stopped = x.trainer(enc, dec, str(tmp_path / "b"))
    stopped.run(callback=lambda t: t.step == 23)       # stops inside epoch 2 (18 batches each)
    assert [os.path.basename(p) for p in checkpoint_files(tmp_path / "b")] == \
        ["checkpoint_0.pt", "checkpoint_1_partial.pt"]
    dls, x, enc, dec = build(epochs=2)
    resumed = x.trainer(enc, dec, str(tmp_path / "b"), resume=True)
    assert (resumed.epoch, resumed.batches_done, resumed.step) == (1, 5, 23)
    resumed.run()
    assert same(weights(whole), weights(resumed))


def test_same_seed_same_losses_and_checkpoints(tmp_path):
    runs = []
    for name in ("a", "b"):
        dls, x, enc, dec = build(epochs=2)
        t = x.trainer(enc, dec, str(tmp_path / name))
        runs.append((t.run(), load_checkpoint(str(tmp_path / name / "checkpoint_1.pt"))))
    (la, ca), (lb, cb) = runs
    assert la == lb
    for part in ca["model"]:
        assert same(ca["model"][part], cb["model"][part])


def test_divergence_stops_with_advice_and_keeps_the_last_checkpoint(tmp_path):
    dls, x, enc, dec = build(TransformerPreLN, epochs=1)
    trainer = x.trainer(enc, dec, str(tmp_path))
    trainer.run()
    good = str(tmp_path / "checkpoint_0.pt")
    before = sha(good)
    dls.epochs = 3
    for group in trainer.optimizer.param_groups:
        group["lr"] = 1e30                                   # an absurd learning rate
    with pytest.raises(TrainingDiverged) as e:
        trainer.run()
    message = str(e.value)
    assert "in epoch 2" in message and "learning rate 1e+30" in message
    assert "checkpoint_0.pt" in message and "lengthen the warm-up" in message
    assert sha(good) == before and list_checkpoints(tmp_path) == [0]
    payload = load_checkpoint(good)
    assert all(torch.isfinite(v).all() for v in payload["model"]["encoder"].values())


def test_damaged_checkpoint_is_named_and_resume_falls_back(tmp_path, caplog):
    dls, x, enc, dec = build(epochs=2)
    x.trainer(enc, dec, str(tmp_path)).run()
    last = tmp_path / "checkpoint_1.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])      # truncated
    with pytest.raises(CheckpointError, match="checkpoint_1.pt"):
        load_checkpoint(str(last))
    dls, x, enc, dec = build(epochs=2)
    resumed = x.trainer(enc, dec, str(tmp_path), resume=True)
    assert resumed.last_checkpoint.endswith("checkpoint_0.pt") and resumed.epoch == 1
    assert "skipping" in caplog.text and "checkpoint_1.pt" in caplog.text


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_crafted_checkpoint_cannot_run_code(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "checkpoint_0.pt"
    torch.save({"format": "x", "model": Payload(str(marker))}, path)
    with pytest.raises(CheckpointError, match="checkpoint_0.pt"):
        load_checkpoint(str(path))
    assert not marker.exists()


def test_nothing_is_deleted_and_reuse_needs_a_decision(tmp_path):
    dls, x, enc, dec = build(epochs=1)
    x.trainer(enc, dec, str(tmp_path)).run()
    (tmp_path / "my_notes.txt").write_text("keep me")
    (tmp_path / "saved_elsewhere").write_text("keep me too")
    dls, x, enc, dec = build(epochs=1)
    with pytest.raises(FileExistsError, match="--resume"):
        x.trainer(enc, dec, str(tmp_path))
    first = sha(tmp_path / "checkpoint_0.pt")
    x.trainer(enc, dec, str(tmp_path), overwrite=True).run()
    assert (tmp_path / "my_notes.txt").read_text() == "keep me"
    assert (tmp_path / "saved_elsewhere").read_text() == "keep me too"
    assert sha(tmp_path / "previous" / "checkpoint_0.pt") == first          # moved, not lost
    assert sorted(os.listdir(tmp_path / "previous")) == ["checkpoint_0.pt"]


def _train_command(folder, extra=()):
    archive = folder / "tiny.tar.gz"
    if not archive.exists():
        save_archive(CORPUS, archive)
    return [sys.executable, os.path.join(ROOT, "ExamplesTransformers",
                                         "seq2seq_with_transformerFG.py"),
            "--archive", str(archive), "--epochs", "200", "--embedding-size", "16",
            "--num-layers", "1", "--num-atten-heads", "2", "--batch-size", "16",
            "--checkpoint-freq", "1", "--checkpoints-dir", str(folder / "ck"), "--cpu",
            "--no-eval", *extra]


def test_sigint_writes_a_resumable_checkpoint(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")
    proc = subprocess.Popen(_train_command(tmp_path), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list_checkpoints(tmp_path / "ck") and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-2000:]
    assert "interrupted by SIGINT" in err and "--resume" in err and "Traceback" not in err
    newest = checkpoint_files(tmp_path / "ck")[-1]
    assert newest in err
    interrupted = load_checkpoint(newest)
    resumed = subprocess.run(_train_command(tmp_path, ["--resume", "--max-minutes", "0.05"]),
                             env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming from {newest}" in resumed.stderr
    after = load_checkpoint(checkpoint_files(tmp_path / "ck")[-1])
    assert after["step"] > interrupted["step"]              # it went on from there
    assert after["train_losses"][:interrupted["step"]] == interrupted["train_losses"]


@pytest.mark.slow
def test_sigkill_at_random_moments_never_leaves_a_bad_checkpoint(tmp_path):
    results = kill_trials(trials=3, folder=tmp_path, seed=0)
    assert all(r["bad"] == [] for r in results), results
    assert sum(r["checked"] for r in results) > 0


def run_in(folder, epochs=1, seed=1, batch_size=16, dropout=0.1, **options):
    dls = DLStudio(use_gpu=False, batch_size=batch_size, epochs=epochs, seed=seed,
                   learning_rate=1e-3, path_saved_model=str(folder / "saved.pt"))
    x = TransformerFG(dl_studio=dls, corpus=CORPUS, embedding_size=16, num_warmup_steps=20,
                      checkpoint_freq=1, dropout=dropout)
    enc = x.MasterEncoder(dls, x, num_basic_encoders=1, num_atten_heads=2)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=1, num_atten_heads=2)
    return x.trainer(enc, dec, str(folder), **options)


def test_overwrite_keeps_the_old_run_in_previous_and_resume_continues_the_new_one(tmp_path):
    ck = tmp_path / "ck"
    a = run_in(ck, epochs=3, max_steps=40)               # 18 steps an epoch: stops in epoch 3
    a.run()
    assert [os.path.basename(p) for p in checkpoint_files(ck)] == [
        "checkpoint_0.pt", "checkpoint_1.pt", "checkpoint_2_partial.pt"]
    b = run_in(ck, epochs=1, seed=2, overwrite=True)
    b.run()
    assert {f for f in os.listdir(ck / "previous")} >= {"checkpoint_0.pt", "checkpoint_1.pt",
                                                        "checkpoint_2_partial.pt"}
    assert [os.path.basename(p) for p in checkpoint_files(ck)] == ["checkpoint_0.pt"]
    resumed = run_in(ck, epochs=2, seed=2, resume=True)  # B's run, not A's older partial
    assert resumed.run_id == b.run_id and resumed.last_checkpoint.endswith("checkpoint_0.pt")
    resumed.run()
    assert load_checkpoint(str(ck / "checkpoint_1.pt"))["run_id"] == b.run_id
    (ck / "previous" / "my_notes.txt").write_text("keep me")
    run_in(ck, epochs=1, seed=3, overwrite=True).run()   # previous/ now keeps B's run only
    assert load_checkpoint(str(ck / "previous" / "checkpoint_0.pt"))["run_id"] == b.run_id
    assert not (ck / "previous" / "checkpoint_2_partial.pt").exists()
    assert (ck / "previous" / "my_notes.txt").read_text() == "keep me"


def test_resume_refuses_another_configuration_and_names_what_differs(tmp_path):
    run_in(tmp_path, epochs=1).run()
    with pytest.raises(ValueError, match=r"batch_size: 16 there, 8 now"):
        run_in(tmp_path, epochs=2, batch_size=8, resume=True)
    with pytest.raises(ValueError, match=r"dropout: 0.1 there, 0.2 now"):
        run_in(tmp_path, epochs=2, dropout=0.2, resume=True)
    with pytest.raises(ValueError, match=r"seed: 1 there, 5 now"):
        run_in(tmp_path, epochs=2, seed=5, resume=True)
    assert run_in(tmp_path, epochs=2, resume=True).epoch == 1       # more epochs: fine


def test_resume_refuses_a_directory_holding_two_runs(tmp_path):
    run_in(tmp_path / "a", epochs=1).run()
    run_in(tmp_path / "b", epochs=1).run()
    os.replace(tmp_path / "b" / "checkpoint_0.pt", tmp_path / "a" / "checkpoint_7.pt")
    with pytest.raises(ValueError, match="2 different runs"):
        run_in(tmp_path / "a", epochs=9, resume=True)


def test_resume_refuses_another_precision_and_reports_another_compile(tmp_path, caplog):
    run_in(tmp_path, epochs=1).run()
    with pytest.raises(ValueError, match=r"precision: fp32 there, bf16 now"):
        run_in(tmp_path, epochs=2, precision="bf16", resume=True)
    caplog.clear()
    with caplog.at_level("WARNING"):
        run_in(tmp_path, epochs=2, compile=True, resume=True)
    assert "without --compile" in caplog.text and "same arithmetic" in caplog.text


def test_a_checkpoint_from_before_precision_was_recorded_resumes_as_fp32(tmp_path, caplog):
    run_in(tmp_path, epochs=1).run()
    path = checkpoint_files(str(tmp_path))[-1]
    payload = load_checkpoint(path)
    del payload["training_config"]["precision"]
    payload.pop("compile", None)
    torch.save(payload, path)
    with caplog.at_level("WARNING"):
        assert run_in(tmp_path, epochs=2, resume=True).epoch == 1
    assert "records no precision" in caplog.text and "fp32" in caplog.text
    with pytest.raises(ValueError, match=r"precision: fp32 there, bf16 now"):
        run_in(tmp_path, epochs=2, precision="bf16", resume=True)


@pytest.mark.parametrize("before, after", [(1, 2), (2, 1)])
def test_a_run_resumed_on_another_number_of_processes_trains_on_the_batches_it_had_not(
        before, after):
    """The ranks' shares before a resume inside an epoch and after it, with another number
    of processes: no example twice, and none left out but the one batch too small to share
    between 2 processes (161 examples in batches of 16: one batch of 1)."""
    from DLStudio.runtime.distributed import World
    from DLStudio.training import bucketed_batches
    n, b = 161, 16
    dls, x, enc, dec = build(epochs=1)
    dls.batch_size = b
    trainer = x.trainer(enc, dec)
    trainer.src = trainer.tgt = torch.arange(n)[:, None]      # row i holds example i
    trainer.src_len = trainer.tgt_len = torch.ones(n, dtype=torch.long)
    trainer.num_examples = n
    for seed in range(100):          # a seed that shuffles the batch of 1 to the first half
        dls.seed = seed
        order = bucketed_batches(torch.ones(n), b, trainer.epoch_generator(0))
        if [len(batch) for batch in order].index(1) < 4:
            break
    lonely = int(next(batch for batch in order if len(batch) == 1))

    def trained(size, skip=0, steps=None):
        shares = []
        for rank in range(size):
            trainer.world, trainer.skip_size = World(rank, size), before   # as resume() sets
            shares.append([[int(i) for i in src[:, 0]]
                           for src, _ in list(trainer.batches(0, skip))[:steps]])
        assert len({len(s) for s in shares}) == 1        # every rank, the same steps
        return [i for s in shares for batch in s for i in batch], len(shares[0])

    steps = 5                                     # the checkpoint's batches_done
    first, _ = trained(before, steps=steps)
    rest, remaining = trained(after, skip=steps)
    assert len(first + rest) == len(set(first + rest))
    assert set(range(n)) - set(first + rest) <= {lonely}
    # batches_done, counted again in this run's steps, ends the epoch where it should
    assert trainer.batches_done + remaining == trainer.batches_per_epoch()


def test_a_file_the_student_wrote_is_never_written_over(tmp_path, monkeypatch):
    """path_saved_model holding a file this framework did not write: refused before any
    training; the loss plot of a run without a checkpoints folder goes beside the saved
    model, never over a picture of the student's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train_loss.png").write_bytes(b"the student's own picture")
    models = tmp_path / "models"
    models.mkdir()
    (models / "saved.pt").write_bytes(b"the student's own model")
    dls, x, enc, dec = build(epochs=1, folder=models)
    with pytest.raises(FileExistsError, match=r"saved\.pt holds a file this framework did"):
        x.run_code_for_training(dls, enc, dec, checkpoints_dir=str(tmp_path / "ck"))
    assert (models / "saved.pt").read_bytes() == b"the student's own model"
    assert not (tmp_path / "ck").exists()                          # nothing trained
    os.unlink(models / "saved.pt")
    (models / "train_loss.png").write_bytes(b"another picture of theirs")
    sentences = [es for _, es in CORPUS.pairs]
    for _ in range(2):                        # the second run writes over its own files only
        dls = DLStudio(use_gpu=False, batch_size=16, epochs=1, seed=1,
                       path_saved_model=str(models / "saved_gpt.pt"))
        gpt = TransformerGPT(dl_studio=dls, sentences=sentences, tokenizer="word",
                             embedding_size=16, num_basic_decoders=1, num_atten_heads=2)
        gpt.run_code_for_training(None, max_steps=3, display_train_loss=True)
        assert (tmp_path / "train_loss.png").read_bytes() == b"the student's own picture"
        assert (models / "train_loss.png").read_bytes() == b"another picture of theirs"
        assert (models / "train_loss-1.png").stat().st_size > 5000
        assert load_checkpoint(str(models / "saved_gpt.pt"))["step"] == 3
        assert sorted(p.name for p in models.iterdir() if not p.name.startswith(".")) == [
            "saved_gpt.pt", "train_loss-1.png", "train_loss.png"]


def test_a_run_whose_output_is_a_log_reports_its_progress(tmp_path, caplog, monkeypatch):
    """Output that is not a terminal (nohup, a batch job) gets a line every
    ``progress_seconds`` (60; here every step): step, loss, rate, elapsed, time left."""
    import logging

    from DLStudio.training import trainer as training
    monkeypatch.setattr(training, "terminal", lambda: False)
    t = run_in(tmp_path / "ck", epochs=3, max_steps=5)
    t.progress_seconds = 0
    with caplog.at_level(logging.INFO, logger="DLStudio.training.trainer"):
        t.run()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert [int(line.split()[1]) for line in lines] == [1, 2, 3, 4, 5]
    assert all("loss" in line and "lr" in line and "elapsed" in line for line in lines)
    assert lines[-1].endswith("about 0 s left")           # max_steps 5: the end is now
    monkeypatch.setattr(training, "terminal", lambda: True)     # a terminal: the bar only
    caplog.clear()
    t = run_in(tmp_path / "ck2", epochs=1, max_steps=3)
    t.progress_seconds = 0
    with caplog.at_level(logging.INFO, logger="DLStudio.training.trainer"):
        t.run()
    assert not [r for r in caplog.records if r.getMessage().startswith("step ")]
