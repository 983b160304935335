"""`dlstudio exercise`, `dlstudio check` and `dlstudio autograder`: a student's skeletons and
their checks, and an instructor's grading (DLStudio.exercises).

    dlstudio exercise                          list the exercises
    dlstudio exercise NAME DIR                 write DIR/NAME.py, the skeleton
    dlstudio check NAME FILE [--train]         the checks (and a training run beside ours)
    dlstudio check NAME --submissions DIR --csv FILE [--timeout S] [--memory-mb MB]
                        [--points CHECK=P ...] [--jobs N] [--seed S]
    dlstudio check NAME FILE --gradescope results.json [--visibility CHECK=hidden ...]
    dlstudio check NAME FILE --only CHECK      one check, graded: exit 0 when it passes
    dlstudio autograder NAME --out autograder.zip

A student checking their own file runs it in this process, with fixed inputs. Grading (a
folder, --gradescope, --only) runs each file in a process of its own that only answers the
checks' questions, in a sandbox where one can be made, with a time and a memory limit; the
verdicts are this process's (DLStudio.exercises.grading).
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
import zipfile

from ..exercises import NAMES, exercise, skeleton_path
from .common import Parser, UserError, positive_int, run_job

MUSEUM = "dlstudio bug_museum --exhibit {}"
VISIBILITY = ("visible", "hidden", "after_due_date", "after_published")


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


def grading_arguments(p, folder=True):
    """The flags of a grading run (check --submissions/--gradescope/--only, autograder)."""
    g = p.add_argument_group("grading (instructors)")
    if folder:
        g.add_argument("--submissions", metavar="DIR", help="grade every .py file in DIR")
        g.add_argument("--csv", metavar="FILE", help="where the grades go (one row a file)")
        g.add_argument("--gradescope", metavar="RESULTS.json",
                       help="grade FILE (or the one .py of a folder) into Gradescope's "
                            "results.json")
        g.add_argument("--only", metavar="CHECK", help="grade FILE on this check alone: exit "
                       "0 when it passes (GitHub Classroom's command tests)")
        g.add_argument("--jobs", type=positive_int, default=1, help="files graded at once")
        g.add_argument("--seed", type=int, help="the inputs' seed (default: a fresh one per "
                       "file when grading, recorded with the grades; checking your own file: "
                       "the fixed inputs)")
    g.add_argument("--timeout", type=positive_int, default=60,
                   help="seconds per file before it is stopped")
    g.add_argument("--memory-mb", type=positive_int, default=3072,
                   help="memory per file, in MB: all its processes together where the "
                        "system gives the grader a cgroup, and each process's data segment "
                        "(Linux and macOS)")
    g.add_argument("--points", action="append", default=[], metavar="CHECK=P",
                   help="points of a check (default 1 each); repeat for several")
    g.add_argument("--visibility", action="append", default=[], metavar="CHECK=WHEN",
                   help=f"Gradescope: when a check's result is shown ({', '.join(VISIBILITY)}; "
                        "default visible)")
    g.add_argument("--require-sandbox", action="store_true",
                   help="refuse to grade where the students' code would run with the "
                        "grader's rights (bubblewrap, or as root a user of its own per file, "
                        "are accepted)")
    g.add_argument("--no-sandbox", action="store_true", help=argparse.SUPPRESS)
    if folder:
        g.add_argument("--sandbox", action="store_true",
                       help="check FILE in the sandbox, as grading does (the default for a "
                            "file under a submissions folder, or given --seed)")
        g.add_argument("--trust", action="store_true",
                       help="check FILE in this process, as you, even where it would be "
                            "sandboxed: only for a file you wrote or trust")
    return g


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
        p.add_argument("--inside", metavar="FOLDER", help="after the checks pass, run your "
                       "part inside a real model read from a Hugging Face folder (GPT-2, "
                       "Llama, Mistral, SmolLM3, Qwen2, Qwen3) and compare its logits with "
                       "the model's own")
        grading_arguments(p)
        args = p.parse_args(argv)
        ex = _exercise(args.name)
        points = points_of(ex, args.points)
        visibility = visibility_of(ex, args.visibility)
        if args.submissions:
            if not args.csv:
                raise UserError("--submissions needs --csv FILE: where the grades go")
            return grade(ex, args.submissions, args.csv, points, args)
        if not args.file:
            raise UserError(f"give the file to check: dlstudio check {ex.name} FILE")
        if args.gradescope:
            return gradescope(ex, args.file, args.gradescope, points, visibility, args)
        if not os.path.isfile(args.file):
            raise UserError(f"{args.file}: no such file (dlstudio exercise {ex.name} DIR "
                            "writes the skeleton)")
        if args.only:
            return only(ex, args.file, args.only, args)
        why = sandboxed_because(args)
        if why:
            return sandboxed_check(ex, args.file, why, args)
        status = check_file(ex, args.file,
                            args.train and dict(steps=args.steps, out=args.out), args.seed)
        if args.inside and status == 0:
            return inside_folder(ex, args.file, args.inside)
        if args.inside:
            print("--inside runs a part that passes every check: fix the failing ones first")
        return status
    return run_job(run, argv)


def sandboxed_because(args):
    """Why ``check NAME FILE`` runs the file in the sandbox, not in this process as the one
    who runs it ('' where it does not): --sandbox, a grading row's --seed, or a file under
    a folder named for submissions; --trust runs it here all the same."""
    if args.trust:
        return ""
    if args.sandbox:
        return "--sandbox"
    if args.seed is not None:
        return "--seed (a grading row's inputs: a student's file)"
    folders = os.path.dirname(os.path.abspath(args.file)).split(os.sep)
    if any("submission" in folder.lower() for folder in folders):
        return "it is under a submissions folder (a student's file)"
    return ""


def sandboxed_check(ex, path, why, args):
    """Every check of ``path`` in the sandbox, as grading runs it, printed as `check_file`
    prints them: 0 when all pass. Where this machine has no sandbox, the message says so
    and what --trust does."""
    from ..exercises.grading import grade_file
    from ..exercises.sandbox import Sandbox
    if args.train or args.inside:
        raise UserError(f"--train and --inside run the file in this process, as you, and "
                        f"this file is checked in the sandbox ({why}): give --trust to run "
                        "it as you (only a file you wrote or trust)")
    sandbox = Sandbox.find()
    if sandbox.kind == "none":
        raise UserError(f"this file is checked in a sandbox ({why}), and this machine has "
                        f"none: {sandbox.says.split(': ')[0]}. On Linux: apt-get install "
                        "bubblewrap. To run it in this process, as you, give --trust (only "
                        "a file you wrote or trust)")
    print(f"checking in {sandbox.says}; {sandbox.memory_says()}", flush=True)
    start = time.monotonic()
    g = grade_file(ex, path, args.seed, timeout=args.timeout, memory_mb=args.memory_mb,
                   sandbox=sandbox)
    print(f"exercise {ex.name}: {len(ex.checks)} checks of {shown(path)} in the sandbox "
          f"({why}; inputs of seed {g.seed})")
    print_results(ex, g.results)
    passed = sum(r.passed for r in g.results)
    print(f"{passed} of {len(ex.checks)} checks pass ({shown(g.status)}, "
          f"{time.monotonic() - start:.1f} s).")
    return 0 if g.results and passed == len(ex.checks) else 1


#: The parts of an exercise that a real model's folder is built of (docs/real_models.md).
INSIDE_PARTS = ("AttentionHead", "SelfAttention", "RMSNorm", "RotaryEmbedding", "SwiGLU")


def inside_folder(ex, path, folder, text="The quick brown fox jumps over the lazy dog. It"):
    """The student's parts (those of INSIDE_PARTS their container overrides) in a real model
    read from ``folder``, against the model of our own parts on ``text``: the largest logit
    difference and whether 20 greedy tokens agree. 0 when within 1e-4 (NaN fails)."""
    import torch

    from ..evaluation.generation import generate
    from ..exercises.checking import load_student
    from ..model.overrides import OverrideError
    from ..Transformers import TransformerGPT
    mine = getattr(load_student(path), ex.container or "", None)
    parts = {n: getattr(mine, n) for n in INSIDE_PARTS
             if mine is not None and getattr(mine, n) is not getattr(ex.base, n)}
    if not parts:
        print(f"--inside: your file's {ex.container} overrides none of "
              f"{', '.join(INSIDE_PARTS)}: a real model has nothing of yours to run")
        return 1
    ours = TransformerGPT.from_huggingface(folder)
    try:
        yours = type("YoursInside", (TransformerGPT,), parts).from_huggingface(folder)
    except OverrideError as e:
        print(f"--inside: {folder}'s model turns queries and keys by position (rotary), and "
              f"{e}\nA head of the attention_head exercise runs inside GPT-2's folder "
              "(learned positions); the rope exercise's inside a Llama's.")
        return 1
    ids = torch.tensor([ours.encode(text)])
    with torch.no_grad():
        diff = float((yours(ids) - ours(ids)).abs().max())
    same = torch.equal(generate(yours, ids, 20, end_ids=(-1,)),
                       generate(ours, ids, 20, end_ids=(-1,)))
    ok = diff <= 1e-4
    print(f"\nYour {', '.join(parts)} inside {folder} ({ours.num_basic_decoders} layers, "
          f"{ours.num_atten_heads} heads): largest logit difference from the model's own "
          f"{diff:.2e} over {ids.size(1)} tokens ({'within' if ok else 'over'} 1e-4); 20 "
          f"greedy tokens {'the same' if same else 'differ'}.")
    return 0 if ok and same else 1


def check_file(ex, path, train=None, seed=None):
    """Print each check's result, one line each (and what a failure costs); 0 when all
    pass. ``train``: then train (see `train_beside`). ``seed``: a grading row's inputs."""
    from ..exercises.checking import run_checks

    start = time.monotonic()
    results = run_checks(ex, path, seed=seed)
    print(f"exercise {ex.name}: {len(ex.checks)} checks of {path}"
          + (f" (inputs of seed {seed})" if seed is not None else ""))
    print_results(ex, results)
    passed = sum(r.passed for r in results)
    print(f"{passed} of {len(results)} checks pass ({time.monotonic() - start:.1f} s).")
    if train and passed == len(results):
        return train_or_say(ex, path, train)
    elif train:
        print("--train trains a solution that passes every check: fix the failing ones first")
    return 0 if passed == len(results) else 1


