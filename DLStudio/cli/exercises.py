"""`dlstudio exercise` and `dlstudio check`: a student's skeletons and their checks, and an
instructor's grading of a folder of submissions (DLStudio.exercises).

    dlstudio exercise                          list the exercises
    dlstudio exercise NAME DIR                 write DIR/NAME.py, the skeleton
    dlstudio check NAME FILE [--train]         the checks (and a training run beside ours)
    dlstudio check NAME --submissions DIR --csv FILE [--timeout S] [--memory-mb MB]
                        [--points CHECK=P ...] [--jobs N]

Grading runs each file in a process of its own, in a temporary folder, with a time and a
memory limit, so that one that hangs, crashes or fills memory does not stop the rest. The
students' code runs with the grader's rights: grade in an account or container of its own.
"""

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from ..exercises import NAMES, exercise, skeleton_path
from .common import Parser, UserError, positive_int, run_job

MUSEUM = "dlstudio bug_museum --exhibit {}"


def exercise_main(argv):
    """``dlstudio exercise [NAME DIR]``."""
    def run(argv):
        p = Parser(prog="dlstudio exercise", description="List the "
                                    "exercises, or write one's skeleton into a folder.")
        p.add_argument("name", nargs="?", help="the exercise (none: list them)")
        p.add_argument("dir", nargs="?", help="the folder to write NAME.py into")
        args = p.parse_args(argv)
        if args.name is None:
            width = max(map(len, NAMES)) + 2
            for name in NAMES:
                print(f"{name:<{width}}{exercise(name).summary}")
            print("\ndlstudio exercise NAME DIR writes DIR/NAME.py; dlstudio check NAME "
                  "DIR/NAME.py checks it.")
            return 0
        ex = _exercise(args.name)
        if args.dir is None:
            raise UserError(f"say where to write it: dlstudio exercise {ex.name} DIR")
        target = os.path.join(args.dir, f"{ex.name}.py")
        if os.path.exists(target):
            raise UserError(f"{target} exists: it is never written over (move it, or give "
                            "another folder)")
        os.makedirs(args.dir, exist_ok=True)
        shutil.copyfile(skeleton_path(ex.name), target)
        print(f"wrote {target}: its docstring is the contract. Check it with\n"
              f"  dlstudio check {ex.name} {target}")
        return 0
    return run_job(run, argv)


def _exercise(name):
    try:
        return exercise(name)
    except ValueError as e:
        raise UserError(str(e)) from None


