"""How an exercise checks a student's file: load it, run each named check, say what differs.

A check is a function of the student's module that returns nothing when the code is right
and raises `Mistake` (a message in the student's terms, and the museum exhibit that shows
what the mistake costs) when it is not. While a check runs the student's code, the parts
the exercise asks them to write are switched off in the reference (`forbidden`): a file
that inherits the reference, calls it, or calls PyTorch's own version fails with a message
that says so. A student's exception is reported as their line and its message.

    results = run_checks(exercise, "my_attention.py")    # [Result(name, passed, message)]
"""

import contextlib
import importlib.util
import linecache
import logging
import os
import sys
import traceback
import types
from dataclasses import dataclass

import torch

__all__ = ["Mistake", "UsedReference", "Check", "Result", "Exercise", "check", "load_student",
           "run_checks", "forbidden", "close", "student_code"]


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
            stub = _method_stub(original, what, module)
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


def _stub(what):
    def refuse(*args, **kwargs):
        raise UsedReference(f"your code ran {what}, which this exercise asks you to write "
                            "yourself (inherited, called, or imported): write it in your file")
    return refuse


def _method_stub(original, what, module):
    """A reference method that refuses to run for an object of the student's classes (one
    they inherited or called with super()); the reference's own objects still run it."""
    refuse = _stub(what)

    def method(self, *args, **kwargs):
        if module is not None and type(self).__module__ == module.__name__:
            return refuse()
        return original(self, *args, **kwargs)
    return method


_current = {"module": None, "forbids": ()}


@contextlib.contextmanager
def student_code():
    """Inside a check: the student's code runs here, with the reference switched off."""
    with forbidden(_current["forbids"], _current["module"]):
        yield


# ---------------------------------------------------------------------------------------
def run_checks(exercise, path, only=None):
    """Every check of ``exercise`` on the file ``path``: a list of Result, in order."""
    checks = [c for c in exercise.checks if only is None or c.name in only]
    try:
        module = load_student(path)
        missing = [n for n in exercise.defines if not hasattr(module, n)]
        if missing:
            raise StudentError(f"your file defines no {', '.join(missing)} (the skeleton's "
                               "names must stay: `dlstudio exercise "
                               f"{exercise.name} DIR` writes it again)")
    except StudentError as e:
        return [Result(c.name, False, str(e)) for c in checks]
    _current.update(module=module, forbids=exercise.forbids())
    quiet = logging.getLogger("DLStudio")       # "MyHead is not the standard head ..."
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return [_run_one(c, module, path) for c in checks]
    finally:
        _current.update(module=None, forbids=())
        quiet.setLevel(level)


def _run_one(check, module, path):
    torch.manual_seed(0)
    try:
        with torch.no_grad() if getattr(check.run, "no_grad", True) else \
                contextlib.nullcontext():
            check.run(module)
    except Mistake as e:
        return Result(check.name, False, str(e), e.exhibit)
    except UsedReference as e:
        return Result(check.name, False, str(e))
    except NotImplementedError as e:
        where = student_line(e, path)
        return Result(check.name, False, "not implemented" + (
            f" ({where.split(':')[0]})" if where.startswith("line") else ""))
    except Exception as e:                      # the student's code raised, or returned junk
        return Result(check.name, False, student_line(e, path))
    return Result(check.name, True)


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


def close(got, want, what, tol=1e-9, hint=""):
    """``got`` equals ``want`` to ``tol`` (absolute, after rounding); else a Mistake that
    says where it differs first, by how much, and the tolerance."""
    got = tensor(got, what, want.shape)
    if got.dtype == torch.bool or want.dtype == torch.bool:
        bad = (got != want).nonzero()
        if len(bad):
            at = tuple(bad[0].tolist())
            raise Mistake(f"{what} at {at} is {bool(got[at])}, expected {bool(want[at])}"
                          + (f": {hint}" if hint else ""))
        return
    diff = (got.double() - want.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    if (diff > tol).any():
        at = tuple(int(i) for i in (diff > tol).nonzero()[0])
        raise Mistake(f"{what} at {at} is {got[at].item():.6g}, expected {want[at].item():.6g} "
                      f"(tolerance {tol:g})" + (f": {hint}" if hint else ""))


def same(got, want, tol=1e-9):
    """Whether ``got`` is a tensor equal to ``want`` to ``tol`` (no message)."""
    return isinstance(got, torch.Tensor) and got.shape == want.shape and \
        bool(((got.double() - want.double()).abs() <= tol).all())