def train_or_say(ex, path, train):
    """`train_beside`, where a failure of the student's code (a part no check reaches) is a
    message naming their line, never our traceback: 0 when it trained."""
    from ..exercises.checking import StudentError, student_line
    try:
        train_beside(ex, path, **train)
    except StudentError as e:
        print(f"--train: {printable(str(e))}")
        return 1
    except Exception as e:                      # their code, called by the training run
        print(f"--train: training your {ex.container} failed: "
              f"{printable(student_line(e, path))}\n"
              "(the checks passed: the failing part is one they do not reach)")
        return 1
    return 0


def print_results(ex, results):
    width = max(len(c.name) for c in ex.checks) + 2
    about = {c.name: c.about for c in ex.checks}
    for result in results:
        if result.passed:
            print(f"  ok    {result.name:<{width}}{about[result.name]}")
        else:
            print(f"  FAIL  {result.name:<{width}}{printable(result.message)}")
            if result.exhibit:
                print(f"        {'':<{width}}what this mistake costs: "
                      f"{MUSEUM.format(result.exhibit)}")


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
    if ex.base.variant == "GPT":
        print(f"--train: a GPT's part trains with train_gpt.py --model-class "
              f"{ex.name}:{ex.container} (and the switch it needs); check it inside a real "
              "model with --inside FOLDER")
        return
    if ex.base.variant == "BERT":
        return train_bert_beside(ex.base, mine, steps, out)
    if not issubclass(ex.base, TransformerBase):
        return train_vision_beside(ex.base, mine, steps, out)
    sizes = {k: v for k, v in HOMEWORK.items() if k != "epochs"}
    print(f"\nTraining {ex.base.__name__} and your {mine.__name__} for {steps} steps each on "
          "the bundled corpus ...")
    rows = compare_containers([ex.base, mine], BUNDLED_ARCHIVE, out, epochs=1000,
                              max_steps=steps, settings=ex.settings, **sizes)
    print("\nThe same data, seed, sizes and steps; held-out BLEU with greedy decoding:\n"
          + format_comparison(rows))


