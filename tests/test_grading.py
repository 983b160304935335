"""A grader an instructor can trust: the verdicts are the grader's, never the submission's.

Hostile submissions, each with the outcome it must get: a results file written before an
early exit, results forged from atexit, a flood of binary output, a process that outlives
its file, reading the instructor's files, writing outside its folder, the network, an honest
file named like a standard module, a hang, memory filled, a kill. Then the places grades go:
the CSV, Gradescope's results.json and autograder, one check for GitHub Classroom; and the
solutions and mutants, graded, give the verdicts they give in the student's own process.

The sandbox tests need bubblewrap; they are skipped without it, unless
DLSTUDIO_SANDBOX_TESTS=required (as .ci/run sets), where they fail instead."""

import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import zipfile

import pytest

from DLStudio.exercises import NAMES, exercise
from DLStudio.exercises.checking import run_checks
from DLStudio.exercises.grading import grade_file, grade_folder
from DLStudio.exercises.sandbox import Sandbox

from .conftest import ROOT
from .test_exercises import MUTANTS, solution

ATTENTION = solution("attention")
NO_SCALING = ATTENTION.replace(" / math.sqrt(Q.size(-1))", "")     # honest: 3 of 7
SANDBOX = Sandbox.find()
needs_sandbox = pytest.mark.skipif(
    SANDBOX.kind != "bwrap" and os.environ.get("DLSTUDIO_SANDBOX_TESTS") != "required",
    reason="bubblewrap (bwrap) cannot make a sandbox here: apt-get install bubblewrap")


def before(code, source=ATTENTION):
    """``source`` with ``code`` run first, at import."""
    return code + "\n" + source


def inside(code, source=ATTENTION):
    """``source`` whose scaled_dot_product runs ``code`` first."""
    return source.replace("    scores = Q @ K", code + "\n    scores = Q @ K")


def earned(grade):
    return sum(r.passed for r in grade.results)


def graded(tmp_path, files, **options):
    """{file name: Grade} of these sources, graded as a folder, two at a time."""
    folder = tmp_path / "submitted"
    folder.mkdir(exist_ok=True)
    for name, source in files.items():
        (folder / name).write_text(source)
    options.setdefault("timeout", 60)
    return {g.file: g for g in grade_folder(exercise("attention"),
                                            [str(folder / n) for n in files], seed=3, jobs=2,
                                            sandbox=SANDBOX, **options)}


# ---------------------------------------------------------------------------------------
# No submission can forge its grade (these four run in the quick suite).
RESULTS = "[{'name': n, 'passed': True} for n in ('shapes', 'softmax_rows', 'scaling', " \
          "'output', 'mask', 'any_leading_dims', 'in_a_model')]"


@pytest.fixture(scope="module")
def forgers(tmp_path_factory):
    return graded(tmp_path_factory.mktemp("forgers"), {
        "writes_and_exits.py": before(f"import json, os\njson.dump({RESULTS}, "
                                      "open('results.json', 'w'))\nprint('7 of 7')\n"
                                      "os._exit(0)", "def scaled_dot_product(Q, K, V, "
                                      "mask=None):\n    return Q, K\n"),
        "forges_at_exit.py": before(f"import atexit, json\natexit.register(lambda: json.dump("
                                    f"{RESULTS}, open('results.json', 'w')))", NO_SCALING),
        "random.py": ATTENTION,
        "kills_itself.py": inside("    import os, signal\n    os.kill(os.getpid(), "
                                  "signal.SIGKILL)")})


def test_a_file_that_writes_results_and_exits_earns_nothing(forgers):
    g = forgers["writes_and_exits.py"]
    assert earned(g) == 0 and g.status.startswith("crashed: ended before it answered")
    assert all("ended before it answered any question (exit status 0)" in r.message
               for r in g.results)


def test_results_forged_at_exit_earn_what_the_functions_compute(forgers):
    g = forgers["forges_at_exit.py"]
    assert g.status == "checked" and earned(g) == 3                 # as its honest answers
    assert [r.name for r in g.results if r.passed] == ["shapes", "softmax_rows", "in_a_model"]


def test_an_honest_file_named_like_a_standard_module_is_graded_like_any(forgers):
    assert forgers["random.py"].status == "checked" and earned(forgers["random.py"]) == 7


def test_a_file_killed_by_a_signal_is_a_row_with_its_reason(forgers):
    g = forgers["kills_itself.py"]
    assert earned(g) == 0 and "killed by SIGKILL" in g.status
    assert "killed by SIGKILL" in g.results[0].message


