"""Fine-tuning sharded with FSDP2 under torchrun (training/sharded.py), on the CPU (gloo, 2
processes), against the same fine-tuning in one process: the same losses step by step, the
same weights at the end; a sharded checkpoint (its shards written by both ranks) read whole
by one process, and resumed by one process (another world size) to the same end as the
run that was never stopped. LoRA and every weight (--full)."""

import os

import pytest
import torch

from DLStudio.checkpoints import load_checkpoint

from .close import assert_close
from .conftest import ROOT
from .test_distributed import newest, run
from .test_finetune import CHATS, our_folder, write_rows

FINETUNE = os.path.join(ROOT, "ExamplesTransformers", "finetune_lm.py")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["lora", "full"])
def test_two_ranks_under_fsdp_fine_tune_as_one_process_and_one_resumes_them(tmp_path, how):
    folder = our_folder(tmp_path)
    data = write_rows(tmp_path / "chat.jsonl", CHATS)
    common = [folder, "--data", data, "--batch-size", 4, "--learning-rate", 1e-2,
              "--held-out", 0, "--epochs", 3] + (["--full"] if how == "full"
                                                 else ["--lora-rank", 4])
    run(FINETUNE, common + ["--max-steps", 4, "--checkpoints-dir", "one"], tmp_path)
    out = run(FINETUNE, common + ["--max-steps", 4, "--checkpoints-dir", "two", "--fsdp",
                                  "--out", "tuned", "--merge"], tmp_path, nproc=2)
    one, two = load_checkpoint(newest(tmp_path / "one")), load_checkpoint(newest(tmp_path /
                                                                               "two"))
    assert two["shards"] and os.path.isdir(os.path.join(tmp_path, "two", two["shards"]))
    assert len(os.listdir(os.path.join(tmp_path, "two", two["shards"]))) >= 3  # 2 shards
    assert two["step"] == one["step"] == 4
    assert_close(torch.tensor(two["train_losses"]), torch.tensor(one["train_losses"]),
                 rel=1e-4, what="the losses")
    names = sorted(one["model"])
    assert sorted(two["model"]) == names                   # LoRA: A and B alone
    assert (how == "lora") == all(".A" in n or ".B" in n for n in names)
    for name in names:
        assert_close(two["model"][name].float(), one["model"][name].float(), rel=1e-3,
                     what=name)
    assert out.stdout.count("learning rate") == 1              # rank 0 alone prints
    # --out: the shards handed to rank 0, which writes what one process writes
    from DLStudio.Transformers import TransformerGPT
    merged = TransformerGPT.from_huggingface(str(tmp_path / "tuned" / "merged"))
    base = TransformerGPT.from_huggingface(folder)
    ids = torch.tensor([base.encode("user: the house")])
    with torch.no_grad():
        assert (merged(ids) - base(ids)).abs().max() > 1e-3       # it learnt
    if how == "lora":
        adapted = TransformerGPT.from_huggingface(folder, adapter=str(tmp_path / "tuned" /
                                                                      "adapter"))
        with torch.no_grad():
            assert_close(adapted(ids), merged(ids), what="the adapter and the merged model")

    run(FINETUNE, common + ["--max-steps", 2, "--checkpoints-dir", "mixed", "--fsdp"],
        tmp_path, nproc=2)
    run(FINETUNE, common + ["--max-steps", 4, "--checkpoints-dir", "mixed", "--resume"],
        tmp_path)
    mixed = load_checkpoint(newest(tmp_path / "mixed"))
    assert mixed["step"] == 4 and not mixed.get("shards")
    assert_close(torch.tensor(mixed["train_losses"]), torch.tensor(one["train_losses"]),
                 rel=1e-4, what="the losses of the resumed run")
    for name in names:
        assert_close(mixed["model"][name].float(), one["model"][name].float(), rel=1e-3,
                     what=name)


@pytest.mark.slow
def test_torchrun_without_fsdp_is_refused_in_one_line(tmp_path):
    folder = our_folder(tmp_path)
    data = write_rows(tmp_path / "chat.jsonl", CHATS)
    out = run(FINETUNE, [folder, "--data", data, "--max-steps", 1], tmp_path, nproc=2,
              check=False)
    assert out.returncode != 0 and "give --fsdp" in " ".join(out.stderr.split())
    assert os.path.join(ROOT, "DLStudio") not in out.stderr         # no traceback of ours
