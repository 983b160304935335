"""The model file is the model: it reads in one sitting, needs only torch, and sits below the
trainer in the import graph (the house the right way up)."""

import ast
import os
import subprocess
import sys

from .conftest import ROOT

MODEL = os.path.join(ROOT, "DLStudio", "Transformers.py")


def package_imports(path):
    """The DLStudio modules a file imports at its top level (not inside functions)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.add((node.module or "").split(".")[0] or node.names[0].name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if module and module.startswith("DLStudio."):
                found.add(module.split(".")[1])
    return found


def test_the_model_file_reads_in_one_sitting():
    source = open(MODEL, encoding="utf-8").read()
    # 900 lines held the translation models and visTransformer; the GPT adds its container
    # (built of their classes: no attention code of its own) and its delegates.
    assert len(source.splitlines()) <= 1075
    long_functions = [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)"
                      for n in ast.walk(ast.parse(source))
                      if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 40]
    assert long_functions == []


def test_importing_the_model_loads_nothing_but_torch_and_its_small_helpers():
    code = ("import sys, DLStudio.Transformers; print(' '.join(sorted(m for m in sys.modules "
            "if m.startswith('DLStudio'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    loaded = set(out.stdout.split()) - {"DLStudio", "DLStudio.DLStudio",
                                         "DLStudio.install_check"}
    assert loaded == {"DLStudio.Transformers", "DLStudio.kv_cache", "DLStudio.overrides",
                      "DLStudio.distributed",
                      "DLStudio.schedule", "DLStudio.tokens"}, out.stderr


def test_the_import_graph_has_no_cycle_and_the_trainer_sits_above_the_model():
    folder = os.path.join(ROOT, "DLStudio")
    graph = {name[:-3]: package_imports(os.path.join(folder, name))
             for name in os.listdir(folder) if name.endswith(".py")}
    assert "Transformers" not in set().union(*(graph[m] for m in (
        "training", "evaluation", "checkpoints", "vocabulary", "tokens", "kv_cache",
        "overrides", "schedule", "generation")))
    for lower in ("training", "evaluation", "checkpoints", "vocabulary", "datasets",
                  "experiments", "cli", "generation"):
        assert lower not in graph["Transformers"]

    def reaches(start, target, seen=()):
        return any(n == target or (n not in seen and reaches(n, target, seen + (n,)))
                   for n in graph.get(start, ()))
    assert [m for m in graph if reaches(m, m)] == []
