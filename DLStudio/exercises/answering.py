"""The process that answers a grader's questions about one student's file.

    python -c "...answering import main; main()" NAME FILE READ_FD WRITE_FD

It loads the file (the only place the student's code ever runs while grading), then answers
each question the grader sends on READ_FD: the question's name and its inputs, plain data.
The answer goes back on WRITE_FD as plain data too (tensors, numbers, strings, lists; see
checking.plain), or as the failure the student's code met, in one line. It decides nothing:
the grader compares every answer with the reference. Whatever the file prints goes to this
process's standard output, which the grader reads apart from the answers.

Messages on both pipes are a length (8 bytes, big-endian) and the message in `wire`'s format,
plain data that neither side unpickles: the grader reads the length before the message, and
builds no more of an answer than its budgets allow.
"""

import logging
import os
import select
import struct
import sys
import time

import torch

from .wire import Budgets, dumps, loads

__all__ = ["write_message", "read_message", "inspected", "answer_budgets", "main",
           "MESSAGE_LIMIT"]

HEADER = struct.Struct(">Q")
#: The largest message either side reads (a question's inputs or an answer).
MESSAGE_LIMIT = 256 * 2 ** 20


def write_message(fd, message, deadline=None, limit=None):
    """Send ``message`` on ``fd``; ValueError, before anything is written, where it would be
    more than ``limit`` bytes; TimeoutError at ``deadline`` (time.monotonic()) when the other
    side stops reading (a child may shrink its pipe and never read: the grader's writes have
    a deadline, as its reads do)."""
    body = dumps(message, limit)
    data = memoryview(HEADER.pack(len(body)) + body)
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


#: What the grader builds of an answer: at most this many values, strings cut to this length;
#: characters of its strings and bytes of its tensors in all (a message near MESSAGE_LIMIT of
#: short strings or many tensors is refused as it is read, not once it is built).
NODE_BUDGET = 200_000
STRING_LIMIT = 4_000
CHARACTER_BUDGET = 1_000_000
TENSOR_BYTES_BUDGET = 256 << 20


def answer_budgets():
    """What the grader builds of one answer at most (see the constants above)."""
    return Budgets(NODE_BUDGET, STRING_LIMIT, CHARACTER_BUDGET, TENSOR_BYTES_BUDGET)


def inspected(value):
    """The copy of the answer ``value`` the grader computes with, as it crosses the pipe:
    written in `wire`'s format and read back within `answer_budgets` (strings cut, tensors
    fresh torch.Tensors of a real or bool dtype). ValueError says what was refused."""
    return loads(dumps(value), answer_budgets())


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


def read_message(fd, deadline=None, limit=MESSAGE_LIMIT, budgets=None):
    """The next message on ``fd``, read within ``budgets`` (`wire.Budgets`; the grader's
    `answer_budgets` for an answer): EOFError when the other side has gone, TimeoutError at
    ``deadline`` (time.monotonic()), ValueError when it is no message of ours or goes over a
    budget. Its size is read, and refused above ``limit``, before any of it."""
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if size > limit:
        raise ValueError(f"a message of {size:,} bytes (the limit is {limit:,})")
    return loads(_read_exactly(fd, size, deadline), budgets)


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
    try:                                       # the grader's first message, then the file
        first = read_message(rfd)
        private = {key: bytes(code.numpy()) for key, code in first["code"].items()}
    except (EOFError, ValueError, KeyError, AttributeError, TypeError):
        return 0
    withhold(targets(ex), private, path)       # before the student's file loads
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
        try:
            write_message(wfd, answer, None, MESSAGE_LIMIT)
        except ValueError as e:                # (nothing of it written)
            write_message(wfd, {"failed": f"your answer is too large to send to the grader "
                                f"({e}; each reference to one object counts again)"})


if __name__ == "__main__":
    sys.exit(main())
