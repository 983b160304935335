"""What a graded file's process goes without: the grader's own answers, and the standard
code of the part the student writes.

The checks compare a student's answers with references the grader computes: each exercise
module's ``reference`` functions (and bpe's ``reference_merges``), and the package's own
code that an exercise asks the student to write (its ``forbids`` that are the package's:
module functions such as ``architecture.scaled_dot_product``, and methods such as
``RMSNorm.forward`` or the static ``EmbeddingsGenerator.sinusoids``). `checking.forbidden`
switches them off by name while the student's code runs; a file could still reach them by
another name (another module's import, a class that claims the standard's ``__module__``,
an object found through ``gc``, a standard object it builds and calls) or run their source
again. So the process that answers for a student's file does without them, in two layers:

- `withhold`, in that process before the student's file loads: each one's code is replaced
  by one that raises, so that every name for it, and every class that inherits it, refuses.
  The rest of the model keeps working: a class of the model's that inherits the code (the
  cross-attention heads inherit the head's ``forward``) is given a private copy first, which
  runs only for the model's own objects, in the process's main thread, with no frame of the
  student's file on the stack (`private_copy`);
- `package_copy`, for the bubblewrap sandbox: the package as the sandbox shows it, those
  bodies replaced by the same refusal and no compiled file of the originals (made once per
  grading run, before any file's time starts), so that reading and running the source
  (importlib's spec_from_file_location) gives the refusing copy too. The private copies'
  code then comes from the grader, on the pipe, before the file loads (`private_code`).
  Without bubblewrap the package's files stay readable.
"""

import ast
import atexit
import compileall
import importlib
import inspect
import marshal
import os
import shutil
import sys
import tempfile
import threading
import types

from .flags import parse

__all__ = ["targets", "withhold", "private_code", "package_copy", "running",
           "standard_classes", "REFUSAL"]

REFUSAL = ("the grader's own answer, withheld while grading: write this part yourself in "
           "your file")
#: The modules whose classes are the model's own (those given private copies).
MODEL = ("DLStudio.model.", "DLStudio.containers.", "DLStudio.Transformers")


def targets(exercise):
    """(module, qualified name) of each function and method a graded file's process goes
    without: every exercise's references, and what ``exercise`` forbids that is the
    package's own (module functions; methods, static and class methods of its classes)."""
    from . import NAMES
    found = set()
    for name in NAMES:
        module = importlib.import_module(f"{__package__}.{name}")
        for attr, value in vars(module).items():
            if attr.startswith("reference") and inspect.isfunction(value) and \
                    value.__module__ == module.__name__:
                found.add((module.__name__, attr))
    for owner, attribute, _ in exercise.forbids():
        if isinstance(owner, types.ModuleType):
            fn = getattr(owner, attribute, None)
            if inspect.isfunction(fn) and fn.__module__.startswith("DLStudio.") and \
                    fn.__qualname__ == fn.__name__ and fn.__closure__ is None:
                found.add((fn.__module__, fn.__name__))
        elif isinstance(owner, type) and owner.__module__.startswith("DLStudio.") and \
                _function(vars(owner).get(attribute)) is not None:
            found.add((owner.__module__, f"{owner.__qualname__}.{attribute}"))
    return sorted(found)


def _function(raw):
    """The plain function of a class attribute (a method, a static or class method), or
    None for anything else."""
    fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    return fn if inspect.isfunction(fn) and not hasattr(fn, "__wrapped__") else None


def _resolve(module_name, qualname):
    """(owner, attribute, what it holds) of ``module.qualname``: the owner a module or a
    class (a class's own dictionary, so that a static method is its staticmethod)."""
    owner = importlib.import_module(module_name)
    *path, attribute = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, attribute, (vars(owner)[attribute] if isinstance(owner, type)
                              else getattr(owner, attribute))


def _refusal(count):
    """The refusal's code with ``count`` free variables (a function's code can only be
    replaced by code of as many: a method that calls super() has one)."""
    names = [f"_{i}" for i in range(count)]
    body = [f"    {n} = None" for n in names] + ["    def refuse(*args, **kwargs):"]
    body += [f"        ({', '.join(names)},)"] if names else []
    body += [f"        raise RuntimeError({REFUSAL!r})", "    return refuse"]
    space = {}
    exec("\n".join(["def outer():", *body]), space)
    return space["outer"]().__code__


def _subclasses(cls):
    """Every class that inherits ``cls``, as they are now."""
    found, todo = [], [cls]
    while todo:
        for sub in type.__subclasses__(todo.pop()):
            if sub not in found:
                found.append(sub)
                todo.append(sub)
    return found


def private_code(pairs):
    """{"module:qualname": the marshalled code of each method of ``pairs``}, as the grader's
    package holds them (for a child whose package is `package_copy`'s)."""
    codes = {}
    for module_name, qualname in pairs:
        owner, _, raw = _resolve(module_name, qualname)
        if isinstance(owner, type):
            codes[f"{module_name}:{qualname}"] = marshal.dumps(_function(raw).__code__)
    return codes