def train_bert_beside(base, mine, steps, out):
    """TransformerBERT and the file's subclass pre-trained the same steps on the bundled
    corpus's English (pretrain_bert.py's sizes); the held-out tokens masked once by the rule
    for both, and each one's accuracy and perplexity there."""
    from ..data import BUNDLED_ARCHIVE
    from ..runtime.studio import DLStudio
    from .bert import BERT
    from .gpt import archive_side

    sentences = archive_side(BUNDLED_ARCHIVE, "en")[1]
    print(f"\nPre-training {base.__name__} and your {mine.__name__} for {steps} steps each on "
          "the bundled corpus's English ...")
    rows = []
    for cls in (base, mine):
        folder = os.path.join(out, cls.__name__)
        dls = DLStudio(seed=0, epochs=1000, batch_size=BERT["batch_size"],
                       learning_rate=BERT["learning_rate"],
                       path_saved_model=os.path.join(folder, "saved_BERT.pt"))
        bert = cls(dl_studio=dls, sentences=sentences, archive_text=True, lang="en",
                   vocab_size=BERT["vocab_size"], embedding_size=BERT["embedding_size"],
                   num_basic_encoders=BERT["num_layers"],
                   num_atten_heads=BERT["num_atten_heads"])
        start = time.monotonic()
        bert.run_code_for_pretraining(folder, max_steps=steps, overwrite=True)
        scores = bert.masked_scores()
        rows.append((cls.__name__, time.monotonic() - start, scores["accuracy"],
                     scores["perplexity"]))
    print(f"\nThe same text, seed, sizes and {steps} steps; held-out masked tokens (masked "
          "once, by the rule, for both):")
    print(f"{'model':<34}{'train s':>9}{'accuracy %':>12}{'perplexity':>12}")
    for name, seconds, accuracy, perplexity in rows:
        print(f"{name:<34}{seconds:>9.1f}{accuracy:>12.1f}{perplexity:>12.1f}")


