"""Grading students' files: each checked with answers from a process of its own, in a sandbox.

    grade = grade_file(exercise, "submitted/ana.py", seed=7)   # a Grade: status, results
    grades = grade_folder(exercise, "submitted/", seeds, jobs=2)

The grader (this process) runs every check and decides every verdict; the student's file is
loaded only in a child (DLStudio.exercises.answering), which answers the checks' questions
with what the student's code computes on the grader's inputs. Nothing the child writes or
prints, and neither its exit status nor how it ended, can pass a check: a file that exits
early, forges a results file or prints anything it likes earns exactly what its functions
compute. The child runs in a sandbox where one can be made (DLStudio.exercises.sandbox), with
a time and a memory limit; any output, exit or crash becomes that file's row (status and
one-line reason) and the rest are graded.
"""

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from .answering import inspected, read_message, write_message
from .checking import Answered, Mistake, from_plain, run_checks
from .sandbox import Sandbox

__all__ = ["Grade", "grade_file", "grade_folder", "new_seed", "OUTPUT_LIMIT"]

#: How much of a child's output the grader keeps (its last bytes).
OUTPUT_LIMIT = 64 * 1024
#: The child's own code, run with ``python -c``: the current folder is never on its path,
#: so a file named like a standard module (random.py) is graded like any other.
CHILD = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
         "from DLStudio.exercises.answering import main; sys.exit(main())")


def new_seed():
    """A fresh grading seed (recorded with the grades: ``--seed`` gives the same inputs)."""
    return secrets.randbelow(10 ** 6)


@dataclass
class Grade:
    """One file's grading: ``status`` ("checked", "stopped after N s", "crashed (...)"),
    ``results`` (checking.Result, one a check), ``seed``, ``seconds``."""
    file: str
    status: str
    results: list
    seed: int
    seconds: float = 0.0
    output: str = ""


class _Tail:
    """The last ``limit`` bytes of a stream, read in a thread (so that a child printing
    without end neither blocks nor fills the disk)."""

    def __init__(self, stream, limit=OUTPUT_LIMIT):
        self.stream, self.limit, self.data = stream, limit, b""
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        for chunk in iter(lambda: self.stream.read(1 << 16), b""):
            self.data = (self.data + chunk)[-self.limit:]

    def text(self):
        self.thread.join(timeout=2)
        return self.data.decode("utf-8", errors="replace")

    def last_line(self, width=160):
        lines = [line.strip() for line in self.text().splitlines() if line.strip()]
        if not lines:
            return ""
        line = "".join(c if c.isprintable() else "?" for c in lines[-1])
        return line[:width] + ("..." if len(line) > width else "")


