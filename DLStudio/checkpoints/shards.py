"""A checkpoint whose weights and optimiser state are a folder of shards (training/sharded.py:
fine-tuning under FSDP), read whole by one process: checkpoint_3.pt, the trainer's file,
names checkpoint_3.shards/, written by ``torch.distributed.checkpoint``."""

import os
import tempfile

import torch

__all__ = ["shards_folder", "read_whole"]


def shards_folder(path):
    """The shards' folder of the checkpoint file ``path``: checkpoint_3.pt -> checkpoint_3.shards"""
    return os.path.splitext(path)[0] + ".shards"


def read_whole(folder):
    """{"model": {name: tensor}, "optimizer": {...}} of a shards folder, whole, in this one
    process (DCP's own conversion to a torch.save file, read back)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    with tempfile.TemporaryDirectory() as tmp:
        whole = os.path.join(tmp, "whole.pt")
        dcp_to_torch_save(folder, whole)
        return torch.load(whole, map_location="cpu", weights_only=True)