def train_vision_beside(base, mine, steps, out):
    """The visTransformer and the file's subclass, the same steps on our shapes (the
    image script's defaults, two layers); both test accuracies."""
    from ..data.images import SHAPE_CLASSES
    from ..runtime.studio import DLStudio
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
# Grading: a folder into a CSV, one file into Gradescope's results, one check for Classroom.
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


def visibility_of(ex, given):
    """{check name: Gradescope visibility} from CHECK=WHEN strings (visible for the rest)."""
    shown = {c.name: "visible" for c in ex.checks}
    for item in given:
        name, _, when = item.partition("=")
        if name not in shown:
            raise UserError(f"--visibility {item}: {ex.name} has no check {name!r}; its "
                            f"checks are {', '.join(shown)}")
        if when not in VISIBILITY:
            raise UserError(f"--visibility {item}: give CHECK=" + "|".join(VISIBILITY))
        shown[name] = when
    return shown


def _sandbox(args):
    from ..exercises.sandbox import Sandbox, SandboxError
    try:
        sandbox = Sandbox.find(require=args.require_sandbox, use=not args.no_sandbox)
    except SandboxError as e:
        raise UserError(str(e)) from None
    print(f"grading in {sandbox.says}; {sandbox.memory_says()}", flush=True)
    return sandbox


def _options(args):
    return {"timeout": args.timeout, "memory_mb": args.memory_mb, "sandbox": _sandbox(args)}


def grade(ex, folder, csv_path, points, args):
    """Grade every .py file of ``folder`` into ``csv_path``: one row a file (file, status,
    the points of each check, total, out of, seed)."""
    from ..exercises.grading import add_similar_flags, grade_folder
    if not os.path.isdir(folder):
        raise UserError(f"--submissions {folder}: no such folder")
    # every entry named *.py is a row: one that is no regular file (a link, a folder, a
    # FIFO, a device) is not read, and its row says what it is
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".py"))
    if not files:
        raise UserError(f"--submissions {folder}: no .py files in it")
    start = time.monotonic()
    grades = grade_folder(ex, files, args.seed, args.jobs, similar=False, **_options(args))
    write_grades(csv_path, grades, points)            # the grades first: then the flags
    left = add_similar_flags(ex, grades)
    write_grades(csv_path, grades, points)
    out_of = sum(points.values())
    for g in grades:
        earned = sum(points[r.name] for r in g.results if r.passed and r.name in points)
        flags = " ".join(shown(flag) for flag in g.flags)
        print(f"{shown(g.file):<30} {earned:>6g} / {out_of:g}  {shown(g.status)}"
              + (f"  [{flags}]" if flags else ""))
    if any(g.flags for g in grades):
        print("flags inform, they change no score: reference:NAME, the file names the "
              "package's own NAME; obfuscation:NAME, it runs code it builds or decodes "
              "(NAME); similar:FILE, its own code is near-identical to FILE's")
    if left:
        print(f"similar: {left} pairs of files were not compared within the flags' time "
              "budget (the grades are complete)")
    print(f"graded {len(files)} files in {time.monotonic() - start:.0f} s: {csv_path}")
    return 0


