"""The house the right way up: the architecture file reads in one sitting and needs only torch,
and every module imports only modules on its own floor or below, counting every import in it
(inside functions too), the way a reader of the code would count them."""

import ast
import glob
import importlib.util
import os
import sys

import pytest

from .conftest import ROOT

PACKAGE = os.path.join(ROOT, "DLStudio")
MODEL = os.path.join(PACKAGE, "model")
ARCHITECTURE = os.path.join(MODEL, "architecture.py")

#: The floors of ../shared/ARCHITECTURE.md, by the name of each room (a folder such as data/,
#: or a module) directly under DLStudio/. The package's door (__init__) loads each public
#: class the first time it is asked for; what it imports when it runs is floor 0.
FLOORS = {
    0: {"install_check", "quick"},                  # the front door's check, DLSTUDIO_QUICK:
                                                    # stdlib only
    1: {"model"},                                   # the architecture and its torch helpers
    2: {"data", "checkpoints", "runtime"},          # datasets, vocabularies; checkpoints;
                                                    # the device, processes, number format
    3: {"evaluation"},                              # decoding and scoring
    4: {"training"},                                # the trainer (it may score: evaluation)
    5: {"Transformers", "containers"},              # DLStudio's containers and their wiring
    6: {"cli", "museum", "examples", "exercises", "__main__"},   # scripts, exercises
}
FLOOR = {room: floor for floor, rooms in FLOORS.items() for room in rooms}
#: The modules directly in DLStudio/: the doors students know by name (the bug museum is
#: DLStudio.museum), the front door's check and DLSTUDIO_QUICK's limits (DLStudio/quick.py,
#: which the pages name); everything else is in its floor's folder.
DOORS = {"__init__.py", "__main__.py", "Transformers.py", "museum.py", "install_check.py",
         "quick.py"}


def room_of(path):
    """The room a file under DLStudio/ belongs to: its module, or its top package."""
    rel = os.path.relpath(path, PACKAGE).split(os.sep)
    return rel[0] if len(rel) > 1 else rel[0][:-3]


