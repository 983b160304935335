"""The commands of the students' pages run as written, one after another in one folder laid
out as a clone, the way a student meets them: the README, the walkthrough, datasets/README.md,
then docs/*.md. Only two things differ from a student's machine, so that the whole play takes
minutes: the bundled corpus is a tiny one under the same name, and each command gets small
sizes appended to it (``--embedding-size 16 --num-layers 1 ...``; argparse keeps a flag's
last value). Every command either runs to exit status 0 or says on its own line why a test
cannot run it (see `NOT_PLAYED`). The pages play in one folder (checkpoints a page makes are
there for the next); a command that names a bare script (``python3 demo.py``) runs in
ExamplesTransformers/, as the walkthrough runs every command.
"""

import contextlib
import glob
import io
import os
import re
import runpy
import shlex
import shutil
import signal
import sys
import time

import pytest

from DLStudio.data import BUNDLED_NAME, generate_corpus, save_archive

from .conftest import ROOT
from .test_doc_commands import commands

PAGES = ["README.md", "ExamplesTransformers/README.md", "datasets/README.md",
         *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))]

#: A command's comment that says why it is not played: it takes long, needs the real archive,
#: a model folder downloaded from a hub, the reader's own files, GPUs, a browser or Jupyter.
NOT_PLAYED = re.compile(r"\blong\b|real archive|downloaded|your own|GPU|browser|Jupyter")
#: A command that shows a form rather than a run (``...``, ``[--optional]``, ``~/your/files``).
TEMPLATE = re.compile(r"\.\.\.|\[|~/")

TRAINING = ["--embedding-size", "16", "--num-layers", "1", "--num-atten-heads", "2",
            "--batch-size", "32", "--num-warmup-steps", "20"]
#: The small sizes appended to each script's command (a script not here runs as written).
SMALL = {
    "demo.py": ["--embedding-size", "16", "--num-layers", "1"],
    "seq2seq_with_transformerFG.py": TRAINING,
    "seq2seq_with_transformerPreLN.py": TRAINING,
    "homework_my_attention_head.py": TRAINING,
    "homework_gated_feedforward.py": TRAINING,
    "homework_concat_positions.py": TRAINING,
    "image_recog_with_visTransformer.py": TRAINING + ["--num-train", "64", "--num-test", "32"],
    "train_gpt.py": TRAINING + ["--vocab-size", "300"],
    "pretrain_bert.py": TRAINING + ["--vocab-size", "300"],
    "finetune_bert.py": ["--batch-size", "32"],
    "compare_fg_preln.py": TRAINING,
    "bug_museum.py": ["--steps", "20", "--embedding-size", "16", "--num-layers", "1"],
    "interact_with_prompts.py": ["--max-new-tokens", "5"],
    "check": ["--steps", "20"],                          # dlstudio check NAME FILE --train
    "synth": ["--pairs", "300"],                         # python -m DLStudio.data synth
    "bench_generate.py": ["--layers", "1", "--width", "32", "--heads", "2", "--kv-heads", "1",
                          "--ffn", "64", "--vocab", "300", "--prompt", "4", "--new", "4",
                          "--repeats", "1"],
}
#: What a flag becomes when the command gives it (time and steps), whatever the script.
SHORTER = {"--minutes": "0.05", "--steps": "20", "--every": "10", "--pairs": "300"}
#: The longest a command may run here (seconds): a page's command that waits (a server, a
#: prompt) is stopped and named.
PATIENCE = 60
#: What a command that reads standard input reads, unless its line pipes ``printf '...'``.
STDIN = "she is tired\n"


def stdin_of(line):
    """What the page's line gives the command on standard input."""
    piped = re.match(r"\s*printf '([^']*)'\s*\|", line)
    return piped.group(1).encode().decode("unicode_escape") if piped else STDIN


#: A command a script prints for its user to run next: on a line of its own, indented under a
#: line that ends in ":" (or after "== ", what the demo runs), the interpreter first.
PRINTED = re.compile(r"^(?:  |== )((?:python3?|dlstudio|\S*[/\\]python3?(?:\.exe)?) \S.*)$",
                     re.M)


