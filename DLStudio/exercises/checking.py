"""How an exercise checks a student's file: load it, run each named check, say what differs.

A check returns nothing when the code is right and raises `Mistake` (a message in the
student's terms, and the museum exhibit that shows what the mistake costs) when it is not.
It never touches the student's code itself: it chooses the inputs (and the weights, where a
part of a model is asked for), and `ask`s a *question*, a function of ours decorated with
`@question` that runs the student's code on those inputs and returns what it computed as
plain data (tensors, numbers, strings, lists). The check then compares that answer with the
reference. So the verdict is always the checker's: when a student checks their own file the
question runs in the same process (`run_checks`); when an instructor grades, it runs in a
child process (DLStudio.exercises.answering, in a sandbox), and only its answers come back.

While a question runs the student's code, the parts the exercise asks them to write are
switched off in the reference (`forbidden`): a file that inherits the reference, calls it,
or calls PyTorch's own version fails with a message that says so. This guard looks inside
the student's process, so it catches honest shortcuts, not a determined cheat. A student's
exception is reported as their line and its message.

    results = run_checks(exercise, "my_attention.py")    # [Result(name, passed, message)]
"""

import contextlib
import importlib
import importlib.util
import linecache
import logging
import math
import os
import random
import sys
import threading
import time
import traceback
import types
import zlib
from dataclasses import dataclass

import torch

from .withheld import running, standard_classes

__all__ = ["internal_kernels", "SDPA_KERNELS", "LOSS_KERNELS",
           "Mistake", "UsedReference", "Answered", "Check", "Result", "Exercise", "check",
           "question", "ask", "fresh", "drawn", "grading", "plain", "load_student", "run_checks",
           "forbidden", "close", "same", "differs", "near", "finite", "student_code"]


class Mistake(AssertionError):
    """What a check found wrong, in the student's terms. ``exhibit``: the bug museum's
    exhibit that trains a model with this mistake (``dlstudio bug_museum --exhibit X``)."""

    def __init__(self, message, exhibit=None):
        super().__init__(message)
        self.exhibit = exhibit


class UsedReference(Exception):
    """The student's code ran the part it was asked to write from somewhere else."""


class StudentError(Exception):
    """The student's code raised: the message names their line."""


class Answered(Exception):
    """A question's answer was a failure, said in full by the process that ran it (the
    student's exception as their line, "not implemented", or that process's end)."""


@dataclass
class Check:
    name: str
    about: str          # one line: what it checks
    run: object         # run(module) -> None, or raises Mistake


@dataclass
class Result:
    name: str
    passed: bool
    message: str = ""
    exhibit: str = None


def check(checks, name, about):
    """Decorator: add ``fn(module)`` to the list ``checks`` as the check ``name``."""
    def add(fn):
        checks.append(Check(name, about, fn))
        return fn
    return add


@dataclass
class Exercise:
    """One exercise: its name, what the student writes (``defines``: the names their file
    must have), what the checks switch off while the student's code runs (``forbids``: a
    function returning (owner, attribute, what it is) triples), its checks, and for
    ``--train`` the container class the file defines (``container``) and the standard one
    it is trained beside (``base``)."""
    name: str
    summary: str
    defines: tuple
    forbids: object
    checks: list
    container: str = None
    base: object = None
    settings: dict = None       # --train: the switches both containers are built with


# ---------------------------------------------------------------------------------------
# Loading the student's file.
def load_student(path):
    """The student's file as a module (named after the file, or student_<name> where that
    name is taken). Raises StudentError with their line when it does not load."""
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if stem.isidentifier() and stem not in sys.modules and \
        importlib.util.find_spec(stem) is None else f"student_{stem.replace('-', '_')}"
    path = os.path.abspath(path)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    linecache.checkcache(path)          # a file edited since: its lines as they are now
    try:
        with open(path, encoding="utf-8") as f:       # compiled afresh: no stale bytecode
            exec(compile(f.read(), path, "exec"), module.__dict__)
    except SyntaxError as e:
        raise StudentError(f"line {e.lineno}: SyntaxError: {e.msg}") from None
    except Exception as e:                                   # their code, at import
        raise StudentError(f"your file does not load: {student_line(e, path)}") from None
    return module


