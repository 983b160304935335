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
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from .answering import answer_budgets, read_message, write_message
from .checking import Answered, Mistake, Result, from_plain, run_checks
from .flags import SIMILAR_BUDGET, obfuscation_flags, reference_flags, similar_flags
from .limits import FileGroup
from .sandbox import Sandbox, kill_user

__all__ = ["Grade", "grade_file", "grade_folder", "add_similar_flags", "new_seed",
           "read_submission", "NotGraded", "OUTPUT_LIMIT", "SUBMISSION_LIMIT", "said"]

#: How much of a child's output the grader keeps (its last bytes).
OUTPUT_LIMIT = 64 * 1024
#: The child's own code, run with ``python -c``: the current folder is never on its path,
#: so a file named like a standard module (random.py) is graded like any other.
CHILD = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
         "from DLStudio.exercises.answering import main; sys.exit(main())")


#: The largest submission read (its size is read first, from the file it opened).
SUBMISSION_LIMIT = 1 << 20


#: How much of one message from a student's process is kept (a check's failure).
SAID_LIMIT = 1000


def said(text, limit=SAID_LIMIT):
    """A text the student's process sent, as the grader keeps it: cut to ``limit``
    characters, and printable anywhere (a lone surrogate, which no UTF-8 printer takes,
    written as its escape)."""
    text = text if len(text) <= limit else text[:limit] + "..."
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class NotGraded(Exception):
    """A submission that is no regular file of ours to read: what it is, in words."""


def what_it_is(mode):
    for test, words in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return words
    return "not a regular file"