def printed_commands(output):
    """The commands ``output`` tells its reader to run next."""
    return PRINTED.findall(output)


def why_not_played(command, comment):
    """Why a test does not play this command ('' when it does)."""
    words = command.split()
    if NOT_PLAYED.search(comment):
        return "its comment says so"
    if TEMPLATE.search(command):
        return "a form, not a run"
    if words[0] == "make" and words[1:] != ["demo"]:
        return "a make target other than demo (checked to exist by test_doc_commands)"
    if words[0] == "torchrun" or words[1:3] in (["-m", "venv"], ["-m", "pytest"], ["-m", "pip"]):
        return "installs, tests or starts processes (the package and DDP tests run these)"
    return ""


def played_as(command, page):
    """(the folder, relative to the clone, it runs in; its words, small sizes appended)."""
    if command == "make demo":                     # the Makefile's recipe for it
        command = "python3 ExamplesTransformers/demo.py"
    words = shlex.split(command)
    words = ["python3" if w.endswith(("/python", "/python3")) else w for w in words]
    script = next((w for w in words[1:] if w.endswith(".py")), None)
    bare = script is not None and "/" not in script
    folder = "ExamplesTransformers" if page == "ExamplesTransformers/README.md" or bare else "."
    if words[0] == "dlstudio" or words[1:3] == ["-m", "DLStudio"]:
        rest = words[1:] if words[0] == "dlstudio" else words[3:]
        name = rest[0] if rest else ""
        key = "check" if name == "check" and "--train" in words else f"{name}.py"
    elif words[1:3] == ["-m", "DLStudio.data"]:
        key = words[3]
    else:
        key = os.path.basename(script or "")
    for i, w in enumerate(words[:-1]):
        if w in SHORTER and re.fullmatch(r"[\d.]+", words[i + 1]):
            words[i + 1] = SHORTER[w]
    return folder, words + SMALL.get(key, [])


def test_the_player_reads_a_page_as_a_student_would():
    assert why_not_played("make recipe ARCHIVE=data/x.tar.gz", "long: 35 minutes")
    assert why_not_played("python3 finetune_bert.py --train ... --labelled 50", "")
    assert why_not_played("python3 x.py --image-folder ~/my_pictures", "")
    assert why_not_played("make test", "")
    assert why_not_played("python3 interact_with_prompts.py Smol 'x'", "a downloaded folder")
    assert not why_not_played("make demo", "")
    assert not why_not_played("python3 train_gpt.py", "the bundled corpus's Spanish")
    assert played_as("python3 compare_fg_preln.py --minutes 3", "docs/x.md") == (
        "ExamplesTransformers", ["python3", "compare_fg_preln.py", "--minutes", "0.05", *TRAINING])
    assert stdin_of("    printf 'a b\\nc\\n' | python3 t.py DIR 9 -") == "a b\nc\n"
    assert printed_commands("== Demo\nTest it:\n  /c/.venv/bin/python x/t.py d 9\n"
                            "== python3 t.py d 9\n  python3 is fine\n") == [
        "/c/.venv/bin/python x/t.py d 9", "python3 t.py d 9", "python3 is fine"]
    assert played_as("dlstudio", "docs/install.md") == (".", ["dlstudio"])
    assert played_as("make demo", "README.md") == (
        ".", ["python3", "ExamplesTransformers/demo.py", *SMALL["demo.py"]])
    assert played_as("dlstudio check attention_head hw/a.py --train", "docs/x.md")[1][-2:] == [
        "--steps", "20"]
    assert played_as('python -m DLStudio.data synth -o c.tar.gz --pairs 20000', "x.md")[1] == [
        "python", "-m", "DLStudio.data", "synth", "-o", "c.tar.gz", "--pairs", "300", "--pairs",
        "300"]