# ---------------------------------------------------------------------------------------
# No file stops the others, sees what it must not, or reaches out (slow: make test-all).
@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    secret = root / "solutions.txt"                # beside the submissions folder
    secret.write_text("THE-INSTRUCTORS-SECRET")
    outside = root / "written_outside.txt"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    grades = graded(root, {
        "floods.py": before("import sys\nsys.stdout.buffer.write(bytes(range(256)) * 400_000)"
                            "\nsys.stdout.flush()\nimport os\nos._exit(3)"),
        "outlives.py": before("import os, sys\nif os.fork() == 0:\n    os.execv(sys.executable,"
                              " [sys.executable, '-c', 'import time; time.sleep(60)', "
                              "'DLSTUDIO-OUTLIVER'])"),
        "reads.py": inside(f"    raise RuntimeError(open({str(secret)!r}).read())"),
        "writes.py": before(f"try:\n    open({str(outside)!r}, 'w').write('x')\n"
                            "except OSError:\n    pass"),
        "connects.py": before(f"import socket\ntry:\n    socket.create_connection(('127.0.0.1',"
                              f" {port}), timeout=2).sendall(b'hello')\nexcept OSError:\n"
                              "    pass"),
        "hangs.py": inside("    while True:\n        pass"),
        "fills_memory.py": inside("    hog = [bytearray(10 ** 10) for _ in range(100)]"),
        "honest.py": ATTENTION}, timeout=8, memory_mb=1500)
    try:
        connection = listener.accept()[0]
        connection.close()
        reached = True
    except OSError:
        reached = False
    listener.close()
    return grades, secret, outside, reached


#: Files that fetch the grader's own answer, each by a way round checking.forbidden's names.
FETCHERS = {
    "imports_the_graders.py": "from DLStudio.exercises.attention import reference as _r\n"
                              "def scaled_dot_product(Q, K, V, mask=None):\n"
                              "    return _r(Q, K, V, mask)\n",
    "another_modules_name.py": "import sys\n"
                               "def scaled_dot_product(Q, K, V, mask=None):\n"
                               "    for m in list(sys.modules.values()):\n"
                               "        f = getattr(m, 'scaled_' + 'dot_product', None)\n"
                               "        if getattr(f, '__module__', '') == "
                               "'DLStudio.model.architecture':\n"
                               "            try:\n"
                               "                return f(Q, K, V, mask)\n"
                               "            except Exception:\n"
                               "                pass\n",
    "through_gc.py": "import gc\n"
                     "def scaled_dot_product(Q, K, V, mask=None):\n"
                     "    for o in gc.get_objects():\n"
                     "        if callable(o) and getattr(o, '__qualname__', '') == "
                     "'scaled_' + 'dot_product' and getattr(o, '__module__', '') == "
                     "'DLStudio.model.architecture':\n"
                     "            try:\n"
                     "                return o(Q, K, V, mask)\n"
                     "            except Exception:\n"
                     "                pass\n",
    "runs_the_source_again.py": "import importlib.util, os, DLStudio\n"
                                "def scaled_dot_product(Q, K, V, mask=None):\n"
                                "    path = os.path.join(os.path.dirname(DLStudio.__file__), "
                                "'model', 'architecture.py')\n"
                                "    spec = importlib.util.spec_from_file_location('copy', path)\n"
                                "    m = importlib.util.module_from_spec(spec)\n"
                                "    spec.loader.exec_module(m)\n"
                                "    return getattr(m, 'scaled_' + 'dot_product')(Q, K, V, mask)\n",
}


@pytest.mark.slow
@needs_sandbox
def test_a_file_finds_no_answer_of_the_graders_however_it_looks(tmp_path):
    """The grader's references and the package's own scaled_dot_product, fetched by import,
    through another module's name, through gc, or by running the package's source again:
    each refuses in the graded file's process (before: 7 of 7 each, three without a flag)."""
    head = ATTENTION[:ATTENTION.index("def scaled_dot_product")]
    tail = ATTENTION[ATTENTION.index("class MyHead"):]
    grades = graded(tmp_path, {**{name: head + code + "\n\n" + tail
                                  for name, code in FETCHERS.items()}, "honest.py": ATTENTION})
    assert earned(grades["honest.py"]) == 7
    for name in FETCHERS:
        assert earned(grades[name]) == 0, (name, [r.message for r in grades[name].results])
    assert "withheld while grading" in grades["imports_the_graders.py"].results[0].message
    assert "reference:DLStudio.exercises" in grades["imports_the_graders.py"].flags


@pytest.mark.slow
def test_a_flood_of_binary_output_stops_neither_the_file_nor_the_others(hostile):
    grades = hostile[0]
    g = grades["floods.py"]
    assert g.status.startswith("crashed: ended before it answered any question (exit status 3)")
    assert len(g.output) <= 64 * 1024 and earned(grades["honest.py"]) == 7


@pytest.mark.slow
@needs_sandbox
def test_a_process_a_file_starts_ends_with_it(hostile):
    assert earned(hostile[0]["outlives.py"]) == 7
    left = subprocess.run(["pgrep", "-f", "DLSTUDIO-OUTLIVER"], capture_output=True)
    assert left.returncode == 1, left.stdout