def withhold(pairs, private=None, path=None):
    """Replace the code of each (module, qualname) function and method by a refusal, in this
    process; first, each class of the model's that inherits such a method gets a private
    copy (`private_copy`: the code from ``private``, as `private_code` gives it, where this
    process's package holds only refusals), refused while ``path``'s code is running."""
    for module_name, qualname in pairs:
        owner, attribute, raw = _resolve(module_name, qualname)
        fn = raw
        if isinstance(owner, type):
            fn = _function(raw)
            key = f"{module_name}:{qualname}"
            code = marshal.loads(private[key]) if private and key in private else fn.__code__
            standard = frozenset([owner, *_subclasses(owner)])
            for sub in standard - {owner}:
                if sub.__module__.startswith(MODEL) and attribute not in vars(sub) and \
                        inspect.getattr_static(sub, attribute) is raw:
                    copy = private_copy(fn, code, owner, raw, path, standard)
                    setattr(sub, attribute, copy)
        fn.__code__ = _refusal(len(fn.__code__.co_freevars))


def private_copy(fn, code, owner, raw, path, standard):
    """``fn`` run as ``code`` (a new function: ``fn`` itself is about to refuse), wrapped as
    ``raw`` is (static or class method), which refuses unless it runs for an object of the
    ``standard`` classes (a static method: for the ``self`` of its caller, if any), in the
    main thread, with no frame of the file ``path`` on the stack."""
    cells = tuple(types.CellType(owner) if name == "__class__" else None
                  for name in code.co_freevars)
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, cells)
    copy.__kwdefaults__, copy.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    kind = type(raw).__name__
    main, path = threading.main_thread(), path and os.path.abspath(path)

    def standard_only(*args, **kwargs):
        frame = sys._getframe(1)
        if kind == "staticmethod":
            mine = frame.f_locals.get("self", owner)
            mine = type(mine) if not isinstance(mine, type) else mine
        else:
            mine = args[0] if args and kind == "classmethod" else type(args[0]) if args \
                else None
        if running(path, frame) or mine not in standard or \
                threading.current_thread() is not main:
            raise RuntimeError(REFUSAL)
        return copy(*args, **kwargs)
    standard_only.__name__, standard_only.__qualname__ = fn.__name__, fn.__qualname__
    standard_only.__doc__ = fn.__doc__
    return type(raw)(standard_only) if kind in ("staticmethod", "classmethod") \
        else standard_only


def running(path, frame=None):
    """Whether a frame of the file ``path`` (absolute) is on this thread's stack, from
    ``frame`` (the caller's) down."""
    frame = frame or sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != path:
        frame = frame.f_back
    return frame is not None and path is not None


def standard_classes(forbids):
    """The classes of the methods in ``forbids`` and every class that inherits one, as they
    are before a student's file loads (after, the file's own are not among them)."""
    return frozenset(c for owner, _, _ in forbids if isinstance(owner, type)
                     for c in (owner, *_subclasses(owner)))


def _refusing_source(source, names):
    """``source`` with the bodies of its functions ``names`` (qualified names: ``f``, or
    ``Class.Nested.method``) replaced by a refusal (line numbers kept: the rest of the
    body's lines left blank)."""
    lines = source.splitlines(keepends=True)
    todo = [(node, "") for node in parse(source).body]
    while todo:
        node, prefix = todo.pop()
        if isinstance(node, ast.ClassDef):
            todo += [(child, f"{prefix}{node.name}.") for child in node.body]
        elif isinstance(node, ast.FunctionDef) and prefix + node.name in names:
            first, last = node.body[0].lineno, node.end_lineno
            if first == node.lineno:
                raise ValueError(f"{node.name}: a one-line function")
            indent = " " * node.body[0].col_offset
            lines[first - 1] = f"{indent}raise RuntimeError({REFUSAL!r})\n"
            for i in range(first, last):
                lines[i] = "\n"
    return "".join(lines)
def package_copy(pairs, package_dir):
    """A copy of the package at ``package_dir`` in which the functions ``pairs`` refuse (the
    files that define them rewritten and compiled again, their originals' compiled files
    left out); removed when the grader ends. Returns its folder."""
    root = tempfile.mkdtemp(prefix="dlstudio-package-")
    atexit.register(shutil.rmtree, root, True)
    copy = os.path.join(root, os.path.basename(package_dir))
    shutil.copytree(package_dir, copy)          # times kept: the compiled files stay valid
    by_file = {}
    for module_name, name in pairs:
        parts = module_name.split(".")[1:]
        path = os.path.join(copy, *parts) + ".py"
        if not os.path.isfile(path):
            path = os.path.join(copy, *parts, "__init__.py")
        by_file.setdefault(path, set()).add(name)
    for path, names in by_file.items():
        with open(path, encoding="utf-8") as f:
            source = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(_refusing_source(source, names))
        stem = os.path.splitext(os.path.basename(path))[0]
        cache = os.path.join(os.path.dirname(path), "__pycache__")
        for name in os.listdir(cache) if os.path.isdir(cache) else []:
            if name.startswith(stem + "."):          # the original's compiled file: gone
                os.remove(os.path.join(cache, name))
        compileall.compile_file(path, quiet=2)
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return copy