def check_main(argv):
    """``dlstudio check NAME FILE`` or ``dlstudio check NAME --submissions DIR --csv F``."""
    def run(argv):
        p = Parser(
            prog="dlstudio check", description="Run an exercise's checks on a file (exit "
            "status 0 only when all pass), or grade a folder of submissions.",
            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        p.add_argument("name", help="the exercise (dlstudio exercise lists them)")
        p.add_argument("file", nargs="?", help="the student's file")
        p.add_argument("--train", action="store_true", help="after the checks pass, train "
                       "the solution beside the reference on the bundled corpus")
        p.add_argument("--steps", type=positive_int, default=300,
                       help="--train: optimiser steps for each model")
        p.add_argument("--out", default="exercise_run", help="--train: checkpoints folder")
        p.add_argument("--json", help=argparse.SUPPRESS)     # the grader's child writes it
        g = p.add_argument_group("grading (instructors)")
        g.add_argument("--submissions", metavar="DIR", help="grade every .py file in DIR")
        g.add_argument("--csv", metavar="FILE", help="where the grades go (one row a file)")
        g.add_argument("--timeout", type=positive_int, default=60,
                       help="seconds per file before it is stopped")
        g.add_argument("--memory-mb", type=positive_int, default=3072,
                       help="memory (data segment) per file, in MB (Linux and macOS)")
        g.add_argument("--points", action="append", default=[], metavar="CHECK=P",
                       help="points of a check (default 1 each); repeat for several")
        g.add_argument("--jobs", type=positive_int, default=1, help="files graded at once")
        args = p.parse_args(argv)
        ex = _exercise(args.name)
        if args.submissions:
            if not args.csv:
                raise UserError("--submissions needs --csv FILE: where the grades go")
            return grade(ex, args.submissions, args.csv, args.timeout, args.memory_mb,
                         points_of(ex, args.points), args.jobs)
        if not args.file:
            raise UserError(f"give the file to check: dlstudio check {ex.name} FILE")
        if not os.path.isfile(args.file):
            raise UserError(f"{args.file}: no such file (dlstudio exercise {ex.name} DIR "
                            "writes the skeleton)")
        return check_file(ex, args.file, args.json, args.train and dict(
            steps=args.steps, out=args.out))
    return run_job(run, argv)


def check_file(ex, path, json_path=None, train=None):
    """Print each check's result, one line each (and what a failure costs); 0 when all
    pass. ``json_path``: also write the results there. ``train``: then train (see
    `train_beside`)."""
    from ..exercises.checking import run_checks

    start = time.monotonic()
    results = run_checks(ex, path)
    if json_path:
        with open(json_path, "w") as f:
            json.dump([r.__dict__ for r in results], f)
    width = max(len(c.name) for c in ex.checks) + 2
    print(f"exercise {ex.name}: {len(ex.checks)} checks of {path}")
    for check, result in zip(ex.checks, results):
        if result.passed:
            print(f"  ok    {check.name:<{width}}{check.about}")
        else:
            print(f"  FAIL  {check.name:<{width}}{result.message}")
            if result.exhibit:
                print(f"        {'':<{width}}what this mistake costs: "
                      f"{MUSEUM.format(result.exhibit)}")
    passed = sum(r.passed for r in results)
    print(f"{passed} of {len(results)} checks pass ({time.monotonic() - start:.1f} s).")
    if train and passed == len(results):
        train_beside(ex, path, **train)
    elif train:
        print("--train trains a solution that passes every check: fix the failing ones first")
    return 0 if passed == len(results) else 1


def train_beside(ex, path, steps, out):
    """Train the file's container and the standard one for the same steps on the bundled
    corpus, and print both held-out scores."""
    from ..data import BUNDLED_ARCHIVE
    from ..exercises.checking import load_student
    from ..Transformers import TransformerBase
    from .experiments import compare_containers, format_comparison
    from .translation import HOMEWORK

    if ex.container is None:
        print(f"--train: {ex.name} is not a part a training run calls; its checks are its "
              "test")
        return
    mine = getattr(load_student(path), ex.container)
    if not issubclass(ex.base, TransformerBase):
        return train_vision_beside(ex.base, mine, steps, out)
    sizes = {k: v for k, v in HOMEWORK.items() if k != "epochs"}
    print(f"\nTraining {ex.base.__name__} and your {mine.__name__} for {steps} steps each on "
          "the bundled corpus ...")
    rows = compare_containers([ex.base, mine], BUNDLED_ARCHIVE, out, epochs=1000,
                              max_steps=steps, **sizes)
    print("\nThe same data, seed, sizes and steps; held-out BLEU with greedy decoding:\n"
          + format_comparison(rows))


def train_vision_beside(base, mine, steps, out):
    """The visTransformer and the file's subclass, the same steps on our shapes (the
    image script's defaults, two layers); both test accuracies."""
    from ..data.images import SHAPE_CLASSES
    from ..DLStudio import DLStudio
    from .vision import VIT_DEFAULTS

    d = VIT_DEFAULTS
    print(f"\nTraining {base.__name__} and your {mine.__name__} for {steps} steps each on "
          "our shapes ...")
    rows = []
    for cls in (base, mine):
        folder = os.path.join(out, cls.__name__)
        dls = DLStudio(image_size=(32, 32), classes=SHAPE_CLASSES, seed=0, epochs=1000,
                       batch_size=d["batch_size"], learning_rate=d["learning_rate"],
                       path_saved_model=os.path.join(folder, "saved_vit.pt"))
        vit = cls(dl_studio=dls, patch_size=(d["patch_size"],) * 2, num_basic_encoders=2,
                  embedding_size=d["embedding_size"], num_atten_heads=d["num_atten_heads"])
        vit.load_shapes_dataset(5000, 1000, seed=0)
        start = time.monotonic()
        vit.run_code_for_training_visTransformer(dls, vit, checkpoints_dir=folder,
                                                 max_steps=steps, overwrite=True)
        right = (vit.predict(vit.test_set.images) == vit.test_set.labels).float().mean()
        rows.append((cls.__name__, time.monotonic() - start, 100 * right.item()))
    print(f"\nThe same images, seed, sizes and {steps} steps; test accuracy:")
    print(f"{'model':<34}{'train s':>9}{'accuracy %':>12}")
    for name, seconds, accuracy in rows:
        print(f"{name:<34}{seconds:>9.1f}{accuracy:>12.1f}")


# ---------------------------------------------------------------------------------------
# Grading a folder.
def points_of(ex, given):
    """{check name: points} from CHECK=P strings (1 for the others)."""
    points = {c.name: 1.0 for c in ex.checks}
    for item in given:
        name, _, value = item.partition("=")
        if name not in points:
            raise UserError(f"--points {item}: {ex.name} has no check {name!r}; its checks "
                            f"are {', '.join(points)}")
        try:
            points[name] = float(value)
        except ValueError:
            raise UserError(f"--points {item}: give CHECK=NUMBER") from None
    return points


def _limits(memory_mb):
    """The child's memory limit (its data segment; Unix only: elsewhere none is set)."""
    try:
        import resource
    except ImportError:
        return None

    def apply():
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return apply


def grade_one(ex, path, timeout, memory_mb):
    """One file, in its own process and temporary folder: (status, {check: passed})."""
    with tempfile.TemporaryDirectory(prefix="dlstudio-grade-") as work:
        name = os.path.basename(path)
        shutil.copyfile(path, os.path.join(work, name))
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
            p for p in (package_root, os.environ.get("PYTHONPATH")) if p))
        command = [sys.executable, "-m", "DLStudio", "check", ex.name, name,
                   "--json", "results.json"]
        with open(os.path.join(work, "output.txt"), "w") as log:
            process = subprocess.Popen(command, cwd=work, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=_limits(memory_mb))
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                if hasattr(os, "killpg"):        # the file's process and any it started
                    os.killpg(process.pid, signal.SIGKILL)
                else:
                    process.kill()
                process.wait()
                return f"stopped after {timeout} s", {}
        results = os.path.join(work, "results.json")
        if not os.path.isfile(results):
            tail = open(os.path.join(work, "output.txt")).read().strip().splitlines()[-1:]
            return f"crashed (exit status {process.returncode}){': ' + tail[0] if tail else ''}", {}
        with open(results) as f:
            return "checked", {r["name"]: r["passed"] for r in json.load(f)}


def grade(ex, folder, csv_path, timeout, memory_mb, points, jobs=1):
    """Grade every .py file of ``folder`` into ``csv_path``: one row a file (file, status,
    the points of each check, total, out of)."""
    if not os.path.isdir(folder):
        raise UserError(f"--submissions {folder}: no such folder")
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".py"))
    if not files:
        raise UserError(f"--submissions {folder}: no .py files in it")
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        graded = list(pool.map(lambda f: grade_one(ex, f, timeout, memory_mb), files))
    names, out_of = list(points), sum(points.values())
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["file", "status", *names, "total", "out_of"])
        for path, (status, passed) in zip(files, graded):
            earned = [points[n] if passed.get(n) else 0 for n in names]
            writer.writerow([os.path.basename(path), status, *earned, sum(earned), out_of])
            print(f"{os.path.basename(path):<30} {sum(earned):>6g} / {out_of:g}  {status}")
    print(f"graded {len(files)} files in {time.monotonic() - start:.0f} s: {csv_path}")
    return 0