def student_line(error, path):
    """``line N: `code`: Type: message`` of the last frame in the student's file (their
    line, not our traceback); the error alone where no frame of theirs is involved."""
    path = os.path.abspath(path)
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if os.path.abspath(f.filename) == path]
    what = f"{type(error).__name__}: {error}"
    if not frames:
        return what
    frame = frames[-1]
    code = (frame.line or linecache.getline(path, frame.lineno)).strip()
    return f"line {frame.lineno}: `{code}`: {what}"


# ---------------------------------------------------------------------------------------
# While the student's code runs: the reference's versions of what they write raise.
@contextlib.contextmanager
def forbidden(items, module=None):
    """Replace each (owner, attribute, what) by a function that raises UsedReference, in
    ``owner`` and among the student's module's names, for the duration of ``with``."""
    saved, names = [], []
    for owner, attribute, what in items:
        original = owner.__dict__[attribute] if isinstance(owner, type) else getattr(
            owner, attribute)
        stub = _stub(what)
        if isinstance(original, staticmethod):
            stub = staticmethod(stub)
        elif isinstance(owner, type):       # a method: refused to the student's classes only
            stub = _method_stub(original, what, module,
                                _STANDARD.get(getattr(module, "__name__", None)))
        saved.append((owner, attribute, original))
        setattr(owner, attribute, stub)
        plain = original.__func__ if isinstance(original, staticmethod) else original
        for name, value in list(vars(module).items()) if module else []:
            if value is plain:
                names.append((name, value))
                setattr(module, name, _stub(what))
    try:
        yield
    finally:
        for owner, attribute, original in reversed(saved):
            setattr(owner, attribute, original)
        for name, value in names:
            setattr(module, name, value)


#: PyTorch's own kernels of attention and of the loss under their internal names (torch.ops'
#: aten namespace, torch._C._nn), which reach the same code as F's functions by another name.
SDPA_KERNELS = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
                "_scaled_dot_product_flash_attention_for_cpu",
                "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                "_scaled_dot_product_cudnn_attention",
                "_scaled_dot_product_fused_attention_overrideable",
                "_scaled_dot_product_attention_math_for_mps")
LOSS_KERNELS = ("cross_entropy_loss", "nll_loss", "nll_loss_nd", "nll_loss2d",
                "nll_loss_forward", "nll_loss2d_forward")


def internal_kernels(what, names):
    """(owner, attribute, what) of each of ``names`` in torch.ops.aten and torch._C._nn
    (those this PyTorch has), for an exercise's ``forbids``."""
    found = []
    for owner, prefix in ((torch.ops.aten, "torch.ops.aten"), (torch._C._nn, "torch._C._nn")):
        for name in names:
            try:
                getattr(owner, name)
            except (AttributeError, RuntimeError):
                continue
            found.append((owner, name, f"{prefix}.{name} (PyTorch's {what} by another name)"))
    return found


def _stub(what):
    def refuse(*args, **kwargs):
        raise UsedReference(f"your code ran {what}, which this exercise asks you to write "
                            "yourself (inherited, called, or imported): write it in your file")
    return refuse


def _method_stub(original, what, module, standard):
    """A reference method that refuses to run for an object of a class that is not among
    the ``standard`` ones (the package's, before the student's file loaded: the student's
    classes are not, whatever their ``__module__`` says) or while the student's code is on
    the stack (a standard object they built and called); the model's own objects, run by
    the model's code, still run it."""
    refuse = _stub(what)
    path = getattr(module, "__file__", None)
    per_class = isinstance(original, classmethod)
    run = original.__func__ if per_class else original

    def method(self, *args, **kwargs):
        cls = self if per_class else type(self)
        if module is not None and (running(path) or (cls.__module__ == module.__name__
                                   if standard is None else cls not in standard)):
            return refuse()
        return run(self, *args, **kwargs)
    return classmethod(method) if per_class else method