class Child:
    """A student's file answering questions in a process of its own (see module docstring).
    Call it as an answerer of `run_checks`; `begin` before each check; `close` at the end.
    A child that ended is started again for the next check, unless it ended before it
    answered anything (then every question gets why)."""

    def __init__(self, exercise, path, work, timeout, memory_mb, sandbox):
        self.exercise, self.path, self.work = exercise, path, work
        self.left, self.memory_mb, self.sandbox = timeout, memory_mb, sandbox
        self.process, self.ended, self.crashes, self.timed_out = None, None, [], False

    def start(self):
        rq, self.requests = os.pipe()          # the grader writes questions on requests
        self.answers, wa = os.pipe()           # and reads answers
        env = {"PATH": "/usr/bin:/bin", "HOME": self.work, "MPLCONFIGDIR": self.work,
               "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(
                   os.path.abspath(__file__))))}
        argv = [sys.executable, "-c", CHILD, self.exercise.name, self.path, str(rq), str(wa)]
        command, preexec = self.sandbox.wrap(argv, self.work, self.memory_mb, env)
        self.process = subprocess.Popen(
            command, cwd=self.work, env=env if self.sandbox.kind != "bwrap" else None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(rq, wa), start_new_session=True, preexec_fn=preexec)
        os.close(rq)
        os.close(wa)
        self.tail, self.answered, self.ended = _Tail(self.process.stdout), 0, None

    def begin(self):
        """A check starts: the child's random state is reset (a dead child started again)."""
        if self.process is None or (self.ended and self.answered and not self.timed_out):
            self.stop()
            self.start()
        if not self.ended:
            self._exchange({"op": "begin"})

    def __call__(self, fn, args, kwargs):
        if self.ended:
            raise Answered(self.ended)
        answer = self._exchange({"op": "ask", "question": f"{fn.__module__}:{fn.__qualname__}",
                                 "args": args, "kwargs": kwargs,
                                 "grad": torch.is_grad_enabled()})
        if not isinstance(answer, dict):
            raise Answered("your file's process answered something that is no answer")
        if "failed" in answer:
            message = str(answer["failed"])
            if answer.get("exhibit"):
                raise Mistake(message, str(answer["exhibit"]))
            raise Answered(message)
        self.answered += 1
        return from_plain(answer.get("value"))

    def charge(self, seconds):
        """The grader spent ``seconds`` on this file's check while it held the turn: they
        count against the file's time, as its child's do (see checking._waiting)."""
        self.left -= seconds

    def _exchange(self, message):
        """Send ``message``, and the child's answer, read within what is left of the file's
        time (which runs only while its child is asked, or its checks hold the turn)."""
        start = time.monotonic()
        deadline = start + self.left
        try:
            write_message(self.requests, message, deadline)
            return inspected(read_message(self.answers, deadline))
        except TimeoutError:
            self.timed_out = True
            self.ended = "no answer within the time limit"
            self.stop()
        except (EOFError, BrokenPipeError, ValueError) as e:
            self.ended = self._why_it_ended(e)
            self.crashes.append(self.ended)
        finally:
            self.left -= time.monotonic() - start
        raise Answered(self.ended)

    def _why_it_ended(self, error):
        if isinstance(error, ValueError):
            self.stop()
            return f"your file's process answered something that is no answer ({error})"
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.stop()
            code = self.process.returncode
        if code is not None and code > 128 and self.sandbox.kind == "bwrap":
            code = 128 - code                  # bwrap passes a signal on as 128 + its number
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               and -code in signal.Signals._value2member_map_ else f"exit status {code}")
        when = "before it answered any question" if not self.answered else "while it answered"
        said = self.tail.last_line()
        return f"your file's process ended {when} ({how})" + (f": {said}" if said else "")

    def stop(self):
        """The child and every process it started end (its session, or its sandbox)."""
        if self.process is None:
            return
        for fd in (self.requests, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass
        try:                        # the whole session, also when the child itself has ended
            os.killpg(self.process.pid, signal.SIGKILL)
        except (OSError, AttributeError):            # (Windows: no process groups)
            if self.process.poll() is None:
                self.process.kill()
        self.process.wait()
        self.requests = self.answers = -1


def grade_file(exercise, path, seed=None, timeout=60, memory_mb=3072, sandbox=None,
               only=None):
    """The Grade of one file: its checks (``only``: those named) with answers from a child
    in ``sandbox`` (Sandbox.find() by default), within ``timeout`` seconds in all."""
    sandbox = sandbox or Sandbox.find()
    seed = new_seed() if seed is None else seed
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dlstudio-grade-") as work:
        copy = os.path.join(work, os.path.basename(path))
        shutil.copyfile(path, copy)
        child = Child(exercise, copy, work, timeout, memory_mb, sandbox)
        try:
            results = run_checks(exercise, copy, only=only, seed=seed, answerer=child)
        finally:
            child.stop()
        output = child.tail.text() if child.process else ""
    if child.timed_out:
        status = f"stopped after {timeout} s"
    elif child.crashes:
        status = "crashed: " + child.crashes[0].replace("your file's process ", "")
    else:
        status = "checked"
    return Grade(os.path.basename(path), status, results, seed, time.monotonic() - start,
                 output)


def grade_folder(exercise, files, seed=None, jobs=1, **options):
    """The Grade of each file, ``jobs`` at a time (each with its own seed unless ``seed``)."""
    sandbox = options.pop("sandbox", None) or Sandbox.find()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda f: grade_file(exercise, f, seed, sandbox=sandbox,
                                                  **options), files))