def run(words, folder, solutions, stdin=STDIN):
    """Run one command's words in this process in ``folder`` (its exit status, what it
    printed). ``dlstudio exercise NAME DIR`` is followed by the student's work: the solution
    written over the skeleton."""
    from DLStudio.cli.dispatcher import main as dlstudio
    out, old = io.StringIO(), (sys.argv, list(sys.path), os.getcwd(), sys.stdin)
    os.chdir(folder)
    sys.stdin = io.StringIO(stdin)
    code = 0

    def too_long(*_):
        raise TimeoutError(f"still running after {PATIENCE} s")
    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(PATIENCE)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            if words[0] == "dlstudio" or words[1:3] == ["-m", "DLStudio"]:
                rest = words[1:] if words[0] == "dlstudio" else words[3:]
                code = dlstudio(rest)
                if rest[:1] == ["exercise"] and len(rest) == 3 and code == 0:
                    shutil.copy(os.path.join(solutions, f"{rest[1]}.py"),
                                os.path.join(rest[2], f"{rest[1]}.py"))
            elif words[1:2] == ["-m"]:
                sys.argv = [words[2], *words[3:]]
                runpy.run_module(words[2], run_name="__main__", alter_sys=True)
            else:
                sys.argv = words[1:]
                sys.path.insert(0, os.path.dirname(os.path.abspath(words[1])))
                runpy.run_path(words[1], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:                              # a traceback is a failure too
        code = f"{type(e).__name__}: {e}"
    finally:
        signal.alarm(0)
        sys.argv, sys.path[:], sys.stdin = old[0], old[1], old[3]
        os.chdir(old[2])
    return code, out.getvalue()


@pytest.mark.slow
def test_the_students_pages_run_as_written(tmp_path, monkeypatch):
    import importlib
    import pkgutil

    import DLStudio.cli
    import DLStudio.data
    clone = tmp_path / "clone"
    (clone / "datasets").mkdir(parents=True)
    (clone / "ExamplesTransformers").mkdir()
    for path in glob.glob(os.path.join(ROOT, "ExamplesTransformers", "*.py")):
        os.symlink(path, clone / "ExamplesTransformers" / os.path.basename(path))
    os.symlink(os.path.join(ROOT, "benchmarks"), clone / "benchmarks")
    os.symlink(os.path.join(ROOT, "datasets", "finetune"), clone / "datasets" / "finetune")
    tiny = clone / "datasets" / BUNDLED_NAME
    save_archive(generate_corpus(300, seed=0), tiny)     # the question task wants seed 0
    for info in pkgutil.walk_packages(DLStudio.cli.__path__, "DLStudio.cli."):
        importlib.import_module(info.name)
    for name, module in list(sys.modules.items()):        # the bundled corpus: the tiny one
        if name.startswith("DLStudio") and hasattr(module, "BUNDLED_ARCHIVE"):
            monkeypatch.setattr(module, "BUNDLED_ARCHIVE", str(tiny))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    solutions = os.path.join(ROOT, "tests", "exercise_solutions")
    played, failed = set(), []
    for page in PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
            for line, command, comment in commands(text, comments=True):
                if why_not_played(command, comment):
                    continue
                folder, words = played_as(command, page)
                if (folder, tuple(words)) in played:
                    continue
                played.add((folder, tuple(words)))
                start = time.perf_counter()
                code, printed = run(words, str(clone / folder), solutions,
                                    stdin_of(text.splitlines()[line - 1]))
                print(f"{time.perf_counter() - start:6.1f} s  exit {code}  {page}:{line}: "
                      f"{command}", file=sys.__stderr__, flush=True)
                if code != 0:
                    failed.append(f"{page}:{line}: {command}\n    (in {folder}: "
                                  f"{' '.join(words)})\n    exit {code}: "
                                  + "\n    ".join(printed.strip().splitlines()[-6:]))
                    continue
                for hint in printed_commands(printed):     # what it says to run next
                    hint_words = played_as(hint, page)[1]
                    if (folder, tuple(hint_words)) in played:
                        continue
                    played.add((folder, tuple(hint_words)))
                    code, said = run(hint_words, str(clone / folder), solutions)
                    print(f"{'':6}    exit {code}  printed by {page}:{line}: {hint}",
                          file=sys.__stderr__, flush=True)
                    if code != 0:
                        failed.append(f"{page}:{line}: {command}\n    printed {hint}\n"
                                      f"    (in {folder}) exit {code}: "
                                      + "\n    ".join(said.strip().splitlines()[-6:]))
    assert len(played) > 60
    assert not failed, "\n".join(failed)
