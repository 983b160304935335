"""The format a grader's questions and a student's answers cross the pipe in: plain data,
written and read here, never unpickled.

A value is a tag byte and what the tag says follows (numbers little-endian):

    N  T  F                         None, True, False
    i  <8-byte int>                 an int of at most 64 bits
    f  <8-byte float>               a float
    s  <4-byte length> <UTF-8>      a string
    l  t  <4-byte count> <values>   a list, a tuple
    d  <4-byte count> <key, value>  a dict (keys: strings, ints, bools)
    x  <dtype> <ndim> <8-byte size>... <raw bytes>      a dense tensor of numbers or bools

`loads` reads every length and count before what it announces, and refuses it when fewer
bytes are left than it needs; with ``budgets`` it also counts what it builds (values,
characters of strings, bytes of tensors), so that the copy the grader computes with is
bounded by what it holds, not by how small the message was. A dict's int keys stay below
2**61 - 1, where no two ints hash alike (keys built to collide would make the dict's
construction quadratic). A tensor comes back as a fresh torch.Tensor: nothing of the
sender's object but its numbers.
"""

import struct

import torch

__all__ = ["dumps", "loads", "Budgets", "DTYPES"]

#: The dtypes a tensor may cross in, by their code on the wire.
DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64)
_CODE = {dtype: code for code, dtype in enumerate(DTYPES)}
_INT, _FLOAT, _LENGTH = struct.Struct("<q"), struct.Struct("<d"), struct.Struct("<I")
_KEY_LIMIT = 2 ** 61 - 1                  # |k| below it: no two int keys hash alike
_DEPTH = 60
_NDIM, _DIM = 16, 2 ** 40


def dumps(value, limit=None):
    """``value`` (plain data: see checking.plain) as bytes; ValueError for anything else, or
    once they would pass ``limit`` bytes."""
    out = _Out(limit)
    _dump(value, out, 0)
    return b"".join(out)


class _Out(list):
    def __init__(self, limit):
        super().__init__()
        self.size, self.limit = 0, limit

    def append(self, chunk):
        self.size += len(chunk)
        if self.limit is not None and self.size > self.limit:
            raise ValueError(f"more than {self.limit:,} bytes")
        super().append(chunk)


def _dump(v, out, depth):
    if depth > _DEPTH:
        raise ValueError(f"nested more than {_DEPTH} deep")
    if v is None or v is True or v is False:
        out.append({None: b"N", True: b"T", False: b"F"}[v])
    elif type(v) is int:
        if not -2 ** 63 <= v < 2 ** 63:
            _dump({"__opaque__": "an int of more than 64 bits"}, out, depth)
        else:
            out.append(b"i" + _INT.pack(v))
    elif type(v) is float:
        out.append(b"f" + _FLOAT.pack(v))
    elif type(v) is str:
        data = v.encode("utf-8", "surrogatepass")
        out.append(b"s" + _LENGTH.pack(len(data)) + data)
    elif type(v) in (list, tuple):
        out.append((b"l" if type(v) is list else b"t") + _LENGTH.pack(len(v)))
        for x in v:
            _dump(x, out, depth + 1)
    elif type(v) is dict:
        out.append(b"d" + _LENGTH.pack(len(v)))
        for k, x in v.items():
            _dump(k, out, depth + 1)
            _dump(x, out, depth + 1)
    elif type(v) is torch.Tensor and v.layout == torch.strided and v.dtype in _CODE:
        v = v.detach().cpu().contiguous()
        out.append(b"x" + bytes((_CODE[v.dtype], v.dim())) + b"".join(
            _INT.pack(n) for n in v.shape))
        if out.limit is not None and out.size + v.numel() * v.element_size() > out.limit:
            raise ValueError(f"more than {out.limit:,} bytes")
        out.append(v.reshape(-1).view(torch.uint8).numpy().tobytes() if v.numel() else b"")
    else:
        raise ValueError(f"a {type(v).__name__} is no plain data")