@pytest.mark.slow
@needs_sandbox
def test_a_file_sees_nothing_of_the_instructors(hostile):
    grades, secret, _, _ = hostile
    messages = " ".join(r.message for r in grades["reads.py"].results)
    assert "THE-INSTRUCTORS-SECRET" not in messages + grades["reads.py"].output
    assert "No such file or directory" in messages


@pytest.mark.slow
@needs_sandbox
def test_a_file_writes_nowhere_but_its_own_folder(hostile):
    assert not hostile[2].exists() and earned(hostile[0]["writes.py"]) == 7


@pytest.mark.slow
@needs_sandbox
def test_a_file_reaches_no_network(hostile):
    assert not hostile[3] and earned(hostile[0]["connects.py"]) == 7


@pytest.mark.slow
def test_a_hang_is_stopped_and_memory_filled_is_a_failed_check(hostile):
    grades = hostile[0]
    assert grades["hangs.py"].status == "stopped after 8 s" and earned(grades["hangs.py"]) == 0
    g = grades["fills_memory.py"]
    assert g.status == "checked" and earned(g) == 0 and "MemoryError" in g.results[0].message


# ---------------------------------------------------------------------------------------
# No answer or child stalls the grader (issue 49, item 3; slow: make test-all).
#: A file that swaps what its process answers for ``VALUE`` (an expression), on the wire.
SENDS = ("import torch\nimport DLStudio.exercises.answering as _a\n_write = _a.write_message\n"
         "def _sends(fd, message, *args):\n"
         "    if 'value' in message:\n"
         "        message = {{'value': {value}}}\n"
         "    _write(fd, message, *args)\n"
         "_a.write_message = _sends\n")
#: A file whose process answers the grader's first message, shrinks its request pipe to one
#: page and never reads again: the grader's next write (a question's inputs) cannot finish.
STOPS_READING = ("import fcntl, time\nimport DLStudio.exercises.answering as _a\n"
                 "_read, _calls = _a.read_message, []\n"
                 "def _reads(fd, *args):\n"
                 "    _calls.append(1)\n"
                 "    if len(_calls) > 1:\n"
                 "        time.sleep(3600)\n"
                 "    fcntl.fcntl(fd, 1031, 4096)\n"          # F_SETPIPE_SZ
                 "    return _read(fd, *args)\n"
                 "_a.read_message = _reads\n")


def in_a_thread(fn, limit=120):
    """``fn()``'s result, or a failed test when it has not returned within ``limit`` s (the
    grader stalled: without the fix this test would hang for good)."""
    import threading
    found = []
    thread = threading.Thread(target=lambda: found.append(fn()), daemon=True)
    thread.start()
    thread.join(limit)
    assert found, f"the grader did not return within {limit} s"
    return found[0]


def graded_one(tmp_path, source, name="hostile.py", timeout=8, **options):
    path = tmp_path / name
    path.write_text(source)
    return grade_file(exercise("attention"), str(path), seed=3, timeout=timeout,
                      sandbox=SANDBOX, **options)


@pytest.mark.slow
def test_a_child_that_stops_reading_is_stopped_at_its_time(tmp_path):
    g = in_a_thread(lambda: graded_one(tmp_path, before(STOPS_READING), timeout=5))
    assert g.status == "stopped after 5 s" and earned(g) == 0


@pytest.mark.slow
def test_a_view_larger_than_its_storage_costs_only_its_own_process(tmp_path):
    """A stride-0 view of 10^15 numbers held in 8 bytes: on the wire a tensor is its numbers,
    so the file's own process runs out making them; the grader computes nothing with it."""
    import time
    huge = "torch.zeros(1, dtype=torch.float64).expand(2, 2, 4, 10 ** 14)"
    start = time.monotonic()
    g = graded_one(tmp_path, before(SENDS.format(value=f"({huge}, {huge})")))
    assert time.monotonic() - start < 60 and earned(g) == 0
    assert "your file's process ended" in g.results[0].message


@pytest.mark.slow
def test_nested_answers_that_share_references_are_read_within_a_budget(tmp_path):
    import time
    nested = "(lambda x: [x.__setitem__(0, [x[0], x[0]]) for _ in range(23)] and x[0])([[]])"
    start = time.monotonic()
    g = graded_one(tmp_path, before(SENDS.format(value=nested)))
    assert time.monotonic() - start < 60 and earned(g) == 0     # (its process pays for the
    message = g.results[0].message                              # tree, or the grader refuses)
    assert "more than 200,000 values" in message or message == "no answer within the time limit"