#: The standard classes of each student's module's exercise (withheld.standard_classes), as
#: they were before the file loaded.
_STANDARD = {}


class _Current(threading.local):
    """What the checks in progress in this thread run on (a grader checks several files at
    once, each in a thread of its own): the student's module (None when its questions go
    to another process), what is switched off, who answers the questions, the seed."""

    def __init__(self):
        self.module, self.forbids, self.answerer, self.seed = None, (), None, None
        self.turns, self.since = False, 0.0

    def update(self, **values):
        self.__dict__.update(values)


_current = _Current()


@contextlib.contextmanager
def student_code():
    """Inside a check: the student's code runs here, with the reference switched off."""
    with forbidden(_current.forbids, _current.module):
        yield


# ---------------------------------------------------------------------------------------
# Questions: the only code that runs the student's.
QUESTIONS = {}


def question(fn):
    """Decorator: ``fn(module, *args)`` runs the student's ``module`` on ``args`` (plain data)
    and returns what it computed; a check `ask`s it. Registered by name, so that a process
    of the student's can be told which question to answer."""
    QUESTIONS[f"{fn.__module__}:{fn.__qualname__}"] = fn
    return fn


def question_named(name):
    """The question registered as ``module:function`` (its module imported)."""
    importlib.import_module(name.split(":")[0])
    return QUESTIONS[name]


def ask(fn, *args, **kwargs):
    """The answer to question ``fn`` on these inputs, as plain data (see `plain`), from
    wherever the student's code runs: this process, or the grader's child."""
    answerer = _current.answerer
    if answerer is None:
        raise RuntimeError("ask() runs inside run_checks")
    return _waiting(answerer, fn, plain(args), plain(kwargs))


def _waiting(call, *args):
    """``call(*args)``; a grader's other files' checks take their turn meanwhile."""
    if not _current.turns:
        return call(*args)
    state = torch.get_rng_state()
    charge = getattr(_current.answerer, "charge", None)
    if charge is not None:                      # the check's own time with the turn
        charge(time.monotonic() - _current.since)
    _TURNS.release()
    try:
        return call(*args)
    finally:
        _TURNS.acquire()
        _current.since = time.monotonic()
        torch.set_rng_state(state)


#: A grader checks several files at once, each in a thread, with answers from children: the
#: checks themselves take turns (each with its own random state), so that the inputs and the
#: reference's weights of a check do not depend on what the other threads draw meanwhile.
_TURNS = threading.Lock()


def answer_here(fn, args, kwargs):
    """In this process: run the question on the loaded module."""
    return from_plain(plain(fn(_current.module, *args, **kwargs)))


class Opaque:
    """What a question's answer holds where the student's code returned something that is
    not data (a NumPy array, an object of theirs): only its type's name comes back."""

    def __repr__(self):
        return f"<{type(self).__name__}>"


def opaque(type_name):
    return type(str(type_name)[:60], (Opaque,), {})()