def write_grades(csv_path, grades, points):
    """The grades as a CSV file, one row a file (written whole, then renamed)."""
    names, out_of = list(points), sum(points.values())
    with open(csv_path + ".part", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["file", "status", "flags", *names, "total", "out_of", "seed"])
        for g in grades:
            passed = {r.name: r.passed for r in g.results}
            earned = [points[n] if passed.get(n) else 0 for n in names]
            flags = " ".join(shown(flag) for flag in g.flags)
            writer.writerow([spreadsheet_cell(shown(g.file)), spreadsheet_cell(shown(g.status)),
                             spreadsheet_cell(flags), *earned, sum(earned), out_of, g.seed])
    os.replace(csv_path + ".part", csv_path)


def shown(text):
    """``text`` (a file name, perhaps not UTF-8, perhaps with a newline) as one printable
    line: undecodable bytes as \\xNN, control characters escaped."""
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:                 # a lone surrogate no byte stands behind
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def printable(text):
    """``text`` (a message that may quote a student's file) as any UTF-8 printer takes it
    and no terminal acts on: its lines kept, every other control or format character (an
    escape sequence's ESC, a carriage return that redraws a line, a bidirectional
    override) and a lone surrogate written as its escape."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c == "\n" or unicodedata.category(c) not in ("Cc", "Cf")
                   else ascii(c)[1:-1] for c in text)


def spreadsheet_cell(text):
    """A CSV cell a spreadsheet shows as text: one starting with =, +, - or @ (a formula
    there) is prefixed with an apostrophe."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def submitted_file(ex, where):
    """The file to grade: ``where`` itself, or in a folder (Gradescope's submission), NAME.py
    or its one .py file."""
    if os.path.isfile(where):
        return where
    if not os.path.isdir(where):
        raise UserError(f"{where}: no such file or folder")
    found = sorted(n for n in os.listdir(where) if n.endswith(".py"))
    if f"{ex.name}.py" in found:
        return os.path.join(where, f"{ex.name}.py")
    if len(found) == 1:
        return os.path.join(where, found[0])
    raise UserError(f"{where} holds {len(found)} .py files ({', '.join(found) or 'none'}): "
                    f"submit {ex.name}.py")


def gradescope(ex, where, out, points, visibility, args):
    """Grade one submission into Gradescope's results.json: a test a check (name, score,
    max_score, status, output: the failure's message and the exhibit to run, visibility)."""
    from ..exercises.grading import grade_file
    try:
        path = submitted_file(ex, where)
    except UserError as e:            # the student's submission: a result, not an error
        return _write_gradescope(out, {"score": 0.0, "output": str(e), "tests": []})
    g = grade_file(ex, path, args.seed, only=None, **_options(args))
    tests = []
    for r in g.results:
        output = "" if r.passed else r.message
        if r.exhibit:
            output += f"\nWhat this mistake costs: {MUSEUM.format(r.exhibit)}"
        tests.append({"name": r.name, "score": points[r.name] if r.passed else 0.0,
                      "max_score": points[r.name], "status": "passed" if r.passed else "failed",
                      "output": output, "visibility": visibility[r.name]})
    if g.flags:               # for the instructor: hidden from the student, worth nothing
        tests.append({"name": "flags (for the instructor)", "score": 0.0, "max_score": 0.0,
                      "output": " ".join(g.flags) + ": reference:NAME, the file names the "
                      "package's own implementation of a part the exercise asks for; "
                      "obfuscation:NAME, it runs code it builds or decodes; the score is its "
                      "checks'", "visibility": "hidden"})
    score = sum(t["score"] for t in tests)
    _write_gradescope(out, {                      # results.json first, then what is printed
        "score": score, "tests": tests,
        "output": f"{ex.name}: {os.path.basename(path)} {g.status} (inputs of seed {g.seed}; "
                  f"dlstudio check {ex.name} FILE --seed {g.seed} gives the same checks, "
                  "in the sandbox: --trust runs the file as you)",
        "extra_data": {"seed": g.seed, "status": g.status}})
    print_results(ex, g.results)
    print(f"{score:g} of {sum(points.values()):g} points ({shown(g.status)}, seed {g.seed}): "
          f"{out}")
    return 0


