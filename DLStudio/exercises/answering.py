"""The process that answers a grader's questions about one student's file.

    python -c "...answering import main; main()" NAME FILE READ_FD WRITE_FD

It loads the file (the only place the student's code ever runs while grading), then answers
each question the grader sends on READ_FD: the question's name and its inputs, plain data.
The answer goes back on WRITE_FD as plain data too (tensors, numbers, strings, lists; see
checking.plain), or as the failure the student's code met, in one line. It decides nothing:
the grader compares every answer with the reference. Whatever the file prints goes to this
process's standard output, which the grader reads apart from the answers.

Messages on both pipes are a length (8 bytes, big-endian) and ``torch.save`` bytes, read with
``weights_only=True``: neither side ever unpickles an object of the other's.
"""

import io
import logging
import os
import select
import struct
import sys
import time

import torch

__all__ = ["write_message", "read_message", "inspected", "main", "MESSAGE_LIMIT"]

HEADER = struct.Struct(">Q")
#: The largest message either side reads (a question's inputs or an answer).
MESSAGE_LIMIT = 256 * 2 ** 20


def write_message(fd, message, deadline=None):
    """Send ``message`` on ``fd``; TimeoutError at ``deadline`` (time.monotonic()) when the
    other side stops reading (a child may shrink its pipe and never read: the grader's
    writes have a deadline, as its reads do)."""
    buffer = io.BytesIO()
    torch.save(message, buffer)
    data = memoryview(HEADER.pack(len(buffer.getbuffer())) + buffer.getvalue())
    if deadline is None:
        while data:
            data = data[os.write(fd, data):]
        return
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        while data:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([], [fd], [], wait)[1]:
                raise TimeoutError
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:          # room for less than a whole write: wait again
                continue
    finally:
        os.set_blocking(fd, blocking)


#: What the grader reads of an answer: at most this many values (an answer whose lists share
#: references is small on the wire and exponential as a tree), strings cut to this length,
#: tensors of these dtypes only.
NODE_BUDGET = 200_000
STRING_LIMIT = 4_000
#: What the copy of an answer may hold in all, each reference counted (a list of one string
#: or tensor listed 40,000 times is small on the wire and 40,000 copies in the grader):
#: characters of its strings, bytes of its tensors.
CHARACTER_BUDGET = 1_000_000
TENSOR_BYTES_BUDGET = 256 << 20
DTYPES = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64}


def inspected(value, budget=NODE_BUDGET, string_limit=STRING_LIMIT,
              characters=CHARACTER_BUDGET, tensor_bytes=TENSOR_BYTES_BUDGET):
    """A copy of the answer ``value`` as the grader may compute with it, read node by node
    within ``budget``: strings cut to ``string_limit``, ``characters`` of them in all; each
    tensor dense, of a real or bool dtype, and no larger than its storage (a stride-0 view
    of 10^15 elements held in a few bytes is refused before any arithmetic), ``tensor_bytes``
    of them in all, then copied into a fresh plain torch.Tensor (whatever attributes the
    student's tensor carried, a ``double`` that would shadow the method the grader calls,
    stay behind). The budgets count what the copy holds, every reference to one object
    again. ValueError says what was refused."""
    limits = {"values": budget, "characters": characters, "bytes": tensor_bytes}
    left = dict(limits)

    def spend(what, n):
        left[what] -= n
        if left[what] < 0:
            raise ValueError(f"an answer of more than {limits[what]:,} {what} in all "
                             "(each reference counted)")

    def walk(v, depth):
        left["values"] -= 1
        if left["values"] < 0 or depth > 60:
            raise ValueError(f"an answer of more than {budget:,} values, or nested more than "
                             "60 deep")
        if isinstance(v, torch.Tensor):
            if v.layout != torch.strided or v.dtype not in DTYPES:
                raise ValueError(f"a tensor of {v.dtype} ({v.layout}): answers are dense "
                                 "tensors of numbers")
            if v.numel() * v.element_size() > v.untyped_storage().nbytes():
                raise ValueError(f"a tensor of {v.numel():,} numbers held in "
                                 f"{v.untyped_storage().nbytes():,} bytes (a view that repeats "
                                 "its storage): answers are tensors of their own")
            spend("bytes", v.numel() * v.element_size())          # (before it is copied)
            fresh = v.detach().clone().as_subclass(torch.Tensor)   # no attribute of its own
            return fresh                  # (a method the student's object shadowed, say)
        if isinstance(v, str):
            kept = v if len(v) <= string_limit else v[:string_limit] + "..."
            spend("characters", len(kept))
            return kept
        if v is None or isinstance(v, (bool, int, float)):
            return v
        if isinstance(v, (list, tuple)):
            return (list if isinstance(v, list) else tuple)(walk(x, depth + 1) for x in v)
        if isinstance(v, dict):
            return {walk(k, depth + 1): walk(x, depth + 1) for k, x in v.items()}
        raise ValueError(f"a {type(v).__name__} in the answer")
    return walk(value, 0)


def _read_exactly(fd, n, deadline):
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(fd, deadline=None, limit=MESSAGE_LIMIT):
    """The next message on ``fd``: EOFError when the other side has gone, TimeoutError at
    ``deadline`` (time.monotonic()), ValueError when it is no message of ours."""
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if size > limit:
        raise ValueError(f"a message of {size:,} bytes (the limit is {limit:,})")
    try:
        return torch.load(io.BytesIO(_read_exactly(fd, size, deadline)), weights_only=True)
    except (EOFError, TimeoutError):
        raise
    except Exception as e:
        raise ValueError(f"not a message ({type(e).__name__})") from None


def main(argv=None):
    from . import exercise
    from .checking import (
        StudentError,
        _current,
        failure,
        from_plain,
        load_checked,
        plain,
        question_named,
    )
    from .withheld import targets, withhold

    name, path, rfd, wfd = argv or sys.argv[1:]
    rfd, wfd = int(rfd), int(wfd)
    ex = exercise(name)
    withhold(targets(ex))                      # before the student's file loads
    logging.getLogger("DLStudio").setLevel(logging.ERROR)
    module, refused = None, None
    try:
        module = load_checked(ex, path)
    except StudentError as e:
        refused = str(e)
    except BaseException as e:                 # sys.exit() at import: said, not obeyed
        refused = f"your file does not load: {type(e).__name__}: {e}"
    _current.update(module=module, forbids=ex.forbids() if module else ())
    while True:
        try:
            request = read_message(rfd)
        except (EOFError, ValueError):
            return 0
        if request.get("op") == "begin":
            torch.manual_seed(0)
            write_message(wfd, {"ok": True})
            continue
        if refused:
            write_message(wfd, {"failed": refused})
            continue
        try:
            fn = question_named(request["question"])
            with torch.set_grad_enabled(bool(request.get("grad"))):
                value = fn(module, *from_plain(request["args"]), **from_plain(request["kwargs"]))
            answer = {"value": plain(value)}
        except BaseException as e:             # the student's exception, exit or Ctrl-C
            if not isinstance(e, Exception):
                e = RuntimeError(f"{type(e).__name__}: {e}")
            message, exhibit = failure(e, path)
            answer = {"failed": message, "exhibit": exhibit}
        write_message(wfd, answer)


if __name__ == "__main__":
    sys.exit(main())
