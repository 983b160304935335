"""What a graded file's process goes without: the grader's own answers.

The checks compare a student's answers with references the grader computes: each exercise
module's ``reference`` functions (and bpe's ``reference_merges``), and the package's own
functions that an exercise asks the student to write (its ``forbids`` that are plain
functions of a module, such as ``architecture.scaled_dot_product``). `checking.forbidden`
switches the latter off by name while the student's code runs; a file can still reach a
function by another name (another module's import of it, an object found through ``gc``)
or run its source again from the file. So the process that answers for a student's file
does without them, in two layers:

- `withhold`, in that process before the student's file loads: each such function's code
  is replaced by one that raises, so that every name for it refuses;
- `package_copy`, for the bubblewrap sandbox: the package as the sandbox shows it, those
  functions' bodies replaced by the same refusal and no compiled file of the originals
  (made once per grading run, before any file's time starts), so that reading and running
  the source (importlib's spec_from_file_location) gives the refusing copy too. Without
  bubblewrap the package's files stay readable.

Methods (a head's ``forward``) are not withheld: the model a check builds runs the
standard ones beside the student's (`checking.forbidden` refuses them to the student's
classes only).
"""

import ast
import atexit
import compileall
import importlib
import inspect
import os
import shutil
import tempfile
import types

__all__ = ["targets", "withhold", "package_copy", "REFUSAL"]

REFUSAL = ("the grader's own answer, withheld while grading: write this part yourself in "
           "your file")


def _withheld(*args, **kwargs):
    # the message written out, not REFUSAL: this code runs as other modules' functions,
    # with their globals
    raise RuntimeError("the grader's own answer, withheld while grading: write this part "
                       "yourself in your file")


def targets(exercise):
    """(module, function name) of each function a graded file's process goes without: every
    exercise's references, and the module functions ``exercise`` forbids that are the
    package's own."""
    from . import NAMES
    found = set()
    for name in NAMES:
        module = importlib.import_module(f"{__package__}.{name}")
        for attr, value in vars(module).items():
            if attr.startswith("reference") and inspect.isfunction(value) and \
                    value.__module__ == module.__name__:
                found.add((module.__name__, attr))
    for owner, attribute, _ in exercise.forbids():
        fn = getattr(owner, attribute, None) if isinstance(owner, types.ModuleType) else None
        if inspect.isfunction(fn) and fn.__module__.startswith("DLStudio.") and \
                fn.__qualname__ == fn.__name__ and fn.__closure__ is None:
            found.add((fn.__module__, fn.__name__))
    return sorted(found)


def withhold(pairs):
    """Replace the code of each (module, name) function by a refusal, in this process."""
    for module_name, name in pairs:
        fn = getattr(importlib.import_module(module_name), name)
        fn.__code__ = _withheld.__code__


def _refusing_source(source, names):
    """``source`` with the bodies of its top-level functions ``names`` replaced by a
    refusal (line numbers kept: the rest of the body's lines left blank)."""
    lines = source.splitlines(keepends=True)
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
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
