"""Training on several processes: PyTorch's own engine, ``torchrun`` and
DistributedDataParallel (DDP), as fairseq, nanoGPT and the PyTorch examples use it.

    torchrun --standalone --nproc_per_node=2 seq2seq_with_transformerFG.py --batch-size 64

torchrun starts one process per rank and tells each, through environment variables (RANK,
LOCAL_RANK, WORLD_SIZE), where it stands. `join_torchrun`, called when a `DLStudio` is
built, joins the process group (gloo on the CPU, NCCL on CUDA, one GPU per process) and
returns a `World`. Without torchrun the world is one process, and nothing here runs.

How the trainer uses it (DLStudio.training):
  - every rank builds the same global batches (same seed) and trains on its own share of
    each (`World.share`): ``--batch-size`` is the global batch;
  - the loss is the sum over a rank's tokens divided by the global token count, so that
    DDP's mean of the ranks' gradients is the gradient of one process on the whole batch;
  - decisions are agreed: the loss (for NaN), Ctrl-C and time limits (`World.any`), so that
    all ranks stop at the same step and none waits forever;
  - rank 0 alone writes checkpoints, logs and shows the progress bar.
"""

import datetime
import os

import torch
import torch.distributed as dist

__all__ = ["World", "ONE_PROCESS", "join_torchrun", "launched_by_torchrun", "rank_from_env",
           "DistributedError", "single_process_only", "lost_a_peer"]


class DistributedError(RuntimeError):
    """A setting that makes no sense under torchrun; the message says what to do."""


def launched_by_torchrun():
    """True in a process that torchrun (or another launcher that sets RANK and WORLD_SIZE)
    started as one of several."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ


def rank_from_env():
    """This process's rank as the launcher set it (0 without torchrun); readable before the
    process group exists, so that scripts print on rank 0 only from their first line."""
    return int(os.environ.get("RANK", "0")) if launched_by_torchrun() else 0


class World:
    """Where this process stands among the processes that train together.

    Attributes: rank (0 .. size - 1), size (the number of processes), is_main (rank 0: the
    one that writes checkpoints and logs), distributed (size > 1).
    """

    def __init__(self, rank=0, size=1):
        self.rank, self.size = rank, size

    @property
    def is_main(self):
        return self.rank == 0

    @property
    def distributed(self):
        return self.size > 1

    def share(self, batch):
        """This rank's share of a global batch (a tensor of example indices): the ranks'
        shares are consecutive and together the whole batch."""
        return batch.tensor_split(self.size)[self.rank]

    def sum(self, tensor):
        """The sum over the ranks, on every rank (the tensor itself in one process)."""
        if self.distributed:
            tensor = tensor.clone()
            dist.all_reduce(tensor)
        return tensor

    def any(self, flags, device):
        """For each of ``flags``, True on every rank when it is true on one of them (one
        all-reduce for all)."""
        mine = torch.tensor([int(bool(f)) for f in flags], device=device)
        return [bool(n) for n in self.sum(mine).tolist()]

    def on_main(self, fn, *args):
        """``fn(*args)`` on rank 0 only; every rank returns its result or raises its error
        (so that a refusal or a failure stops all ranks, not rank 0 alone, and none is left
        waiting for it). On the other ranks the error is marked ``from_rank_0``: rank 0
        says it, and they stop without saying it again."""
        result, error = None, None
        if self.is_main:
            try:
                result = fn(*args)
            except Exception as e:              # handed to every rank, raised there
                error = e
        if self.distributed:
            box = [(result, error)]
            dist.broadcast_object_list(box, src=0)
            result, error = box[0]
        if error is not None:
            if not self.is_main:
                error.from_rank_0 = True
            raise error
        return result

    def gather(self, obj):
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.distributed:
            return [obj]
        found = [None] * self.size
        dist.all_gather_object(found, obj)
        return found

    def barrier(self):
        if self.distributed:
            dist.barrier()

    def __repr__(self):
        return f"World(rank={self.rank}, size={self.size})"


ONE_PROCESS = World()


def join_torchrun(device):
    """Join torchrun's process group (once per process) and return (World, device): the
    device becomes this rank's GPU (``cuda:LOCAL_RANK``) on CUDA. Without torchrun:
    (ONE_PROCESS, device) unchanged."""
    if not launched_by_torchrun():
        return ONE_PROCESS, device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "mps":
        raise DistributedError("Apple's MPS has no distributed backend: under torchrun, train "
                               "on the CPU (--cpu), or run the script without torchrun")
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise DistributedError(
                f"torchrun started process {local_rank} on this node, which has "
                f"{torch.cuda.device_count()} GPU(s): one process per GPU, so use "
                f"--nproc_per_node={torch.cuda.device_count()} (or --cpu to train on the CPU)")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
    elif dist.get_backend() != backend:
        raise DistributedError(f"the process group runs {dist.get_backend()}, but this model "
                               f"trains on {device}: one device kind per run")
    return World(dist.get_rank(), dist.get_world_size()), device


def lost_a_peer(error):
    """Is ``error`` what a collective raises on one rank when another rank's process has
    ended (it failed: its own message says why)? gloo: "Connection closed by peer"."""
    text = str(error)
    return isinstance(error, RuntimeError) and dist.is_available() and dist.is_initialized() \
        and ("Connection closed by peer" in text or "Connection reset by peer" in text
             or type(error).__name__ == "DistBackendError")


def leave():
    """Leave the process group (at the end of a script run by torchrun)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def single_process_only(script):
    """For the scripts that train and compare several models in one run: refuse torchrun
    with a message, rather than train every model distributed and print every table twice."""
    if launched_by_torchrun():
        raise DistributedError(
            f"{script} trains and compares several models in one process; run it with "
            "python3, not torchrun (torchrun is for seq2seq_with_transformerFG.py, "
            "seq2seq_with_transformerPreLN.py, train_gpt.py, "
            "image_recog_with_visTransformer.py and finetune_lm.py --fsdp)")
