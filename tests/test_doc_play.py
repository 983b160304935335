"""The students' pages played as written, one after another in one folder laid out as a
fresh clone, the way a student meets them: the README, then its chapters in the README's
order (`chapter_order`), then any other students' page. Each command runs exactly as the
page prints it, under one documented environment variable, ``DLSTUDIO_QUICK=1``
(DLStudio/quick.py: every script's sizes, steps and minutes shrunk, a few batches an epoch),
so that the whole play takes minutes; and every command a script prints for its user to
run next runs too.

What a page needs and a test cannot fetch is put in its place before the play, under the
name the page uses (`SUBSTITUTES`): the real archive is the bundled corpus, a model folder
from a hub is a tiny one of the same family built with transformers, the reader's own
files are a few lines of the bundled corpus. A page that uses one says so in its first
screen. What is still not played says why on its own line (`NOT_PLAYED`). The pages play in
one folder (checkpoints a page makes are there for the next); a command that names a bare
script (``python3 demo.py``) runs in ExamplesTransformers/, as the walkthrough runs every
command.
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
import subprocess
import sys
import time

import pytest

from DLStudio.data import BUNDLED_NAME

from .conftest import ROOT
from .test_doc_commands import commands


def chapter_order(readme_text):
    """The pages the README's chapter list names (its numbered items' first links), in its
    order, README.md first."""
    part = readme_text.split("\n## Chapters", 1)[1].split("\n## ", 1)[0]
    pages = [os.path.normpath(link) for link in
             re.findall(r"^\d+\. \[[^]]*\]\(([^)#]+\.md)", part, re.M)]
    return ["README.md", *dict.fromkeys(pages)]


def pages_in_order():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        first = chapter_order(f.read())
    rest = ["datasets/README.md", *sorted(os.path.relpath(p, ROOT) for p in
                                          glob.glob(os.path.join(ROOT, "docs", "*.md")))]
    return first + [p for p in rest if p not in first]


#: A command's comment that says why it is not played: GPUs, a browser, Jupyter, or CIFAR-10
#: (a download no test can stand in for: torchvision checks its files' checksums).
NOT_PLAYED = re.compile(r"\bGPUs?\b|browser|Jupyter|CIFAR-10")
#: A command that shows a form rather than a run (``...``, ``[--optional]``, ``~/your/files``,
#: a word in capitals for the reader to fill in: ``--rows ROWS``, ``--image-folder DIR``).
TEMPLATE = re.compile(r"\.\.\.|\[--|~/|(?<!\S)[A-Z]{3,}(?!\S)")
#: The make targets a page may name that are played (as their recipe, `make_recipe`).
PLAYED_TARGETS = {"demo", "recipe"}
#: The longest a command may run here (seconds): a page's command that waits (a server, a
#: prompt) is stopped and named.
PATIENCE = 180
#: What a command that reads standard input reads, unless its line pipes ``printf '...'``.
STDIN = "she is tired\n"
#: The environment of the play: the one variable the pages document.
QUICK = {"DLSTUDIO_QUICK": "1"}


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
    if words[0] == "make" and words[1] not in PLAYED_TARGETS:
        return "a make target that installs or tests (checked to exist by test_doc_commands)"
    if words[0] == "torchrun" or words[1:3] in (["-m", "venv"], ["-m", "pytest"], ["-m", "pip"]):
        return "installs, tests or starts processes (the package and DDP tests run these)"
    return ""


def played_as(command, page):
    """(the folder, relative to the clone, it runs in; its words, the interpreter python3)."""
    words = shlex.split(command)
    words = ["python3" if w.endswith(("/python", "/python3")) else w for w in words]
    script = words[1] if words[0] == "python3" and words[1].endswith(".py") else None
    bare = script is not None and "/" not in script
    folder = "ExamplesTransformers" if page == "ExamplesTransformers/README.md" or bare else "."
    return folder, words


#: A line of a make recipe that installs (the play's environment has everything).
INSTALLS = re.compile(r"-m venv|pip install|^touch |^test -x ")


def make_recipe(words, clone):
    """The lines ``make`` runs for ``words`` (``make recipe ARCHIVE=...``), as ``make -n``
    prints them in the clone, the installing ones left out: a list of (folder, words) to run
    in this process (the venv's python) or (folder, a shell line)."""
    shown = subprocess.run(["make", "-n", "--no-print-directory", *words[1:]], cwd=clone,
                           capture_output=True, text=True, check=False,
                           env={k: v for k, v in os.environ.items()        # not a sub-make's
                                if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")})
    if shown.returncode:
        return [(".", f"make {' '.join(words[1:])}: {shown.stderr.strip()}; exit 2")]
    lines = shown.stdout.replace("\\\n", " ").splitlines()
    steps = []
    for line in lines:
        folder, rest = ".", line.strip()
        cd = re.match(r"cd (\S+) && (.*)", rest)
        if cd:
            folder, rest = cd.groups()
        if not rest or INSTALLS.search(rest):
            continue
        first = rest.split()[0]
        if first.endswith(("/python", "/python3")):       # its $(...) as the shell reads it
            rest = rest.replace(".venv/bin/python ", f"{sys.executable} ")
            said = subprocess.run(["sh", "-c", f"set -- {rest}; printf '%s\\0' \"$@\""],
                                  cwd=clone, capture_output=True, text=True, check=True)
            steps.append((folder, ["python3", *said.stdout.split("\0")[1:-1]]))
        else:
            steps.append((folder, rest))
    return steps


def inline_makes(text):
    """(line, command, '') of each ``make TARGET ...`` in backquotes that opens an item of a
    list, for a played target (the README's recipe lines: a command to type, where one in
    a sentence names a target)."""
    found = []
    for i, line in enumerate(text.splitlines(), 1):
        item = re.match(r"\s{0,3}(?:[-*]|\d+\.) `(make [^`]+)`", line)
        if item and item.group(1).split()[1] in PLAYED_TARGETS:
            found.append((i, item.group(1), ""))
    return found


def script_missing(command, page, clone):
    """What is wrong with a command not played: the script it starts is not where it runs
    (a torchrun line's, say), or '' when it is."""
    words = command.split()
    script = next((w for w in words[1:] if w.endswith(".py") and not w.startswith("-")), None)
    if words[0] not in ("torchrun", "python", "python3") or script is None:
        return ""
    folder = "ExamplesTransformers" if page == "ExamplesTransformers/README.md" else "."
    if os.path.exists(os.path.join(clone, folder, script)):
        return ""
    return f"no script {script} in {folder} (where this page's commands run)"


def test_the_player_reads_a_page_as_a_student_would():
    assert why_not_played("torchrun --nproc_per_node=4 x.py", "4 GPUs, NCCL")
    assert why_not_played("python3 finetune_bert.py --train ... --labelled 50", "")
    assert why_not_played("python3 x.py --image-folder ~/my_pictures", "")
    assert why_not_played("make test", "")
    assert why_not_played("python3 x.py --rows ROWS", "")
    assert not why_not_played("make recipe ARCHIVE=a RECIPE=fast30", "")
    assert not why_not_played("make recipe ARCHIVE=data/x.tar.gz", "long: 35 minutes")
    assert not why_not_played("python3 interact_with_prompts.py Smol 'x'", "a downloaded folder")
    assert not why_not_played("make demo", "")
    assert played_as("python3 compare_fg_preln.py --minutes 3", "docs/x.md") == (
        "ExamplesTransformers", ["python3", "compare_fg_preln.py", "--minutes", "3"])
    assert played_as(".venv/bin/python ExamplesTransformers/t.py d 9", "README.md") == (
        ".", ["python3", "ExamplesTransformers/t.py", "d", "9"])
    assert stdin_of("    printf 'a b\\nc\\n' | python3 t.py DIR 9 -") == "a b\nc\n"
    assert printed_commands("== Demo\nTest it:\n  /c/.venv/bin/python x/t.py d 9\n"
                            "== python3 t.py d 9\n  python3 is fine\n") == [
        "/c/.venv/bin/python x/t.py d 9", "python3 t.py d 9", "python3 is fine"]
    assert chapter_order("# T\n## Chapters\nsee [I](docs/i.md)\n1. [A](docs/a.md#x) or [Z](z.md)"
                         "\n2. [B](./docs/b.md)\n## Next\n3. [C](docs/c.md)") == [
        "README.md", "docs/a.md", "docs/b.md"]
    assert pages_in_order()[:2] == ["README.md", "ExamplesTransformers/README.md"]
    assert substitutes_used("make recipe ARCHIVE=data/en_es_xformer_8_90000.tar.gz") == {
        "real archive"}
    assert substitutes_used("dlstudio check rope hw/rope.py --inside gpt2") == {"downloaded"}
    assert substitutes_used("python3 t.py --pairs my_pairs.tsv --out gpt2_run") == {"your own"}
    assert inline_makes("- `make recipe RECIPE=fast30` (the 2017 model), `make test`\n"
                        "    make demo\nThe recipes (`make recipe`) are ...\n") == [
        (1, "make recipe RECIPE=fast30", "")]
    assert script_missing("torchrun --nproc_per_node=2 seq2seq_with_transformerFG.py --cpu",
                          "docs/scale.md", ROOT) == ("no script seq2seq_with_transformerFG.py "
                                                     "in . (where this page's commands run)")
    assert not script_missing("torchrun --nproc_per_node=2 ExamplesTransformers/"
                              "seq2seq_with_transformerFG.py --cpu ...", "docs/scale.md", ROOT)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_make_recipe_is_played_as_make_runs_it():
    steps = make_recipe(["make", "demo"], ROOT)
    assert steps == [(".", ["python3", "ExamplesTransformers/demo.py"])]
    recipe = make_recipe(["make", "recipe", "ARCHIVE=a.tar.gz", "RECIPE=fast30"], ROOT)
    assert recipe[-1][1][:2] == ["python3", "ExamplesTransformers/seq2seq_with_transformerFG.py"]
    missing = make_recipe(["make", "recipe"], ROOT)        # no ARCHIVE=: its own test fails
    assert isinstance(missing[0][1], str)
    assert subprocess.run(missing[0][1], shell=True, cwd=ROOT, capture_output=True).returncode


def run(words, folder, solutions, stdin=STDIN):
    """Run one command's words in this process in ``folder`` (its exit status, what it
    printed); a shell line (a make recipe's) in a shell. ``dlstudio exercise NAME DIR`` is
    followed by the student's work: the solution written over the skeleton."""
    from DLStudio.cli.dispatcher import main as dlstudio
    if isinstance(words, str):
        done = subprocess.run(words, shell=True, cwd=folder, capture_output=True, text=True,
                              check=False, timeout=PATIENCE)
        return done.returncode, done.stdout + done.stderr
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


# ---------------------------------------------------------------------------------------
# What a page needs that a test cannot fetch, under the name the page uses.
REAL_ARCHIVE = "data/en_es_xformer_8_90000.tar.gz"


def _pairs(n=300):
    from DLStudio.data import load_archive
    return load_archive(os.path.join(ROOT, "datasets", BUNDLED_NAME)).pairs[:n]


def _write(path, lines):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def _own_files(folder):
    pairs = _pairs()
    _write(os.path.join(folder, "my_pairs.tsv"), [f"{en}\t{es}" for en, es in pairs])
    _write(os.path.join(folder, "moved", "my_pairs.tsv"), [f"{en}\t{es}" for en, es in pairs])
    _write(os.path.join(folder, "my_sentences.txt"), [es for _, es in pairs])
    _write(os.path.join(folder, "my_lines.txt"), [en for en, _ in pairs])
    _write(os.path.join(folder, "words.txt"), ["house", "dog", "red"])
    _write(os.path.join(folder, "spa.txt"), [f"{en}\t{es}\tCC-BY 2.0 (France) #{i}"
                                             for i, (en, es) in enumerate(pairs)])
    rows = [f"{i % 2}\t{en}" for i, (en, _) in enumerate(pairs[:80])]
    _write(os.path.join(folder, "train.tsv"), rows[:60])
    _write(os.path.join(folder, "test.tsv"), rows[60:])


#: A folder from a hub a page names, and the tiny one of its family built in its place.
HUB_FOLDERS = {
    "gpt2": ("hub_folders", "gpt2_folder", {}),
    "SmolLM2-135M-Instruct": ("hub_folders", "llama_folder", {}),
    "Qwen2.5-0.5B-Instruct": ("hub_folders", "llama_folder", {"kind": "qwen2"}),
    "Qwen3-0.6B": ("hub_folders", "llama_folder", {"kind": "qwen3"}),
    "gemma-3-270m-it": ("hub_folders", "llama_folder", {"kind": "gemma3"}),
    "opus-mt-en-es": ("hub_seq2seq_folders", "marian_folder", {}),
    "flan-t5-small": ("hub_seq2seq_folders", "t5_folder", {"version": "1.1"}),
    "mbart-large-cc25": ("hub_seq2seq_folders", "mbart_folder", {}),
    "bert-base-uncased": ("test_doc_play", "bert_folder", {}),
}


def bert_folder(path):
    """A BertForMaskedLM of bert-base-uncased's kind, tiny, with its vocab.txt."""
    import torch
    import transformers
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the capital of france is a dog "
             "she read book did . ##s".split()]
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=64)
    transformers.BertForMaskedLM(config).eval().save_pretrained(path)
    _write(os.path.join(path, "vocab.txt"), words)


def build_substitutes(clone):
    """The real archive, the hub's folders and the reader's own files, in the clone's top
    folder and in ExamplesTransformers/ (where the walkthrough's commands run)."""
    import importlib
    bundled = os.path.join(ROOT, "datasets", BUNDLED_NAME)
    for folder in (clone, os.path.join(clone, "ExamplesTransformers")):
        os.makedirs(os.path.join(folder, "data"), exist_ok=True)
        shutil.copy(bundled, os.path.join(folder, REAL_ARCHIVE))     # (a copy: pages write it)
        _own_files(folder)
    for name, (module, builder, options) in HUB_FOLDERS.items():
        make = getattr(importlib.import_module(f"tests.{module}"), builder)
        path = os.path.join(clone, name)
        os.makedirs(path)
        make(path, **options)
        os.symlink(path, os.path.join(clone, "ExamplesTransformers", name))


#: What each kind of substitute is called in a page's first screen (the page says so there).
SAID = {"real archive": ("en_es_xformer_8_90000",), "downloaded": tuple(HUB_FOLDERS),
        "your own": ("my_pairs.tsv", "my_sentences.txt", "my_lines.txt", "train.tsv",
                     "spa.txt", "words.txt")}


def substitutes_used(command):
    """The kinds of substitute a command reads (SAID's keys): a folder by its name, a file
    wherever its name is in a word (``ARCHIVE=data/...``, ``--data=...``)."""
    words = shlex.split(command)
    return {kind for kind, names in SAID.items()
            if any(os.path.basename(w.rstrip("/")) in names if kind == "downloaded"
                   else any(n in w for n in names) for w in words)}


@pytest.mark.slow
def test_the_students_pages_run_as_written(tmp_path, monkeypatch):
    pytest.importorskip("transformers", reason="the hub's folders are built with transformers")
    import importlib
    import pkgutil

    import DLStudio.cli
    clone = tmp_path / "clone"
    for name in ("datasets", "ExamplesTransformers"):
        (clone / name).mkdir(parents=True)
    for path in glob.glob(os.path.join(ROOT, "ExamplesTransformers", "*.py")):
        os.symlink(path, clone / "ExamplesTransformers" / os.path.basename(path))
    for name in ("benchmarks", "DLStudio", "Makefile", "setup.py", "notebooks"):
        os.symlink(os.path.join(ROOT, name), clone / name)
    for path in glob.glob(os.path.join(ROOT, "datasets", "*")):
        os.symlink(path, clone / "datasets" / os.path.basename(path))
    build_substitutes(str(clone))
    for info in pkgutil.walk_packages(DLStudio.cli.__path__, "DLStudio.cli."):
        importlib.import_module(info.name)
    for name, value in QUICK.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    solutions = os.path.join(ROOT, "tests", "exercise_solutions")
    played, failed, unsaid = set(), [], []

    def play(words, folder, where, stdin=STDIN):
        if (folder, str(words)) in played:
            return True
        played.add((folder, str(words)))
        start = time.perf_counter()
        code, printed = run(words, str(clone / folder), solutions, stdin)
        print(f"{time.perf_counter() - start:6.1f} s  exit {code}  {where}", file=sys.__stderr__,
              flush=True)
        if os.environ.get("DLSTUDIO_PLAY_LOG"):           # what each command printed, kept
            with open(os.environ["DLSTUDIO_PLAY_LOG"], "a", encoding="utf-8") as log:
                log.write(f"=== {where}\n{printed}\n")
        if code != 0:
            shown = words if isinstance(words, str) else " ".join(words)
            failed.append(f"{where}\n    (in {folder}: {shown})\n    exit {code}: "
                          + "\n    ".join(printed.strip().splitlines()[-6:]))
            return False
        for hint in printed_commands(printed):       # what it says to run next
            if not play(played_as(hint, "")[1], folder, f"{where}\n    printed: {hint}"):
                return False
        return True

    for page in pages_in_order():
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        first_screen = "\n".join(text.splitlines()[:SCREEN])
        for line, command, comment in commands(text, comments=True) + inline_makes(text):
            if why_not_played(command, comment):
                missing = script_missing(command, page, clone)
                if missing:
                    failed.append(f"{page}:{line}: {command}\n    {missing}")
                continue
            for kind in substitutes_used(command):
                if kind not in first_screen:
                    unsaid.append(f"{page}:{line}: uses {kind} (not said in its first screen)")
            words = shlex.split(command)
            steps = (make_recipe(words, str(clone)) if words[0] == "make"
                     else [played_as(command, page)])
            for folder, step in steps:
                if not play(step, folder, f"{page}:{line}: {command}",
                            stdin_of(text.splitlines()[line - 1])):
                    break
    assert len(played) > 100
    assert not failed, "\n".join(failed)
    assert not unsaid, "\n".join(unsaid)


#: The lines of a page's first screen.
SCREEN = 30
