"""The core every family's reader shares: a folder's weights read one tensor at a time
(`FolderWeights`: safetensors, their shards, or pytorch_model.bin), Hugging Face's rotary
layout turned into ours (`pairs_from_halves`, and back), one matrix cut into our heads'
(`heads_of`), and the placing of (name, tensor) pairs into our model (`place`)."""

import json
import os

import torch

from ...data.hub_tokenizer import FolderError, read_json

__all__ = ["FolderWeights", "hf_weights", "safetensors_header", "read_tensor",
           "pairs_from_halves", "halves_from_pairs", "heads_of", "place"]


class FolderWeights:
    """A folder's weights by Hugging Face's names, each read from its file only when it is
    taken (`pop`), so that reading a model holds our model and one of its tensors at a time,
    not a second copy of the whole: model.safetensors, its shards
    (model.safetensors.index.json), or pytorch_model.bin (tensors only: no code runs;
    memory-mapped)."""

    def __init__(self, path):
        self.path, self.files, self.where = path, {}, {}
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.isfile(index):
            shards = read_json(path, "model.safetensors.index.json")["weight_map"].values()
        elif os.path.isfile(os.path.join(path, "model.safetensors")):
            shards = ["model.safetensors"]
        elif os.path.isfile(os.path.join(path, "pytorch_model.bin")):
            file = os.path.join(path, "pytorch_model.bin")
            try:
                self.loaded = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:                         # an old file, not a zip: read whole
                self.loaded = torch.load(file, map_location="cpu", weights_only=True)
            self.where = {name: (None, name) for name in self.loaded}
            return
        else:
            raise FolderError(f"{path} holds no weights: model.safetensors, its shards "
                              "(model.safetensors.index.json) or pytorch_model.bin")
        for shard in sorted(set(shards)):
            self.files[shard] = header = safetensors_header(
                os.path.join(path, os.path.basename(shard)))
            self.where.update({name: (shard, name) for name in header
                               if name not in ("__metadata__", "__start__")})

    def renamed(self, prefix):
        """The same weights, ``prefix`` taken off their names."""
        self.where = {k.removeprefix(prefix): v for k, v in self.where.items()}
        return self

    def pop(self, name, *default):
        if name not in self.where:
            if default:
                return default[0]
            raise FolderError(f"{self.path} has no weight {name}")
        shard, original = self.where.pop(name)             # (its file, its name there)
        if shard is None:
            return self.loaded.pop(original)
        return read_tensor(os.path.join(self.path, os.path.basename(shard)),
                           self.files[shard], original)

    def peek(self, name):
        """The weight ``name`` (None where the folder has none), left to be taken later."""
        if name not in self.where:
            return None
        shard, original = self.where[name]
        if shard is None:
            return self.loaded[original]
        return read_tensor(os.path.join(self.path, os.path.basename(shard)),
                           self.files[shard], original)

    def left(self):
        return sorted(self.where)

    def __contains__(self, name):
        return name in self.where


#: safetensors' names of the tensor types a model folder holds.
SAFETENSORS_TYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                     "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
                     "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                     "BOOL": torch.bool}


def safetensors_header(file):
    """A .safetensors file's table of contents: {name: {"dtype", "shape", "data_offsets"}}
    (an 8-byte little-endian length, then that much JSON; the tensors follow)."""
    with open(file, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 0 < size <= min(100 << 20, os.path.getsize(file) - 8):
            raise FolderError(f"{file} is not a safetensors file (its header says {size} "
                              "bytes)")
        header = json.loads(f.read(size))
    header["__start__"] = 8 + size
    return header


def read_tensor(file, header, name):
    """One tensor of a .safetensors file, read alone (no memory map: the whole file is
    never held, so reading a model costs our model plus its largest tensor)."""
    entry, start = header[name], header["__start__"]
    begin, end = entry["data_offsets"]
    with open(file, "rb") as f:
        f.seek(start + begin)
        data = bytearray(f.read(end - begin))
    dtype = SAFETENSORS_TYPES.get(entry["dtype"])
    if dtype is None:
        raise FolderError(f"{file}: {name} is of type {entry['dtype']}, which we do not read")
    return torch.frombuffer(data, dtype=dtype).reshape(entry["shape"]) if data else \
        torch.empty(entry["shape"], dtype=dtype)


def hf_weights(path):
    """A folder's weights (`FolderWeights`), read as they are taken."""
    return FolderWeights(path)


def pairs_from_halves(W, heads):
    """Rows of W_Q or W_K (or their biases) from Hugging Face's halves layout to our pairs:
    in each head of d rows, our row 2i is its row i and our row 2i + 1 its row i + d/2.
    Shape: (heads d, ...) -> (heads d, ...)"""
    d = W.size(0) // heads
    order = torch.arange(d).view(2, d // 2).t().reshape(-1)        # 0, d/2, 1, d/2 + 1, ...
    return W.view(heads, d, *W.shape[1:])[:, order].reshape(W.shape)


def halves_from_pairs(W, heads):
    """The inverse of `pairs_from_halves` (for writing a folder)."""
    d = W.size(0) // heads
    order = torch.arange(d).view(2, d // 2).t().reshape(-1)
    return W.view(heads, d, *W.shape[1:])[:, torch.argsort(order)].reshape(W.shape)


def heads_of(prefix, name, W, heads, group=1):
    """Our per-head names for a (heads s, ...) matrix or bias: head g's rows go to head
    g * group (a key/value head is its group's first query head's W_K, W_V)."""
    kind = "weight" if W.dim() == 2 else "bias"
    s = W.size(0) // heads
    for g in range(heads):
        yield f"{prefix}heads.{g * group}.{name}.{kind}", W[g * s:(g + 1) * s]


def place(gpt, theirs, path):
    """Copy each (name, weight) of ``theirs`` into our parameter of that name; a bias the
    folder has none of is zero; any other parameter left without a weight is refused by
    name."""
    mine = gpt.state_dict()
    placed = set()
    with torch.no_grad():
        for name, tensor in theirs:
            if name not in mine or mine[name].shape != tensor.shape:
                raise FolderError(f"{path}: a weight of shape {tuple(tensor.shape)} does not "
                                  f"fit our {name} "
                                  f"{tuple(mine[name].shape) if name in mine else '(none)'}")
            mine[name].copy_(tensor)
            placed.add(mine[name].data_ptr())
        missing = []
        for name, tensor in mine.items():
            if tensor.data_ptr() in placed:
                continue
            if name.endswith(".bias"):
                tensor.zero_()
            else:
                missing.append(name)
            placed.add(tensor.data_ptr())
    if missing:
        raise FolderError(f"{path} has no weights for {', '.join(missing[:4])}")
