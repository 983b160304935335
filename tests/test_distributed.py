"""Training under torchrun: DistributedDataParallel on the CPU (gloo, 2 processes).

Each test runs the example scripts as a student would (``torchrun --standalone
--nproc_per_node=2 seq2seq_with_transformerFG.py ...``) and checks the result against the
same script in one process: two ranks with a global batch of 2b sentences (b each) must end
with the weights of one process with batch 2b, and their checkpoint must resume in one
process. The NCCL test needs two GPUs and skips without them.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from DLStudio.checkpoints import checkpoint_files, load_checkpoint

from .close import assert_close, close
from .conftest import ROOT

ARCHIVE = os.path.join(ROOT, "datasets", "en_es_synthetic_8_20000.tar.gz")
FG = os.path.join(ROOT, "ExamplesTransformers", "seq2seq_with_transformerFG.py")
GPT = os.path.join(ROOT, "ExamplesTransformers", "train_gpt.py")
BERT = os.path.join(ROOT, "ExamplesTransformers", "pretrain_bert.py")
VIT = os.path.join(ROOT, "ExamplesTransformers", "image_recog_with_visTransformer.py")
COMPARE = os.path.join(ROOT, "ExamplesTransformers", "compare_fg_preln.py")
TINY_FG = ["--archive", ARCHIVE, "--embedding-size", "32", "--num-layers", "1",
           "--num-atten-heads", "2", "--num-warmup-steps", "10", "--no-eval"]
TINY_GPT = ["--archive", ARCHIVE, "--embedding-size", "32", "--num-layers", "1",
            "--num-atten-heads", "2", "--tokenizer", "word", "--epochs", "1"]


def run(script, args, cwd, nproc=None, check=True, cpu=True):
    """``python3 script args``, or under ``torchrun --standalone --nproc_per_node=nproc``."""
    launcher = [sys.executable] if nproc is None else [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc_per_node={nproc}"]
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    out = subprocess.run(launcher + [script, *map(str, args)] + ["--cpu"] * cpu, cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=300)
    if check:
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def weights(path):
    """The checkpoint's numbers, flattened to {name: tensor}."""
    def flat(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from flat(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v
    return dict(flat(load_checkpoint(path)["model"]))


def assert_same_weights(a, b, rel=1e-4):
    """Equal within float tolerance, except W_K's bias: its gradient is zero in exact
    arithmetic (adding a constant to every score of a row leaves the softmax unchanged), so
    Adam, which divides by the gradient's size, turns two summation orders' rounding noise
    into different steps. It changes no output."""
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    compared = [k for k in wa if not k.endswith("WK.bias")]
    assert len(compared) > 0.8 * len(wa)
    worst = max(compared, key=lambda k: (wa[k].float() - wb[k].float()).abs().max())
    assert_close(wa[worst].float(), wb[worst].float(), rel=rel, what=worst)    # of the scale


def newest(folder):
    return checkpoint_files(str(folder))[-1]


@pytest.mark.slow
def test_two_ranks_train_as_one_process_with_their_global_batch(tmp_path):
    """--batch-size 16 on 2 ranks (8 sentences each) = --batch-size 16 in one process, for 6
    steps; and the 2-rank checkpoint resumes in one process (to step 10), ending where the
    one-process run resumed to step 10 ends."""
    steps = ["--batch-size", 16, "--max-steps", 6]
    run(FG, TINY_FG + steps + ["--checkpoints-dir", "two"], tmp_path, nproc=2)
    run(FG, TINY_FG + steps + ["--checkpoints-dir", "one"], tmp_path)
    two, one = newest(tmp_path / "two"), newest(tmp_path / "one")
    p2, p1 = load_checkpoint(two), load_checkpoint(one)
    assert p2["step"] == p1["step"] == 6
    assert_close(torch.tensor(p2["train_losses"]), torch.tensor(p1["train_losses"]))
    assert_same_weights(two, one)
    assert len(p2["rng_by_rank"]) == 2 and len(p1["rng_by_rank"]) == 1

    more = ["--batch-size", 16, "--max-steps", 10, "--resume"]
    run(FG, TINY_FG + more + ["--checkpoints-dir", "two"], tmp_path)        # one process now
    run(FG, TINY_FG + more + ["--checkpoints-dir", "one"], tmp_path)
    two, one = newest(tmp_path / "two"), newest(tmp_path / "one")
    assert load_checkpoint(two)["step"] == 10
    assert_same_weights(two, one)


@pytest.mark.slow
def test_a_budget_and_an_average_on_two_ranks(tmp_path):
    """--schedule budget --ema on 2 ranks = in one process (steps); a time budget's estimate
    is rank 0's on every rank, and the run ends on it."""
    steps = ["--batch-size", 16, "--max-steps", 6, "--schedule", "budget", "--ema", "0.9",
             "--num-warmup-steps", 2, "--lr-mul", 0.1]     # a short warm-up's peak, lowered
    run(FG, TINY_FG + steps + ["--checkpoints-dir", "two"], tmp_path, nproc=2)
    run(FG, TINY_FG + steps + ["--checkpoints-dir", "one"], tmp_path)
    two, one = load_checkpoint(newest(tmp_path / "two")), load_checkpoint(newest(tmp_path / "one"))
    assert two["optimizer"]["optimizer"]["param_groups"][0]["lr"] == 0.0 == \
        one["optimizer"]["optimizer"]["param_groups"][0]["lr"]
    assert_same_weights(newest(tmp_path / "two"), newest(tmp_path / "one"))
    for name, part in one["average"]["model"].items():
        for key, value in part.items():
            assert key.endswith("WK.bias") or close(
                value.float(), two["average"]["model"][name][key].float(), rel=1e-4), (name, key)
    timed = ["--batch-size", 16, "--epochs", 100, "--schedule", "budget", "--max-minutes",
             "0.1", "--checkpoints-dir", "timed"]
    run(FG, TINY_FG + timed, tmp_path, nproc=2)
    payload = load_checkpoint(newest(tmp_path / "timed"))
    assert payload["optimizer"]["total_steps"] == payload["step"] > 10
    # the last step is the one estimated to end within the 6 s: up to a step short of them
    assert 5.5 <= payload["train_seconds"] < 9


@pytest.mark.slow
def test_the_gpt_trains_the_same_on_two_ranks(tmp_path):
    steps = ["--batch-size", 12, "--max-steps", 5]
    run(GPT, TINY_GPT + steps + ["--checkpoints-dir", "two"], tmp_path, nproc=2)
    run(GPT, TINY_GPT + steps + ["--checkpoints-dir", "one"], tmp_path)
    assert_same_weights(newest(tmp_path / "two"), newest(tmp_path / "one"))


@pytest.mark.slow
def test_bert_pre_trains_the_same_on_two_ranks(tmp_path):
    """Its masks are drawn for the global batch, so the ranks' shares are masked as one
    process masks the whole batch; the heads it does not train rest (DDP would wait)."""
    args = ["--archive", ARCHIVE, "--embedding-size", "32", "--num-layers", "1",
            "--num-atten-heads", "2", "--tokenizer", "word", "--batch-size", 12,
            "--max-steps", 5, "--dropout", 0]
    run(BERT, args + ["--checkpoints-dir", "two"], tmp_path, nproc=2)
    run(BERT, args + ["--checkpoints-dir", "one"], tmp_path)
    assert_same_weights(newest(tmp_path / "two"), newest(tmp_path / "one"))


@pytest.mark.slow
def test_vistransformer_trains_on_two_ranks_and_rank_0_alone_reports(tmp_path):
    args = ["--num-train", 96, "--num-test", 32, "--embedding-size", 16, "--num-layers", 1,
            "--epochs", 2, "--batch-size", 15, "--checkpoint-freq", 1, "--checkpoints-dir",
            "vit"]
    out = run(VIT, args, tmp_path, nproc=2)
    assert out.stdout.count("held-out accuracy") == 1
    # 96 images in global batches of 15: 6 of 15 and one of 6, each split 8 + 7 or 3 + 3
    payload = load_checkpoint(newest(tmp_path / "vit"))
    assert payload["epoch"] == 1 and payload["step"] == 14


@pytest.mark.slow
def test_ctrl_c_under_torchrun_stops_every_rank_at_one_step_with_a_checkpoint(tmp_path):
    """SIGINT to torchrun (what a terminal's Ctrl-C does): both ranks finish the same step,
    rank 0 writes a partial checkpoint, and the run resumes from it."""
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    args = TINY_FG + ["--batch-size", 64, "--checkpoint-freq", 1, "--epochs", 50,
                      "--checkpoints-dir", "ck", "--cpu"]
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                             "--nproc_per_node=2", FG, *map(str, args)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not os.path.exists(tmp_path / "ck" / "checkpoint_0.pt"):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0
    assert "training interrupted by SIGINT" in output, output[-3000:]
    partial = tmp_path / "ck" / "checkpoint_1_partial.pt"
    assert partial.exists(), output[-3000:]
    payload = load_checkpoint(str(partial))
    assert payload["step"] > load_checkpoint(str(tmp_path / "ck" / "checkpoint_0.pt"))["step"]
    resumed = run(FG, TINY_FG + ["--batch-size", 64, "--checkpoint-freq", 1, "--epochs", 2,
                                 "--checkpoints-dir", "ck", "--resume"], tmp_path)
    assert f"step {payload['step']}" in resumed.stdout + resumed.stderr


@pytest.mark.slow
def test_flags_that_make_no_sense_distributed_are_refused_in_one_line(tmp_path):
    out = run(FG, TINY_FG + ["--batch-size", 1, "--max-steps", 2, "--checkpoints-dir", "x"],
              tmp_path, nproc=2, check=False)
    assert out.returncode != 0
    assert "is the global batch, split across 2 processes" in out.stderr
    assert os.path.join(ROOT, "DLStudio") not in out.stderr        # no traceback of ours
    out = run(COMPARE, ["--minutes", 0.01], tmp_path, nproc=2, check=False, cpu=False)
    assert out.returncode != 0 and "run it with python3, not torchrun" in " ".join(
        out.stderr.split())


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs two GPUs")
def test_two_gpus_with_nccl_train_as_one_gpu(tmp_path):
    steps = ["--batch-size", 16, "--max-steps", 6]
    for nproc, folder in ((2, "two"), (None, "one")):
        launcher = [] if nproc is None else ["-m", "torch.distributed.run", "--standalone",
                                             f"--nproc_per_node={nproc}"]
        out = subprocess.run([sys.executable, *launcher, FG, *map(str, TINY_FG + steps),
                              "--checkpoints-dir", folder], cwd=tmp_path, capture_output=True,
                             text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
    assert_same_weights(newest(tmp_path / "two"), newest(tmp_path / "one"), rel=1e-3)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_rank_that_fails_ends_every_rank_within_seconds(tmp_path):
    """Two processes started by hand, as a cluster's srun starts them (no torchrun agent to
    end the others): rank 0 cannot write its checkpoint (the file's name is a folder that
    holds a file), and every rank ends within seconds, the reason said once."""
    blocked = tmp_path / "ck" / "checkpoint_0_partial.pt"        # where step 3's goes
    blocked.mkdir(parents=True)
    (blocked / "notes.txt").write_text("mine")
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg", OMP_NUM_THREADS="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE="2")
        procs.append(subprocess.Popen(
            [sys.executable, FG, *TINY_FG, "--batch-size", "16", "--max-steps", "3",
             "--checkpoints-dir", "ck", "--cpu"], cwd=tmp_path, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    start, outs = time.monotonic(), []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=120))
    finally:
        for p in procs:
            p.kill()
    took = time.monotonic() - start
    assert [p.returncode for p in procs] == [1, 1], outs
    err = "".join(e for _, e in outs)
    assert "Traceback" not in err, err[-3000:]
    assert err.count("checkpoint_0_partial.pt") == 1, err          # the reason, said once
    assert took < 90
    assert (blocked / "notes.txt").read_text() == "mine"