@pytest.mark.slow
def test_long_strings_in_answers_are_cut(tmp_path):
    g = graded_one(tmp_path, before(SENDS.format(value="'x' * 10 ** 6")))
    assert earned(g) == 0 and max(len(r.message) for r in g.results) < 5_000


@pytest.mark.slow
def test_a_files_time_does_not_run_while_it_waits_for_its_turn(tmp_path):
    """Another file's check holds the turn (here: the test, for longer than this file's
    whole time); the honest file's time runs only while it is asked, so it earns 7 of 7."""
    import threading
    import time

    from DLStudio.exercises import checking
    checking._TURNS.acquire()
    released = threading.Timer(20, checking._TURNS.release)   # (its own work: ~5 s on a
    released.start()                                          # slow 2-core machine, busy)
    start = time.monotonic()
    g = in_a_thread(lambda: graded_one(tmp_path, ATTENTION, name="honest.py", timeout=15))
    assert time.monotonic() - start >= 20
    assert g.status == "checked" and earned(g) == 7


# ---------------------------------------------------------------------------------------
# Where the grades go.
def dlstudio(*args):
    """``dlstudio ARGS`` in a process of its own: (exit status, stdout, stderr)."""
    out = subprocess.run([sys.executable, "-m", "DLStudio", *args], capture_output=True,
                         text=True, timeout=600, env=dict(os.environ, PYTHONPATH=ROOT))
    return out.returncode, out.stdout, out.stderr


@pytest.fixture
def command(capsys):
    """``dlstudio ARGS`` in this process (the files it grades still run in children)."""
    from DLStudio.cli import main

    def run(*args):
        status = main(list(args))
        out = capsys.readouterr()
        return status, out.out, out.err
    return run


def test_gradescope_results_and_the_csv_give_the_same_points(tmp_path, command):
    path = tmp_path / "attention.py"
    path.write_text(NO_SCALING)
    status, _, err = command("check", "attention", str(path), "--gradescope",
                             str(tmp_path / "r.json"), "--points", "in_a_model=3",
                             "--visibility", "scaling=hidden", "--seed", "9")
    assert status == 0, err
    results = json.loads((tmp_path / "r.json").read_text())
    tests = {t["name"]: t for t in results["tests"]}
    assert results["score"] == 5.0 and results["extra_data"]["seed"] == 9
    assert tests["in_a_model"] == {"name": "in_a_model", "score": 3.0, "max_score": 3.0,
                                   "status": "passed", "output": "", "visibility": "visible"}
    assert tests["scaling"]["status"] == "failed" and tests["scaling"]["visibility"] == "hidden"
    assert "sqrt(s_qkv)" in tests["scaling"]["output"]
    assert "dlstudio bug_museum --exhibit no_scaling" in tests["scaling"]["output"]
    status, _, err = command("check", "attention", "--submissions", str(tmp_path), "--csv",
                             str(tmp_path / "g.csv"), "--points", "in_a_model=3", "--seed", "9")
    assert status == 0, err
    row = next(csv.DictReader(open(tmp_path / "g.csv")))
    assert float(row["total"]) == 5.0 and row["seed"] == "9" and row["scaling"] == "0"


def test_only_one_check_exits_by_its_verdict_for_classroom(tmp_path, command):
    path = tmp_path / "attention.py"
    path.write_text(NO_SCALING)
    assert command("check", "attention", str(path), "--only", "shapes")[0] == 0
    status, out, _ = command("check", "attention", str(path), "--only", "scaling")
    assert status == 1 and "FAIL  scaling" in out
    forged = tmp_path / "forged.py"
    forged.write_text(before("import os\nos._exit(0)"))
    status, out, _ = command("check", "attention", str(forged), "--only", "shapes")
    assert status == 1 and "ended before it answered" in out


@needs_sandbox
@pytest.mark.parametrize("how", ["--seed", "under a submissions folder", "--sandbox"])
def test_check_runs_a_student_s_file_in_the_sandbox_unless_trusted(tmp_path, capsys, how):
    """The command results.json names (check NAME FILE --seed S), a file under a folder of
    submissions, or --sandbox: the file runs in the sandbox (what it writes outside stays
    out); --trust runs it in this process, as the one who runs it."""
    from DLStudio.cli import main
    escaped = tmp_path / "escaped.txt"
    folder = tmp_path / ("submissions" if how == "under a submissions folder" else "mine")
    folder.mkdir()
    path = folder / "attention.py"
    path.write_text(before(f"try:\n    open({str(escaped)!r}, 'w').write('x')\n"
                           "except OSError:\n    pass"))
    flags = {"--seed": ["--seed", "7"], "--sandbox": ["--sandbox"]}.get(how, [])
    assert main(["check", "attention", str(path), *flags]) == 0
    out = capsys.readouterr().out
    assert "in the sandbox" in out and "7 of 7 checks pass" in out
    assert not escaped.exists()
    assert main(["check", "attention", str(path), *flags, "--trust"]) == 0
    assert escaped.exists() and "in the sandbox" not in capsys.readouterr().out
    assert main(["check", "attention", str(path), *flags, "--train"]) == 1
    assert "give --trust" in capsys.readouterr().err


