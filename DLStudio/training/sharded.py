"""Fine-tuning sharded across processes with PyTorch's own FSDP2 (``fully_shard``), and its
checkpoints with ``torch.distributed.checkpoint`` (DCP).

DistributedDataParallel keeps a whole copy of the model, its gradients and the optimiser's
state on every process; a model that does not fit one device does not train that way.
FSDP2 keeps 1 / world_size of each on each process: a layer's weights are gathered just
before the layer runs (forward and backward) and let go after it, and each process's
gradients are reduced to its shard, which its optimiser alone updates. The arithmetic is
DDP's: each rank's share of the global batch, the gradients averaged over the ranks.

    torchrun --standalone --nproc_per_node=2 finetune_lm.py FOLDER --data rows.jsonl --fsdp

A checkpoint is then a folder of shards beside the trainer's file (checkpoint_3.pt names
checkpoint_3.shards/): each process writes its own shard of the weights that learn (under
LoRA: A and B; with --full: every weight) and of the optimiser's state, so no process ever
holds the whole. It resumes on any number of processes (DCP lays the shards out anew), and
one process reads it whole (checkpoints/shards.py: load_checkpoint does it for every reader).
"""

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)

__all__ = ["shard", "save_shards", "load_shards", "whole_weights"]


def shard(model, optimizer, layers):
    """``fully_shard`` each of ``layers`` (a unit each: gathered one at a time), then the
    model (the rest: embeddings, final norm, output layer). The optimiser built before is
    given the sharded parameters, by name. The batched heads' one block of weights
    (batched_heads.py) is turned off: the weights are FSDP's to lay out."""
    from torch.distributed.fsdp import fully_shard
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    for layer in layers:
        fully_shard(layer)
    fully_shard(model)
    now = dict(model.named_parameters(remove_duplicate=False))
    inner = getattr(optimizer, "optimizer", optimizer)
    for group in inner.param_groups:
        group["params"] = [now[names[id(p)]] for p in group["params"]]
    for module in model.modules():
        if hasattr(module, "one_block"):
            module.one_block = False
    return model


def save_shards(model, optimizer, folder, learnt_only=False):
    """Every process writes its shard of the weights (``learnt_only``: those that learn)
    and of the optimiser's state into ``folder``."""
    weights, state = get_state_dict(model, getattr(optimizer, "optimizer", optimizer))
    if learnt_only:
        learnt = {n for n, p in model.named_parameters() if p.requires_grad}
        weights = {k: v for k, v in weights.items() if k in learnt}
    dcp.save({"model": weights, "optimizer": state}, checkpoint_id=folder)


def load_shards(model, optimizer, folder):
    """Each process reads its shards from ``folder`` (written by any number of processes;
    one process without torchrun reads all): the weights it holds, and the optimiser's
    state. Weights the folder does not hold (a LoRA run's frozen ones) stay as they are."""
    inner = getattr(optimizer, "optimizer", optimizer)
    weights, state = get_state_dict(model, inner)
    held = dcp.FileSystemReader(folder).read_metadata().state_dict_metadata
    weights = {k: v for k, v in weights.items() if f"model.{k}" in held}
    both = {"model": weights, "optimizer": state}
    dcp.load(both, checkpoint_id=folder)
    set_state_dict(model, inner, model_state_dict=both["model"],
                   optim_state_dict=both["optimizer"], options=StateDictOptions(strict=False))


def whole_weights(model):
    """The sharded model's weights, whole, on every process (a collective: every rank
    calls it), on the CPU."""
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                cpu_offload=True))