def imports(source, path, modules=None):
    """Every import of a file, wherever it stands (top level, functions, classes): the set of
    DLStudio rooms it reaches, and the set of other top-level modules it names (``modules``,
    a set, also gets the dotted name of every DLStudio module it imports)."""
    package = os.path.relpath(os.path.dirname(path), ROOT).split(os.sep)   # ["DLStudio", ...]
    rooms, others = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            names = base + (node.module.split(".") if node.module else [])
            targets = [names] if node.module else [names + [a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            targets = [node.module.split(".")]
        elif isinstance(node, ast.Import):
            targets = [a.name.split(".") for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
              and node.args and isinstance(node.args[0], ast.JoinedStr)):
            rooms.add("?dynamic")     # importlib.import_module(f"DLStudio.{...}"): anything
            continue
        else:
            continue
        for names in targets:
            if names[0] == "DLStudio" and len(names) > 1:
                rooms.add(names[1])
                if modules is not None:        # (from . import x: x may be a name, not a module)
                    is_name = (isinstance(node, ast.ImportFrom) and not node.module
                               and not exists(".".join(names)))
                    modules.add(".".join(names[:-1] if is_name else names))
            elif names[0] != "DLStudio":
                others.add(names[0])
    return rooms, others


def package_files():
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def upward_imports(files):
    """(file, room it imports, that room's floor) for each import that goes up a floor. The
    front door counts as floor 0 for what it imports when it runs; its ``__getattr__``
    loads the public classes when asked (importlib), which is its job."""
    found = []
    for path, source in files:
        room = room_of(path)
        if room == "__init__":
            room, source = "install_check", _top_level(source)     # floor 0: eager only
        reached, _ = imports(source, path)
        for other in reached - {room}:
            top_may = other == "?dynamic" and FLOOR[room] == max(FLOORS)   # the dispatcher
            if FLOOR.get(other, 99) > FLOOR[room] and not top_may:
                found.append((os.path.relpath(path, ROOT), other, FLOOR.get(other)))
    return found


def _top_level(source):
    """The statements a module runs when imported, functions' bodies left out."""
    tree = ast.parse(source)
    tree.body = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return ast.unparse(tree)


def read(path):
    return open(path, encoding="utf-8").read()


def test_every_module_has_a_floor():
    rooms = {room_of(p) for p in package_files()} - {"__init__"}
    assert rooms - set(FLOOR) == set(), "give each new module its floor in FLOORS"


def test_the_folder_listing_is_the_floors():
    listing = [n for n in os.listdir(PACKAGE) if not n.startswith((".", "__pycache__"))]
    files = {n for n in listing if os.path.isfile(os.path.join(PACKAGE, n))}
    folders = {n for n in listing if os.path.isdir(os.path.join(PACKAGE, n))}
    assert {f for f in files if f.endswith(".py")} == DOORS
    assert folders == {"model", "data", "checkpoints", "runtime", "training", "evaluation",
                       "containers", "cli", "examples", "exercises"}


def test_no_module_imports_a_floor_above_its_own_counting_imports_inside_functions():
    assert upward_imports((p, read(p)) for p in package_files()) == []


def test_every_import_of_ours_names_a_module_that_exists():
    missing = []
    for path in package_files():
        named = set()
        imports(read(path), path, named)
        missing += [(os.path.relpath(path, ROOT), m) for m in sorted(named) if not exists(m)]
    assert missing == []


def exists(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:                 # its package is missing too
        return False


@pytest.mark.slow
def test_importing_a_module_loads_nothing_from_a_floor_above_its_own():
    """In a fresh interpreter's state (torch kept, every DLStudio module forgotten), each
    module is imported and every DLStudio module that came with it is of its floor or
    below: the front door loads nothing, and no import runs up a floor at run time."""
    import json
    import subprocess
    modules = sorted(module_of(p) for p in package_files() if not p.endswith("__main__.py")
                     and os.path.isfile(os.path.join(os.path.dirname(p), "__init__.py")))
    code = ("import importlib, json, sys, torch\nloaded = {}\nfor m in sys.argv[1:]:\n"
            "    for k in [k for k in sys.modules if k.split('.')[0] == 'DLStudio']:\n"
            "        del sys.modules[k]\n    importlib.import_module(m)\n"
            "    loaded[m] = [k for k in sys.modules if k.startswith('DLStudio.')]\n"
            "print(json.dumps(loaded))\n")
    out = subprocess.run([sys.executable, "-c", code, *modules, "DLStudio"], cwd=ROOT,
                         text=True, capture_output=True, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)

    def floor(module):
        rest = module.split(".")[1:]
        return FLOOR[rest[0]] if rest else 0
    above = {m: sorted(k for k in found if floor(k) > floor(m)) for m, found in loaded.items()}
    assert {m: ks for m, ks in above.items() if ks} == {}
    assert loaded["DLStudio"] == ["DLStudio.install_check"]
    assert not [k for k in loaded["DLStudio.Transformers"] if k.startswith("DLStudio.cli")]


def test_the_layout_check_sees_an_import_hidden_inside_a_function():
    source = read(ARCHITECTURE) + "\n\ndef later():\n    from ..training import Trainer\n"
    assert upward_imports([(ARCHITECTURE, source)]) == [
        ("DLStudio/model/architecture.py", "training", 4)]
    trainer = os.path.join(PACKAGE, "training", "trainer.py")
    source = read(trainer) + "\n\nclass X:\n    def f(self):\n        import DLStudio.cli\n"
    assert ("DLStudio/training/trainer.py", "cli", 6) in upward_imports([(trainer, source)])


def module_of(path):
    names = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    return ".".join(names[:-1] if names[-1] == "__init__" else names)


def test_the_modules_import_one_another_without_a_cycle():
    graph = {}
    for path in package_files():
        if path == os.path.join(PACKAGE, "__init__.py"):
            continue
        named = set()
        imports(read(path), path, named)
        graph[module_of(path)] = named - {module_of(path), "DLStudio"}

    def reaches(start, target, seen=()):
        return any(n == target or (n not in seen and reaches(n, target, seen + (n,)))
                   for n in graph.get(start, ()))
    assert [module for module in graph if reaches(module, module)] == []


@pytest.mark.slow
def test_every_module_can_be_the_first_one_imported():
    """Python's own order: a package's __init__ runs before its modules, so a module that
    imports a sibling package can meet a module of its own package half made. Each module
    is imported first, in a fresh interpreter's state (torch kept, every DLStudio module
    forgotten)."""
    import subprocess
    modules = sorted(module_of(p) for p in package_files() if not p.endswith("__main__.py")
                     and os.path.isfile(os.path.join(os.path.dirname(p), "__init__.py")))
    code = ("import importlib, sys, torch\nfailed = []\nfor m in sys.argv[1:]:\n"
            "    for k in [k for k in sys.modules if k.split('.')[0] in "
            "('DLStudio', 'Transformers')]:\n        del sys.modules[k]\n"
            "    try:\n        importlib.import_module(m)\n"
            "    except Exception as e:\n        failed.append(f'{m}: {e}')\n"
            "print('\\n'.join(failed))\n")
    out = subprocess.run([sys.executable, "-c", code, *modules], cwd=ROOT, text=True,
                         capture_output=True, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout + out.stderr


def test_every_module_keeps_to_700_lines():
    """A cap is a design limit: a module that outgrows it gives code away to a room of its
    own (DLStudio/Transformers.py moved visTransformer's checks and BERT's masking out)."""
    long = [f"{os.path.relpath(path, ROOT)} ({len(read(path).splitlines())} lines)"
            for path in glob.glob(os.path.join(ROOT, "DLStudio", "**", "*.py"), recursive=True)
            if len(read(path).splitlines()) > 700]
    assert not long


def test_the_architecture_reads_in_one_sitting_and_needs_only_torch():
    source = read(ARCHITECTURE)
    assert len(source.splitlines()) <= 700       # the batched heads live beside the cache
    rooms, others = imports(source, ARCHITECTURE)
    assert rooms <= {"model"}                # its own folder's helpers, no other floor
    assert {m for m in others if m not in sys.stdlib_module_names} == {"torch"}
    for helper in os.listdir(MODEL):         # and the helpers need only torch too
        if helper.endswith(".py"):
            path = os.path.join(MODEL, helper)
            helper_rooms, helper_others = imports(read(path), path)
            assert helper_rooms <= {"model"}, helper
            assert {m for m in helper_others if m not in sys.stdlib_module_names} <= {"torch"}
    long_functions = [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)"
                      for n in ast.walk(ast.parse(source))
                      if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 40]
    assert long_functions == []


def test_the_architecture_reads_no_file_and_makes_no_optimiser_or_vocabulary():
    called = {getattr(n.func, "attr", getattr(n.func, "id", None))
              for n in ast.walk(ast.parse(read(ARCHITECTURE))) if isinstance(n, ast.Call)}
    assert called & {"open", "load", "save", "Adam", "AdamW", "SGD", "adam", "Vocabulary",
                     "build_vocabulary", "load_corpus", "read_corpus", "backward"} == set()


def test_the_nested_classes_are_in_the_lecture_s_order():
    source = read(ARCHITECTURE)
    order = ["EmbeddingsGenerator", "AttentionHead", "SelfAttention", "FeedForward",
             "BasicEncoder", "MasterEncoder", "CrossAttentionHead", "CrossAttention",
             "BasicDecoderWithMasking", "MasterDecoderWithMasking", "EncoderDecoder",
             "GPTParts"]
    where = [source.index(f"class {name}(") for name in order]
    assert where == sorted(where)