def test_where_no_sandbox_exists_check_says_so_and_asks_for_trust(tmp_path, capsys,
                                                                  monkeypatch):
    from DLStudio.cli import main
    monkeypatch.setattr(Sandbox, "find", classmethod(lambda cls, *a, **k: cls(
        "none", "no sandbox (bubblewrap (bwrap) is not installed): the students' code runs "
                "with the grader's rights")))
    path = tmp_path / "attention.py"
    path.write_text(ATTENTION)
    assert main(["check", "attention", str(path), "--seed", "7"]) == 1
    err = capsys.readouterr().err
    assert "this machine has none" in err and "give --trust" in err
    assert main(["check", "attention", str(path), "--seed", "7", "--trust"]) == 0


@needs_sandbox
def test_results_json_says_its_command_runs_in_the_sandbox(tmp_path):
    from DLStudio.cli import main
    path = tmp_path / "attention.py"
    path.write_text(ATTENTION)
    assert main(["check", "attention", str(path), "--gradescope", str(tmp_path / "r.json"),
                 "--seed", "3"]) == 0
    said = json.loads((tmp_path / "r.json").read_text())["output"]
    assert "--seed 3 gives the same checks, in the sandbox" in said and "--trust" in said


@needs_sandbox
def test_a_grading_row_is_reproduced_by_check_with_its_seed(tmp_path, capsys):
    from DLStudio.cli import main
    path = tmp_path / "attention.py"
    path.write_text(NO_SCALING)
    g = grade_file(exercise("attention"), str(path), seed=123, sandbox=SANDBOX)
    assert main(["check", "attention", str(path), "--seed", "123"]) == 1
    out = capsys.readouterr().out
    assert "inputs of seed 123" in out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("  ok")] == \
        [r.name for r in g.results if r.passed]


@needs_sandbox          # run_autograder grades with --require-sandbox
def test_the_autograder_grades_a_submission_laid_out_as_gradescope_does(tmp_path, command):
    wheel = tmp_path / "DLStudio_Transformers-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"a wheel")
    status, _, err = command("autograder", "attention", "--out", str(tmp_path / "ag.zip"),
                             "--wheel", str(wheel), "--points", "mask=3")
    assert status == 0, err
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "ag.zip") as z:
        assert sorted(z.namelist()) == sorted(["setup.sh", "run_autograder", wheel.name])
        z.extractall(root / "source")
    assert f"pip3 install /autograder/source/{wheel.name}" in \
        (root / "source" / "setup.sh").read_text()
    (root / "submission").mkdir()
    (root / "submission" / "attention.py").write_text(ATTENTION)
    bin_dir = tmp_path / "bin"                      # python3: this environment's
    bin_dir.mkdir()
    # python3: this environment's; it records its arguments and, as the package is not
    # installed in it, runs without -I (which would ignore PYTHONPATH)
    (bin_dir / "python3").write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/args"\n'
                                     f'[ "$1" = "-I" ] && shift\nexec "{sys.executable}" -s "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], text=True,
                          capture_output=True, timeout=300,
                          env=dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHONPATH=ROOT,
                                   PATH=f"{bin_dir}:{os.environ['PATH']}"))
    assert done.returncode == 0, done.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 9.0 and len(results["tests"]) == 7
    args = (tmp_path / "args").read_text().split()
    assert args[:3] == ["-I", "-m", "DLStudio"] and "--require-sandbox" in args


@pytest.mark.slow
def test_the_autograder_carries_a_wheel_built_from_the_clone(tmp_path):
    status, _, err = dlstudio("autograder", "bpe", "--out", str(tmp_path / "ag.zip"))
    assert status == 0, err
    with zipfile.ZipFile(tmp_path / "ag.zip") as z:
        wheel = next(n for n in z.namelist() if n.endswith(".whl"))
        z.extract(wheel, tmp_path)
    with zipfile.ZipFile(tmp_path / wheel) as w:
        assert "DLStudio/exercises/grading.py" in w.namelist()