def read_submission(path, limit=SUBMISSION_LIMIT):
    """The bytes of the regular file at ``path``, opened without following a link and
    without waiting on a FIFO, its size read before its content. NotGraded says what else
    it is (a link, a folder, a FIFO, a device, too large)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as e:
        raise NotGraded(f"unreadable ({e.strerror})") from None
    if not stat.S_ISREG(mode):
        raise NotGraded(what_it_is(mode))
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:                        # replaced by a link meanwhile: ELOOP
        raise NotGraded(f"unreadable ({e.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotGraded(what_it_is(info.st_mode))
        if info.st_size > limit:
            raise NotGraded(f"a file of {info.st_size:,} bytes (a submission has at most "
                            f"{limit:,})")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise NotGraded(f"a file of over {limit:,} bytes (a submission has at most "
                            f"{limit:,})")
        return b"".join(chunks)
    finally:
        os.close(fd)


def new_seed():
    """A fresh grading seed (recorded with the grades: ``--seed`` gives the same inputs)."""
    return secrets.randbelow(10 ** 6)


@dataclass
class Grade:
    """One file's grading: ``status`` ("checked", "stopped after N s", "crashed (...)"),
    ``results`` (checking.Result, one a check), ``seed``, ``seconds``; ``flags`` for the
    instructor (exercises.flags: they inform, they change no score)."""
    file: str
    status: str
    results: list
    seed: int
    seconds: float = 0.0
    output: str = ""
    flags: list = field(default_factory=list)
    source: str = field(default="", repr=False)     # the file as read (for similar: flags)


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


def _private(exercise):
    """The code of the private copies a graded file's process gives the rest of the model
    (withheld.private_code), each a tensor of bytes."""
    from .withheld import private_code, targets
    return {key: torch.frombuffer(bytearray(code), dtype=torch.uint8)
            for key, code in private_code(targets(exercise)).items()}


class Child:
    """A student's file answering questions in a process of its own (see module docstring).
    Call it as an answerer of `run_checks`; `begin` before each check; `close` at the end.
    A child that ended is started again for the next check, unless it ended before it
    answered anything (then every question gets why)."""

    def __init__(self, exercise, path, work, timeout, memory_mb, sandbox):
        self.exercise, self.path, self.work = exercise, path, work
        self.left, self.memory_mb, self.sandbox = timeout, memory_mb, sandbox
        self.process, self.ended, self.crashes, self.timed_out = None, None, [], False
        self.group, self.uid = None, None

    def start(self):
        rq, self.requests = os.pipe()          # the grader writes questions on requests
        self.answers, wa = os.pipe()           # and reads answers
        env = {"PATH": "/usr/bin:/bin", "HOME": self.work, "MPLCONFIGDIR": self.work,
               "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(
                   os.path.abspath(__file__))))}
        argv = [sys.executable, "-c", CHILD, self.exercise.name, self.path, str(rq), str(wa)]
        self.group = FileGroup.make(self.memory_mb) if self.memory_mb else None
        command, preexec, self.uid = self.sandbox.wrap(
            argv, self.work, self.memory_mb, env, self.group,
            self.sandbox.package_for(self.exercise))
        self.process = subprocess.Popen(
            command, cwd=self.work, env=env if self.sandbox.kind != "bwrap" else None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(rq, wa), start_new_session=True, preexec_fn=preexec)
        os.close(rq)
        os.close(wa)
        self.tail, self.answered, self.ended = _Tail(self.process.stdout), 0, None
        try:                                   # before the file loads: the private copies
            write_message(self.requests, {"op": "private", "code": _private(self.exercise)},
                          time.monotonic() + 60)
        except (TimeoutError, OSError):        # (a child that ended: said at its first answer)
            pass

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
            message, exhibit = answer["failed"], answer.get("exhibit")
            if not isinstance(message, str) or not isinstance(exhibit, (str, type(None))):
                raise Answered("your file's process answered a failure that is no text")
            if exhibit:
                raise Mistake(said(message), said(exhibit))
            raise Answered(said(message))
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
            return read_message(self.answers, deadline, budgets=answer_budgets())
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
        if self.group is not None and self.group.oom_kills():
            how += (f": its processes together went over --memory-mb {self.memory_mb} "
                    "(one limit for all of them)")
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
        if self.group is not None:               # every process of the file, wherever it is
            self.group.kill()
            self.group.remove()
            self.group = None
        if self.uid is not None:                 # (a user of its own: all that uid runs)
            kill_user(self.uid)
        self.requests = self.answers = -1


def grade_file(exercise, path, seed=None, timeout=60, memory_mb=3072, sandbox=None,
               only=None):
    """The Grade of one file: its checks (``only``: those named) with answers from a child
    in ``sandbox`` (Sandbox.find() by default), within ``timeout`` seconds in all."""
    sandbox = sandbox or Sandbox.find()
    sandbox.package_for(exercise)               # made before the file's time starts
    seed = new_seed() if seed is None else seed
    start = time.monotonic()
    try:
        source = read_submission(path)
    except NotGraded as e:
        why = f"not graded: {e}"
        return Grade(os.path.basename(path), why, [
            Result(c.name, False, why) for c in exercise.checks
            if only is None or c.name in only], seed)
    work = tempfile.mkdtemp(prefix="dlstudio-grade-")
    try:
        copy = os.path.join(work, "submission.py" if not safe_name(path) else
                            os.path.basename(path))
        with open(copy, "wb") as f:
            f.write(source)
        child = Child(exercise, copy, work, timeout, memory_mb, sandbox)
        try:
            results = run_checks(exercise, copy, only=only, seed=seed, answerer=child)
        finally:
            child.stop()
        output = child.tail.text() if child.process else ""
    finally:
        remove_folder(work)
    if child.timed_out:
        status = f"stopped after {timeout} s"
    elif child.crashes:
        status = "crashed: " + child.crashes[0].replace("your file's process ", "")
    else:
        status = "checked"
    text = source.decode("utf-8", "replace")
    return Grade(os.path.basename(path), status, results, seed, time.monotonic() - start,
                 output, file_flags(exercise, text), text)


def file_flags(exercise, text):
    """One file's flags from its source (reference: and obfuscation:); a source the flags
    cannot read (nested past Python's parser, say) is said as a flag, never an error."""
    try:
        return reference_flags(exercise, text) + obfuscation_flags(text)
    except (RecursionError, MemoryError, ValueError) as e:
        return [f"unread:{type(e).__name__}"]


def remove_folder(path):
    """Remove a file's work folder whatever its student left in it (a chain of folders too
    deep for shutil.rmtree's recursion, a file it made read-only): rmtree, then rm -rf."""
    try:
        shutil.rmtree(path)
    except (OSError, RecursionError):
        pass
    if os.path.lexists(path):
        subprocess.run(["chmod", "-R", "u+rwx", path], capture_output=True, timeout=300)
        subprocess.run(["rm", "-rf", "--one-file-system", path], capture_output=True,
                       timeout=300)


def ungraded(exercise, path, seed, why):
    """The row of a file whose grading failed in the grader itself: every check failed,
    with why (one file never costs the others their grades)."""
    status = f"not graded: the grader failed on this file ({why})"
    return Grade(os.path.basename(path), status,
                 [Result(c.name, False, status) for c in exercise.checks], seed)


def safe_name(path):
    """Whether the file's name can be the child's file name as it is (printable UTF-8)."""
    name = os.path.basename(path)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return name.isprintable()


def grade_folder(exercise, files, seed=None, jobs=1, similar=True, **options):
    """The Grade of each file, ``jobs`` at a time (each with its own seed unless ``seed``);
    whatever fails in grading one file becomes that file's row. ``similar``: add the
    similar: flags too (`add_similar_flags`; a caller that writes the grades first passes
    False and adds them after)."""
    sandbox = options.pop("sandbox", None) or Sandbox.find()
    sandbox.package_for(exercise)               # once, before any file's time starts

    def one(file):
        file_seed = new_seed() if seed is None else seed
        try:
            return grade_file(exercise, file, file_seed, sandbox=sandbox, **options)
        except Exception as e:          # the grader's own failure on this file: its row
            return ungraded(exercise, file, file_seed, f"{type(e).__name__}: {e}"[:300])
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        grades = list(pool.map(one, files))
    if similar:
        add_similar_flags(exercise, grades)
    return grades


def add_similar_flags(exercise, grades, budget=SIMILAR_BUDGET):
    """Add the similar: flags to ``grades``, comparing pairs for ``budget`` seconds at most;
    returns how many pairs were left uncompared (then said by the caller)."""
    sources = {g.file: g.source for g in grades if g.source}      # read once, by grade_file
    from . import skeleton_path
    with open(skeleton_path(exercise.name), encoding="utf-8") as f:
        similar, left = similar_flags(sources, f.read(), budget=budget)
    for grade in grades:
        grade.flags += similar.get(grade.file, [])
    return left