def plain(value, depth=0):
    """``value`` as plain data: tensors (detached copies), None, bools, ints, floats,
    strings, and tuples, lists and dicts of them; anything else becomes an `Opaque` of its
    type's name. The answer is what comes back from the student's process, so nothing of
    theirs but data may cross (their objects are never unpickled)."""
    if isinstance(value, Opaque):
        return {"__opaque__": type(value).__name__}
    if isinstance(value, torch.Tensor):
        return value.detach().as_subclass(torch.Tensor).clone()
    if value is None or depth > 50:
        return None if value is None else {"__opaque__": "too deeply nested"}
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, (tuple, list)):
        return type(value)(plain(v, depth + 1) for v in value) if type(value) in (
            tuple, list) else tuple(plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return {plain(k, depth + 1) if isinstance(k, (int, str)) else str(k):
                plain(v, depth + 1) for k, v in value.items()}
    return {"__opaque__": type(value).__name__}


def from_plain(value):
    """The answer as a check reads it: `Opaque` where the student's code returned no data."""
    if isinstance(value, dict):
        if set(value) == {"__opaque__"}:
            return opaque(value["__opaque__"])
        return {k: from_plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(from_plain(v) for v in value)
    return value


def drawn(n):
    """A random.Random of seed ``fresh(n)``: a check's sizes and numbers, fixed when a
    student checks their own file, drawn from the grading seed when an instructor grades."""
    return random.Random(fresh(n))


def grading():
    """Whether the checks in progress are an instructor's grading (a grading seed is set)."""
    return _current.seed is not None


def fresh(n):
    """Seed ``n`` of a check's inputs: ``n`` itself when a student checks their own file
    (the same inputs every time); drawn from the grading seed when an instructor grades
    (``--seed``, recorded with the grades), so that no file can be fitted to known inputs."""
    seed = _current.seed
    return n if seed is None else zlib.crc32(f"{seed}:{n}".encode()) % (2 ** 31)


# ---------------------------------------------------------------------------------------
def load_checked(exercise, path):
    """The student's module, with every name the exercise asks for; StudentError says
    what is wrong."""
    before = standard_classes(exercise.forbids())
    module = load_student(path)
    _STANDARD[module.__name__] = before
    missing = [n for n in exercise.defines if not hasattr(module, n)]
    if missing:
        raise StudentError(f"your file defines no {', '.join(missing)} (the skeleton's "
                           "names must stay: `dlstudio exercise "
                           f"{exercise.name} DIR` writes it again)")
    return module


def run_checks(exercise, path=None, only=None, seed=None, answerer=None):
    """Every check of ``exercise`` (``only``: those named): a list of Result, in order.
    Without ``answerer`` the file ``path`` is loaded and its questions are answered in this
    process; with one (the grader's), each question goes to it. ``seed``: the grading
    seed of the inputs (None: the fixed seeds a student checks with)."""
    checks = [c for c in exercise.checks if only is None or c.name in only]
    module = None
    if answerer is None:
        try:
            module = load_checked(exercise, path)
        except StudentError as e:
            return [Result(c.name, False, str(e)) for c in checks]
        answerer = answer_here
    turns = answerer is not answer_here
    _current.update(module=module, forbids=exercise.forbids() if module else (),
                    answerer=answerer, seed=seed, turns=turns)
    quiet = logging.getLogger("DLStudio")       # "MyHead is not the standard head ..."
    level = quiet.level
    if not turns:                               # (the student's code runs here)
        quiet.setLevel(logging.ERROR)
    try:
        with _TURNS if turns else contextlib.nullcontext():
            _current.since = time.monotonic()
            return [_run_one(c, path) for c in checks]
    finally:
        _current.update(module=None, forbids=(), answerer=None, seed=None, turns=False)
        if not turns:
            quiet.setLevel(level)


def begin_check(answerer):
    """Every check starts from the same random state, here and where the answers come from."""
    start = getattr(answerer, "begin", None)
    if start is not None:
        _waiting(start)
    torch.manual_seed(0)


def _run_one(check, path):
    try:
        begin_check(_current.answerer)
        with torch.no_grad() if getattr(check.run, "no_grad", True) else \
                contextlib.nullcontext():
            check.run()
    except Exception as e:                      # the student's code raised, or returned junk
        return Result(check.name, False, *failure(e, path))
    return Result(check.name, True)


#: The longest failure message a check keeps (one that quotes an answer is cut there).
MESSAGE_LIMIT = 2_000


def brief(message, limit=MESSAGE_LIMIT):
    """``message`` cut to ``limit`` characters, saying how much was left out."""
    return message if len(message) <= limit else \
        f"{message[:limit]}... ({len(message) - limit:,} characters more)"


def failure(error, path):
    """(message, exhibit) of a check's failure: a Mistake's own, or the student's line;
    the message `brief`."""
    message, exhibit = _failure(error, path)
    return brief(message), exhibit


def _failure(error, path):
    if isinstance(error, Mistake):
        return str(error), error.exhibit
    if isinstance(error, (UsedReference, Answered)):
        return str(error), None
    if isinstance(error, NotImplementedError):
        where = student_line(error, path) if path else ""
        return "not implemented" + (f" ({where.split(':')[0]})" if where.startswith("line")
                                    else ""), None
    return student_line(error, path) if path else f"{type(error).__name__}: {error}", None


def with_grad(fn):
    """A check that needs autograd (the others run under torch.no_grad)."""
    fn.no_grad = False
    return fn


# ---------------------------------------------------------------------------------------
# Comparing what the student's code returned with what it should be.
def tensor(value, what, shape=None):
    """``value`` must be a tensor (of ``shape``, where given); else a Mistake naming it."""
    if not isinstance(value, torch.Tensor):
        raise Mistake(f"{what} should be a tensor, got {type(value).__name__}")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise Mistake(f"{what} has shape {tuple(value.shape)}, expected {tuple(shape)}")
    return value


def differs(got, want, tol=1e-9):
    """Elementwise, True where ``got`` is not within ``tol`` of ``want`` (a tensor or a
    number). Written as ``not (diff <= tol)``: NaN and inf differ from everything, so no
    check that asks "where does it differ?" passes an answer of NaN."""
    got = got.double()
    want = want.double() if isinstance(want, torch.Tensor) else torch.tensor(
        float(want), dtype=torch.float64)
    return ~((got - want).abs() <= tol)


def near(got, want, tol=1e-9):
    """Whether the numbers (or one-element tensors) ``got`` and ``want`` are within ``tol``;
    never when either is NaN or inf."""
    got, want = float(got), float(want)
    return math.isfinite(got) and math.isfinite(want) and abs(got - want) <= tol


def finite(value, what, hint=""):
    """``value`` (a tensor) holds no NaN or inf; else a Mistake naming where the first is."""
    bad = ~torch.isfinite(value) if value.is_floating_point() else None
    if bad is not None and bad.any():
        at = tuple(int(i) for i in bad.nonzero()[0])
        raise Mistake(f"{what} at {at} is {value[at].item()}: a number was expected"
                      + (f" ({hint})" if hint else ""))
    return value


def close(got, want, what, tol=1e-9, hint=""):
    """``got`` equals ``want`` to ``tol`` (absolute, after rounding); else a Mistake that
    says where it differs first, by how much, and the tolerance. NaN and inf never pass."""
    got = tensor(got, what, want.shape)
    if got.dtype == torch.bool or want.dtype == torch.bool:
        bad = (got != want).nonzero()
        if len(bad):
            at = tuple(bad[0].tolist())
            raise Mistake(f"{what} at {at} is {bool(got[at])}, expected {bool(want[at])}"
                          + (f": {hint}" if hint else ""))
        return
    bad = differs(got, want, tol)
    if bad.any():
        at = tuple(int(i) for i in bad.nonzero()[0])
        raise Mistake(f"{what} at {at} is {got[at].item():.6g}, expected {want[at].item():.6g} "
                      f"(tolerance {tol:g})" + (f": {hint}" if hint else ""))


def same(got, want, tol=1e-9):
    """Whether ``got`` is a tensor equal to ``want`` to ``tol`` (no message; NaN never is)."""
    return isinstance(got, torch.Tensor) and got.shape == want.shape and \
        not differs(got, want, tol).any()