@pytest.mark.slow
def test_a_folder_of_submissions_is_read_as_entries_not_trusted_paths(tmp_path, command):
    """Issue 49, item 4: only regular files are read; a link, a folder, a FIFO or a device
    named *.py is a row saying what it is; odd names are rows, escaped."""
    private = tmp_path / "private.txt"
    private.write_text("THE-PRIVATE-FIRST-LINE\n")
    answer = tmp_path / "instructors_solution.py"
    answer.write_text(ATTENTION)
    folder = tmp_path / "submitted"
    folder.mkdir()
    (folder / "honest.py").write_text(NO_SCALING)
    (folder / "solution_link.py").symlink_to(answer)
    (folder / "private_link.py").symlink_to(private)
    (folder / "dangling.py").symlink_to(tmp_path / "nothing")
    (folder / "zero.py").symlink_to("/dev/zero")
    (folder / "a_folder.py").mkdir()
    os.mkfifo(folder / "fifo.py")
    os.close(os.open(folder / "=HYPERLINK(1).py", os.O_CREAT | os.O_WRONLY))
    (folder / "two\nlines.py").write_text(NO_SCALING)
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.py"), "w") as f:   # not UTF-8
        f.write(NO_SCALING)
    status, out, err = in_a_thread(lambda: command(
        "check", "attention", "--submissions", str(folder), "--csv", str(tmp_path / "g.csv"),
        "--seed", "4", "--timeout", "20"), limit=300)
    assert status == 0, err
    text = (tmp_path / "g.csv").read_text(encoding="utf-8")
    rows = {r["file"]: r for r in csv.DictReader(text.splitlines())}
    assert len(rows) == 10 and "THE-PRIVATE-FIRST-LINE" not in text + out
    assert float(rows["honest.py"]["total"]) == 3
    for name, what in (("solution_link.py", "a symbolic link"),
                       ("private_link.py", "a symbolic link"), ("dangling.py", "a symbolic link"),
                       ("zero.py", "a symbolic link"), ("a_folder.py", "a folder"),
                       ("fifo.py", "a FIFO")):
        assert rows[name]["status"].startswith(f"not graded: {what}"), name
        assert float(rows[name]["total"]) == 0
    assert float(rows["caf\\xe9.py"]["total"]) == 3                 # its name escaped
    assert "'=HYPERLINK(1).py" in rows                   # no formula in a spreadsheet
    assert "two\\nlines.py" in out and float(rows["two\\nlines.py"]["total"]) == 3


def test_gradescope_reads_no_link_in_the_submission(tmp_path, command):
    private = tmp_path / "private.txt"
    private.write_text("THE-PRIVATE-FIRST-LINE\n")
    for target in (private, tmp_path / "instructors_solution.py"):
        (tmp_path / "instructors_solution.py").write_text(ATTENTION)
        submission = tmp_path / f"submission_{target.stem}"
        submission.mkdir()
        (submission / "attention.py").symlink_to(target)
        status, _, err = command("check", "attention", str(submission), "--gradescope",
                                 str(tmp_path / "r.json"))
        assert status == 0, err
        text = (tmp_path / "r.json").read_text()
        results = json.loads(text)
        assert results["score"] == 0 and "not graded: a symbolic link" in results["output"]
        assert "THE-PRIVATE-FIRST-LINE" not in text


#: A correct attention of another hand: alike in what it computes, not in how it is written.
OTHER_HAND = ATTENTION.replace(
    ATTENTION[ATTENTION.index("def scaled_dot_product"):ATTENTION.index("class MyHead")],
    "def scaled_dot_product(Q, K, V, mask=None):\n"
    "    d = Q.shape[-1]\n"
    "    logits = torch.matmul(Q, K.transpose(-1, -2)) * d ** -0.5\n"
    "    if mask is not None:\n"
    "        logits = logits.masked_fill(mask, -math.inf)\n"
    "    attn = logits.softmax(-1)\n"
    "    return torch.matmul(attn, V), attn\n\n")
#: The package's attention kept in a default argument, where the checks' switch cannot reach.
KEPT_DEFAULT = ATTENTION.replace(
    ATTENTION[ATTENTION.index("def scaled_dot_product"):ATTENTION.index("class MyHead")],
    "import DLStudio.model.architecture as arch\n\n"
    "def scaled_dot_product(Q, K, V, mask=None, _mine=arch.scaled_dot_product):\n"
    "    return _mine(Q, K, V, mask)\n\n")