class Budgets:
    """What one read may build: ``values`` in all, strings cut to ``string_limit``
    characters and ``characters`` of them in all, ``tensor_bytes`` of tensors."""

    def __init__(self, values, string_limit, characters, tensor_bytes):
        self.limits = {"values": values, "characters": characters, "bytes": tensor_bytes}
        self.left = dict(self.limits)
        self.string_limit = string_limit

    def spend(self, what, n):
        self.left[what] -= n
        if self.left[what] < 0:
            raise ValueError(f"an answer of more than {self.limits[what]:,} {what} in all "
                             "(each reference counted)")


def loads(data, budgets=None):
    """The value ``data`` holds (see the module's doc); ValueError saying what was wrong
    with it, or which of ``budgets`` it went over."""
    reader = _Reader(memoryview(data), budgets)
    value = reader.value(0)
    if reader.pos != len(data):
        raise ValueError(f"{len(data) - reader.pos:,} bytes after the value")
    return value


class _Reader:
    def __init__(self, data, budgets):
        self.data, self.pos, self.budgets = data, 0, budgets

    def take(self, n, what):
        if n > len(self.data) - self.pos:
            raise ValueError(f"{what} of {n:,} bytes where {len(self.data) - self.pos:,} "
                             "are left")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def number(self, form, what):
        return form.unpack(self.take(form.size, what))[0]

    def count(self, what, least_each):
        n = self.number(_LENGTH, what)
        if n * least_each > len(self.data) - self.pos:      # (each item a byte at least)
            raise ValueError(f"{what} of {n:,} items where {len(self.data) - self.pos:,} "
                             "bytes are left")
        return n

    def value(self, depth):
        if depth > _DEPTH:
            raise ValueError(f"nested more than {_DEPTH} deep")
        if self.budgets is not None:
            self.budgets.spend("values", 1)
        tag = bytes(self.take(1, "a tag"))
        if tag in (b"N", b"T", b"F"):
            return {b"N": None, b"T": True, b"F": False}[tag]
        if tag == b"i":
            return self.number(_INT, "an int")
        if tag == b"f":
            return self.number(_FLOAT, "a float")
        if tag == b"s":
            return self.string()
        if tag in (b"l", b"t"):
            items = [self.value(depth + 1) for _ in range(self.count("a list", 1))]
            return items if tag == b"l" else tuple(items)
        if tag == b"d":
            return self.mapping(depth)
        if tag == b"x":
            return self.tensor()
        raise ValueError(f"an unknown tag {tag!r}")

    def string(self):
        n = self.number(_LENGTH, "a string's length")
        raw = self.take(n, "a string")
        if self.budgets is None:
            return self.decoded(raw)
        limit = self.budgets.string_limit
        text = self.decoded(raw) if n <= 4 * limit else \
            bytes(raw[:4 * limit]).decode("utf-8", "replace")
        kept = text if len(text) <= limit else text[:limit] + "..."
        self.budgets.spend("characters", len(kept))
        return kept

    @staticmethod
    def decoded(raw):
        try:
            return bytes(raw).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise ValueError("a string that is not UTF-8") from None

    def mapping(self, depth):
        found = {}
        for _ in range(self.count("a dict", 2)):
            key = self.value(depth + 1)
            if not isinstance(key, (str, int)) or \
                    isinstance(key, int) and not -_KEY_LIMIT < key < _KEY_LIMIT:
                raise ValueError(f"a dict key {str(key)[:40]!r}: keys are strings, or ints "
                                 "below 2**61 - 1")
            found[key] = self.value(depth + 1)
        return found

    def tensor(self):
        code, ndim = bytes(self.take(2, "a tensor's dtype"))
        if code >= len(DTYPES) or ndim > _NDIM:
            raise ValueError(f"a tensor of dtype code {code} and {ndim} dimensions")
        shape = [self.number(_INT, "a tensor's size") for _ in range(ndim)]
        if any(not 0 <= n < _DIM for n in shape):
            raise ValueError(f"a tensor of shape {shape}")
        dtype, numel = DTYPES[code], 1
        for n in shape:
            numel *= n
        size = numel * torch.empty((), dtype=dtype).element_size()
        if self.budgets is not None:
            self.budgets.spend("bytes", size)
        raw = self.take(size, "a tensor")                  # (checked before it is copied)
        if not numel:
            return torch.empty(shape, dtype=dtype)
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        if dtype is torch.bool:
            return (flat != 0).reshape(shape)
        return flat.view(dtype).reshape(shape)
