"""The format answers cross the pipe in: plain data the grader reads within budgets, never a
pickle (a file's process can write any bytes it likes on its pipe)."""

import os
import pickle
import struct
import time

import pytest
import torch

from DLStudio.exercises.answering import answer_budgets, inspected, read_message
from DLStudio.exercises.wire import dumps, loads

from .test_grading import before, earned, graded_one


def test_plain_data_crosses_unchanged():
    value = {"value": [1, -2 ** 63, 2.5, float("nan"), None, True, "h\ud800i",
                       (torch.arange(6.).reshape(2, 3).double(), torch.tensor(True),
                        torch.zeros(0, 3), torch.ones(2, dtype=torch.bfloat16)),
                       {7: "a", "b": [()]}]}
    back = loads(dumps(value))
    got, want = back["value"], value["value"]
    assert got[:3] == want[:3] and got[3] != got[3] and got[4:7] == want[4:7]
    for a, b in zip(got[7], want[7]):
        assert type(a) is torch.Tensor and a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)
    assert got[8] == {7: "a", "b": [()]} and type(got[7]) is tuple


def int_keys(keys):
    """The wire's bytes of a dict of these int keys, each to None."""
    body = [b"d", struct.pack("<I", len(keys))]
    for k in keys:
        body += [b"i", struct.pack("<q", k), b"N"]
    return b"".join(body)


def test_no_two_int_keys_of_a_dict_hash_alike():
    """A pickle's dict of a million int keys that hash alike (multiples of 2**61 - 1) takes
    ~3.5 h to build; on the wire ints have 64 bits, and those that share a hash with a
    smaller one (from 2**61 - 1 on) are refused, so a dict builds in linear time."""
    for key in (2 ** 61 - 1, -(2 ** 61 - 1), 2 ** 62):
        with pytest.raises(ValueError, match="a dict key"):
            loads(int_keys([1, key]), answer_budgets())
    start = time.monotonic()
    keys = [k << 40 for k in range(90_000)]               # alike in their low bits
    assert len(loads(int_keys(keys), answer_budgets())) == 90_000
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("data, why", [
    (b"l" + struct.pack("<I", 2 ** 32 - 1), "items where 0 bytes are left"),
    (b"s" + struct.pack("<I", 2 ** 31), "bytes where 0 are left"),
    (b"x\x09\x02" + struct.pack("<qq", 2 ** 20, 2 ** 20), "more than .* bytes in all"),
    (b"x\x09\x01" + struct.pack("<q", -1), "a tensor of shape"),
    (b"x\x0c\x00", "dtype code 12"),
    (b"l" + struct.pack("<I", 1) + b"N" * 2, "1 bytes after the value"),
    (b"[" * 100 + b"]" * 100, "unknown tag"),
])
def test_a_length_is_read_before_what_it_announces(data, why):
    with pytest.raises(ValueError, match=why):
        loads(data, answer_budgets())


def test_many_tensors_on_the_wire_are_budgeted_by_their_bytes():
    # 16 MB listed 40 times: on the wire each copy is its own bytes, counted as read
    with pytest.raises(ValueError, match="more than .* bytes in all"):
        loads(dumps([torch.zeros(4 << 20)] * 17), answer_budgets())


def test_a_pickle_on_the_pipe_is_refused_and_never_run(tmp_path):
    """torch.save's bytes (a zip of pickles), or a pickle that would run a command: no
    message; nothing of it runs."""
    import io

    class Runs:
        def __reduce__(self):
            return (os.mkdir, (str(tmp_path / "ran"),))
    buffer = io.BytesIO()
    torch.save({"value": torch.zeros(3)}, buffer)
    for body in (buffer.getvalue(), pickle.dumps({"value": Runs()})):
        read, write = os.pipe()
        os.write(write, struct.pack(">Q", len(body)) + body)
        with pytest.raises(ValueError, match="unknown tag"):
            read_message(read, time.monotonic() + 10, budgets=answer_budgets())
        os.close(read)
        os.close(write)
    assert not (tmp_path / "ran").exists()


def test_the_grader_copies_nothing_of_a_tensor_but_its_numbers():
    t = torch.arange(4.)
    t.double = "shadowed"
    fresh = inspected({"value": t})["value"]
    assert type(fresh) is torch.Tensor and fresh.double().dtype == torch.float64


#: A file whose process answers every question with the bytes ``BODY`` (an expression).
WRITES = ("import os, struct\nimport DLStudio.exercises.answering as _a\n"
          "_write = _a.write_message\n"
          "def _sends(fd, message, *args):\n"
          "    if 'value' not in message:\n"
          "        return _write(fd, message, *args)\n"
          "    body = {body}\n"
          "    os.write(fd, struct.pack('>Q', len(body)))\n"
          "    view = memoryview(body)\n"
          "    while view:\n"
          "        view = view[os.write(fd, view):]\n"
          "_a.write_message = _sends\n")


@pytest.mark.slow
@pytest.mark.parametrize("body, why", [
    ("b'd' + struct.pack('<I', 2) + b'i' + struct.pack('<q', 1) + b'N' + b'i' + "
     "struct.pack('<q', 2 ** 61 - 1) + b'N'", "a dict key"),
    ("__import__('pickle').dumps({'value': 0})", "unknown tag"),
])
def test_an_answer_of_crafted_bytes_is_refused_within_seconds(tmp_path, body, why):
    start = time.monotonic()
    g = graded_one(tmp_path, before(WRITES.format(body=body)), timeout=30)
    assert time.monotonic() - start < 60 and earned(g) == 0
    assert why in g.results[0].message


def test_a_message_is_refused_by_its_length_before_any_of_it_is_read():
    read, write = os.pipe()
    os.write(write, struct.pack(">Q", 40 * 64 << 20))      # and nothing after it
    start = time.monotonic()
    with pytest.raises(ValueError, match="a message of 2,684,354,560 bytes"):
        read_message(read, time.monotonic() + 30, budgets=answer_budgets())
    assert time.monotonic() - start < 5
    os.close(read)
    os.close(write)


@pytest.mark.slow
def test_a_storage_listed_forty_times_is_an_answer_too_large(tmp_path):
    """64 MB of zeros listed 40 times (66 kB compressed in a pickle, 3.25 GB as the grader's
    copies): on the wire 2.5 GB, which the file's process refuses to send, saying so."""
    from .test_grading import SENDS
    g = graded_one(tmp_path, before(SENDS.format(value="[torch.zeros(16 << 20)] * 40")),
                   timeout=60)
    assert earned(g) == 0
    assert "your answer is too large to send to the grader" in g.results[0].message