@pytest.mark.slow
def test_flags_tell_the_instructor_without_changing_a_score(tmp_path, command):
    """reference:NAME for a file that keeps the package's attention in a default argument
    (the flag informs; the function it kept refuses in its process, withheld.py, so it
    earns nothing); similar:FILE for two files whose own code is the same but for its
    names."""
    renamed = ATTENTION.replace("scores", "s").replace("Q, K, V, mask=None", "q, k, v, m=None")
    folder = tmp_path / "submitted"
    folder.mkdir()
    for name, source in (("ana.py", ATTENTION), ("ben.py", renamed),
                         ("cleo.py", OTHER_HAND), ("dan.py", KEPT_DEFAULT)):
        (folder / name).write_text(source)
    status, out, err = command("check", "attention", "--submissions", str(folder), "--csv",
                               str(tmp_path / "g.csv"), "--seed", "5", "--jobs", "2")
    assert status == 0, err
    rows = {r["file"]: r for r in csv.DictReader(open(tmp_path / "g.csv"))}
    assert rows["ana.py"]["flags"] == "similar:ben.py"
    assert rows["ben.py"]["flags"] == "similar:ana.py"
    assert rows["cleo.py"]["flags"] == "" and float(rows["cleo.py"]["total"]) == 7
    assert rows["dan.py"]["flags"] == "reference:scaled_dot_product"
    assert float(rows["ana.py"]["total"]) == 7
    assert float(rows["dan.py"]["total"]) == 0 and "flags inform" in out
    path = tmp_path / "dan" / "attention.py"
    path.parent.mkdir()
    path.write_text(KEPT_DEFAULT)
    assert command("check", "attention", str(path.parent), "--gradescope",
                   str(tmp_path / "r.json"))[0] == 0
    tests = {t["name"]: t for t in json.loads((tmp_path / "r.json").read_text())["tests"]}
    flags = tests["flags (for the instructor)"]
    assert flags["visibility"] == "hidden" and flags["max_score"] == 0
    assert flags["output"].startswith("reference:scaled_dot_product")


def test_the_solutions_and_skeletons_raise_no_flag_and_the_packages_own_parts_do():
    from DLStudio.exercises import skeleton_path
    from DLStudio.exercises.flags import reference_flags

    from .test_exercises import OWN
    for name in NAMES:
        for source in (solution(name), open(skeleton_path(name)).read()):
            assert reference_flags(exercise(name), source) == [], name
    for name, code in OWN.items():
        if "import" in code or " = " in code:          # (a `del` is the runtime guard's)
            assert reference_flags(exercise(name), code), name


def test_without_bubblewrap_the_grader_says_what_it_does_instead(tmp_path, monkeypatch):
    from DLStudio.exercises.sandbox import SandboxError
    monkeypatch.setattr(shutil, "which", lambda name: None)
    found = Sandbox.find()
    assert found.kind in ("user", "none") and "bubblewrap (bwrap) is not installed" in found.says
    if found.kind == "user":              # root: a user of its own per file is accepted
        assert Sandbox.find(require=True).kind == "user"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)   # not root: the grader's own rights
    assert Sandbox.find().kind == "none"
    with pytest.raises(SandboxError, match="--require-sandbox"):
        Sandbox.find(require=True)


# ---------------------------------------------------------------------------------------
# Without bubblewrap, as root: each file a user of its own (issue 49, item 5).
#: At import, look for the other files' folders for a few seconds and try to write there.
WRITES_OTHERS = ("import glob, os, tempfile, time\n"
                 "_mine, _found, _wrote = os.getcwd(), set(), 0\n"
                 "_end = time.time() + 20\n"
                 "while time.time() < _end and not _found:\n"
                 "    for _d in glob.glob(tempfile.gettempdir() + '/dlstudio-grade-*'):\n"
                 "        if os.path.realpath(_d) != os.path.realpath(_mine):\n"
                 "            _found.add(_d)\n"
                 "            try:\n"
                 "                open(os.path.join(_d, 'planted.py'), 'w').write('x')\n"
                 "                _wrote += 1\n"
                 "            except OSError:\n"
                 "                pass\n"
                 "    time.sleep(0.05)\n"
                 "_SAID = f'FOUND {len(_found) > 0} WROTE {_wrote}'\n")
#: A grandchild in a session of its own, which a process group's kill does not reach.
ESCAPES = ("import os, sys\nif os.fork() == 0:\n    os.setsid()\n"
           "    os.execv('/bin/sh', ['/bin/sh', '-c', 'while :; do sleep 1; done', "
           "'DLSTUDIO-SESSION-ESCAPE'])\n")
FALLBACK = Sandbox("user", "a user of its own per file (the fallback, as root)")
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="the fallback runs files as users of their own: root")


@needs_root
def test_the_fallback_gives_each_file_a_user_and_a_folder_of_its_own(tmp_path):
    """The mechanism, with /bin/sh for the file (no Python needed): a file cannot write
    into another file's folder, and a process it started in a session of its own ends."""
    from DLStudio.exercises.sandbox import kill_user
    works = [tmp_path / "one", tmp_path / "two"]
    wrapped = []
    for work in works:
        work.mkdir()
        (work / "submission.py").write_text("x = 1\n")
        wrapped.append(FALLBACK.wrap(["/bin/sh"], str(work), 256, {}))
    (_, first, uid), (_, _, other) = wrapped
    assert uid != other and os.stat(works[0]).st_uid == uid
    assert oct(os.stat(works[0]).st_mode & 0o777) == "0o700"
    done = subprocess.run(["/bin/sh", "-c", f"echo x > {works[1]}/planted; echo x > mine; "
                           "setsid /bin/sh -c 'while :; do sleep 1; done' DLSTUDIO-UID-ESCAPE "
                           "> /dev/null 2>&1 &"],
                          cwd=works[0], preexec_fn=first, capture_output=True, text=True)
    assert "Permission denied" in done.stderr and not (works[1] / "planted").exists()
    assert (works[0] / "mine").exists()
    import time
    for _ in range(100):                      # (the shell started it in the background)
        if subprocess.run(["pgrep", "-f", "DLSTUDIO-UID-ESCAPE"]).returncode == 0:
            break
        time.sleep(0.05)
    assert subprocess.run(["pgrep", "-f", "DLSTUDIO-UID-ESCAPE"]).returncode == 0
    kill_user(uid)
    assert subprocess.run(["pgrep", "-f", "DLSTUDIO-UID-ESCAPE"]).returncode == 1