def _write_gradescope(out, results):
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    return 0


def only(ex, path, name, args):
    """One check, graded (GitHub Classroom gives each command its points): exit 0 when it
    passes."""
    from ..exercises.grading import grade_file
    if name not in [c.name for c in ex.checks]:
        raise UserError(f"--only {name}: {ex.name} has no such check; its checks are "
                        f"{', '.join(c.name for c in ex.checks)}")
    g = grade_file(ex, path, args.seed, only={name}, **_options(args))
    print_results(ex, g.results)
    print(f"{g.status} (seed {g.seed})")
    return 0 if g.results and g.results[0].passed else 1


# ---------------------------------------------------------------------------------------
# Gradescope's autograder bundle.
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image.
set -euo pipefail
apt-get update && apt-get install -y --no-install-recommends python3 python3-pip bubblewrap
pip3 install --index-url https://download.pytorch.org/whl/cpu torch torchvision
pip3 install /autograder/source/{wheel}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: the checks of {name}, graded in a sandbox, into
# results/results.json. AUTOGRADER_ROOT: where Gradescope's folders are (/autograder).
# Never the students' code with root's rights: bubblewrap, or a user of its own per file
# (--require-sandbox refuses anything less); python3 -I: the current folder (the
# submission's, perhaps) is never on Python's path, nor are PYTHON* variables read.
root="${{AUTOGRADER_ROOT:-/autograder}}"
mkdir -p "$root/results"
exec python3 -I -m DLStudio check {name} "$root/submission" \\
    --gradescope "$root/results/results.json" --require-sandbox {flags}
"""


def autograder_main(argv):
    """``dlstudio autograder NAME --out autograder.zip``."""
    def run(argv):
        p = Parser(prog="dlstudio autograder", description="Write a Gradescope autograder "
                   "(setup.sh, run_autograder and this package as a wheel) for an exercise.",
                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        p.add_argument("name", help="the exercise")
        p.add_argument("--out", default="autograder.zip", help="the zip to upload")
        p.add_argument("--wheel", help="this package's wheel (default: built from this clone)")
        grading_arguments(p, folder=False)
        args = p.parse_args(argv)
        ex = _exercise(args.name)
        points_of(ex, args.points)
        visibility_of(ex, args.visibility)
        wheel = args.wheel or build_wheel()
        flags = [f"--timeout {args.timeout}", f"--memory-mb {args.memory_mb}"]
        flags += [f"--points {p}" for p in args.points]
        flags += [f"--visibility {v}" for v in args.visibility]
        with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in (
                    ("setup.sh", SETUP_SH.format(wheel=os.path.basename(wheel))),
                    ("run_autograder", RUN_AUTOGRADER.format(name=ex.name,
                                                             flags=" ".join(flags)))):
                info = zipfile.ZipInfo(name)
                info.external_attr = 0o755 << 16
                z.writestr(info, text)
            z.write(wheel, os.path.basename(wheel))
        print(f"wrote {args.out}: setup.sh, run_autograder and {os.path.basename(wheel)}; "
              "upload it as a Gradescope autograder (docs/exercises.md)")
        return 0
    return run_job(run, argv)


def build_wheel():
    """This package's wheel, built from the clone it runs from."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isfile(os.path.join(root, "setup.py")):
        raise UserError("the autograder carries a wheel of this package: run it from a clone, "
                        "or give one with --wheel FILE.whl")
    out = tempfile.mkdtemp(prefix="dlstudio-wheel-")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", out, root],
                          capture_output=True, text=True)
    wheels = [n for n in os.listdir(out) if n.endswith(".whl")]
    if done.returncode or not wheels:
        raise UserError("could not build this package's wheel: "
                        + (done.stderr.strip().splitlines() or ["pip wheel failed"])[-1])
    return os.path.join(out, wheels[0])