@pytest.mark.slow
@needs_root
def test_the_fallback_grades_files_that_reach_for_each_other(tmp_path, monkeypatch):
    """The same, graded end to end: needs a Python that an unprivileged user can run (not
    one under a private /root, as on the machines CI runs on)."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    if Sandbox.find().kind != "user":
        pytest.skip("no Python here that an unprivileged user can run: the fallback is off")
    monkeypatch.undo()
    writer = before(WRITES_OTHERS, inside("    raise RuntimeError(_SAID)"))
    folder = tmp_path / "submitted"
    folder.mkdir()
    for name, source in (("writer.py", writer), ("honest.py", ATTENTION),
                         ("escapes.py", before(ESCAPES))):
        (folder / name).write_text(source)
    grades = {g.file: g for g in grade_folder(
        exercise("attention"), [str(folder / n) for n in ("writer.py", "honest.py",
                                                          "escapes.py")],
        seed=3, jobs=3, sandbox=FALLBACK, timeout=60)}
    said = " ".join(r.message for r in grades["writer.py"].results)
    assert "FOUND True WROTE 0" in said, said
    assert earned(grades["honest.py"]) == 7 and earned(grades["escapes.py"]) == 7
    left = subprocess.run(["pgrep", "-f", "DLSTUDIO-SESSION-ESCAPE"], capture_output=True)
    assert left.returncode == 1, left.stdout


# ---------------------------------------------------------------------------------------
# One memory limit for a whole file (issue 49, item 6).
#: At import, six processes each try to hold 400 MB at once (each under --memory-mb 1500
#: alone); the file says how many did.
HOGS = ("import os, time\n_pids = []\n"
        "for _ in range(6):\n"
        "    _pid = os.fork()\n"
        "    if _pid == 0:\n"
        "        _hog = b'x' * (400 << 20)\n"
        "        time.sleep(4)\n"
        "        os._exit(0)\n"
        "    _pids.append(_pid)\n"
        "_held = sum(os.waitpid(p, 0)[1] == 0 for p in _pids)\n"
        "_SAID = f'HELD {_held} OF 6'\n")


@pytest.mark.slow
def test_one_memory_limit_holds_for_all_of_a_files_processes(tmp_path):
    from DLStudio.exercises.limits import FileGroup
    probe = FileGroup.make(64)
    if probe is None:
        pytest.skip("no cgroup for the grader here: memory is limited per process")
    probe.remove()
    g = graded_one(tmp_path, before(HOGS, inside("    raise RuntimeError(_SAID)")),
                   timeout=90, memory_mb=1500)
    said = " ".join(r.message for r in g.results) + g.status
    assert "HELD 6 OF 6" not in said and earned(g) == 0, said
    assert "HELD" in said or "went over --memory-mb 1500" in said, said


# ---------------------------------------------------------------------------------------
# The solutions and the mutants give, graded, the verdicts of the student's own process.
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_solutions_and_mutants_graded_give_the_verdicts_checked_in_process(tmp_path, name):
    sources = {f"{name}.py": solution(name)}
    for i, (exercise_name, _, line, wrong, _, _) in enumerate(MUTANTS):
        if exercise_name == name:
            sources[f"mutant_{i}.py"] = solution(name).replace(line, wrong)
    grades = graded(tmp_path, sources) if name == "attention" else {
        g.file: g for g in grade_folder(exercise(name), _written(tmp_path, sources), seed=3,
                                        jobs=2, sandbox=SANDBOX)}
    for file, g in grades.items():
        mine = run_checks(exercise(name), str(tmp_path / "submitted" / file), seed=3)
        assert g.status == "checked"
        assert [(r.name, r.passed, r.message) for r in g.results] == \
            [(r.name, r.passed, r.message) for r in mine], file
    assert all(r.passed for r in grades[f"{name}.py"].results)


def _written(tmp_path, sources):
    folder = tmp_path / "submitted"
    folder.mkdir()
    for file, source in sources.items():
        (folder / file).write_text(source)
    return [str(folder / file) for file in sources]
