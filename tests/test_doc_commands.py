"""Every command in a code block of the README and the docs names a script, a make target or a
`dlstudio` command that exists, and only flags that its parser knows: the docs cannot drift
from the code. A script's flags are read from its own ``--help``, run in this process."""

import contextlib
import glob
import io
import os
import re
import runpy
import shlex
import sys

import pytest

from .conftest import ROOT

DOCS = ["README.md", "ExamplesTransformers/README.md", "datasets/README.md",
        *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))),
        *sorted(os.path.relpath(p, ROOT)
                for p in glob.glob(os.path.join(ROOT, "docs", "developers", "*.md")))]
COMMAND = re.compile(r"(?:^|\|\s*)((?:\.venv/bin/)?python3?\s|dlstudio\s|make\s|torchrun\s)")


def commands(text, comments=False):
    """(line number, command) of each command in the indented code blocks of a Markdown
    text (continuation lines joined, comments and a leading ``VAR=value`` dropped; with
    ``comments``, (line number, command, its comment))."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line, start = lines[i], i + 1
        if line.startswith("    ") and COMMAND.search(line.strip()):
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            text_ = line.strip()
            text_ = text_[COMMAND.search(text_).start(1):]       # after "printf ... |"
            command, _, comment = text_.partition(" #")
            found.append((start, command.strip(), comment.strip()) if comments
                         else (start, command.strip()))
        i += 1
    return found


def _help(run):
    """The --help text a parser prints (``run``: calls it with ``--help``)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            run()
        except SystemExit:
            pass
    return out.getvalue()


_HELP = {}


def script_help(path, sub=()):
    key = (path, *sub)
    if key not in _HELP:
        def run():
            old = sys.argv, list(sys.path)
            sys.argv = [path, *sub, "--help"]
            sys.path.insert(0, os.path.dirname(path))
            try:
                runpy.run_path(path, run_name="__main__")
            finally:
                sys.argv, sys.path[:] = old
        _HELP[key] = _help(run)
    return _HELP[key]


def module_help(module, sub=()):
    key = (module, *sub)
    if key not in _HELP:
        def run():
            old = sys.argv
            sys.argv = [module, *sub, "--help"]
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            finally:
                sys.argv = old
        _HELP[key] = _help(run)
    return _HELP[key]


def make_targets():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        return set(re.findall(r"^([a-z][\w-]*):", f.read(), flags=re.M))


def problems_of(command, doc):
    """What is wrong with one command of ``doc`` (a list of strings; empty: nothing)."""
    try:
        words = shlex.split(command.replace("\\", "/"))
    except ValueError:
        words = command.split()
    words = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]   # VAR=value
    if words[0] == "make":
        missing = [t for t in words[1:] if "=" not in t and t not in make_targets()]
        return [f"make has no target {t!r}" for t in missing]
    if words[0] == "torchrun":                   # torchrun's flags, then the script's
        script = next(i for i, w in enumerate(words) if w.endswith(".py"))
        words = ["python3", *words[script:]]
    if words[0] == "dlstudio" or words[:3] in (["python", "-m", "DLStudio"],
                                                ["python3", "-m", "DLStudio"]):
        rest = words[1:] if words[0] == "dlstudio" else words[3:]
        if not rest or rest[0].startswith("-"):
            return []
        return _flags(module_help("DLStudio", rest[:1]), rest[1:], f"dlstudio {rest[0]}")
    if words[1:3] == ["-m", "DLStudio.data"]:
        return _flags(module_help("DLStudio.data", words[3:4]), words[4:],
                      f"DLStudio.data {words[3]}")
    if words[1] in ("-m", "-c") or not words[1].endswith(".py"):
        return []                                # pip, venv, pytest: not ours to check
    script = words[1]
    here = os.path.dirname(os.path.join(ROOT, doc))
    for folder in (ROOT, here, os.path.join(ROOT, "ExamplesTransformers")):
        path = os.path.join(folder, script)
        if os.path.isfile(path):
            break
    else:
        return [f"no script {script}"]
    return _flags(script_help(path), words[2:], script)


def _flags(help_text, args, what):
    if "usage:" not in help_text:
        return [f"{what} --help printed no usage"]
    known = set(re.findall(r"(?<![\w-])(-{1,2}[a-zA-Z][\w-]*)", help_text))
    given = set()
    for word in args:
        for part in word.strip("[]").split("|"):
            m = re.match(r"(--?[a-zA-Z][\w-]*)", part)
            if m and part.startswith("-"):
                given.add(m.group(1))
    return [f"{what} has no flag {flag}" for flag in sorted(given - known)]


def test_the_reader_finds_commands_and_their_mistakes(tmp_path):
    doc = ("Text.\n\n    python3 ExamplesTransformers/demo.py --epochs 2 --no-such-flag\n"
           "    python3 nowhere.py --x\n    make demo nosuchtarget\n"
           "    printf 'a' | python3 translate_sentence.py DIR 9 - --beam 4 \\\n"
           "        --weights average --bogus 1\n    dlstudio explore DIR 9 --outt f.html\n"
           "    python -m DLStudio.data build-archive spa.txt --max-wordz 8\n")
    found = commands(doc)
    assert [n for n, _ in found] == [3, 4, 5, 6, 8, 9]
    said = [p for _, c in found for p in problems_of(c, "README.md")]
    assert said == ["ExamplesTransformers/demo.py has no flag --no-such-flag",
                    "no script nowhere.py", "make has no target 'nosuchtarget'",
                    "translate_sentence.py has no flag --bogus",
                    "dlstudio explore has no flag --outt",
                    "DLStudio.data build-archive has no flag --max-wordz"]


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_in_the_docs_exists(doc, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        found = commands(f.read())
    wrong = [f"{doc}:{n}: {c}\n    {p}" for n, c in found for p in problems_of(c, doc)]
    assert not wrong, "\n".join(wrong)


SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "ExamplesTransformers", "*.py"))
                 + glob.glob(os.path.join(ROOT, "benchmarks", "*.py")))


@pytest.mark.parametrize("path", SCRIPTS, ids=os.path.basename)
def test_help_gives_each_value_its_default(path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    text = " ".join(script_help(path).split())
    assert "usage:" in text and "(default: " in text
    assert "(default: None)" not in text and "(default: False)" not in text
    if os.path.basename(path) == "seq2seq_with_transformerFG.py":
        assert "--batch-size BATCH_SIZE (default: 50)" in text
        assert "--dropout DROPOUT (default: 0.0)" in text


def test_no_page_names_a_path_outside_the_clone():
    """A student has the clone, not its neighbours: commands name data/..., never ../shared."""
    for page in DOCS:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            assert "../shared" not in f.read(), page


#: Commands that cannot run in the tests: the real archive is not in a clone (nor in CI),
#: and the recipes and the lecture's run take half an hour to hours.
NOT_IN_TESTS = re.compile(r"en_es_xformer_8_90000|^make recipe|"
                          r"^python3? (ExamplesTransformers/)?seq2seq_with_transformer"
                          r"(FG|PreLN)\.py$")


def unmarked(text):
    """The commands of a page that need the real archive or take long, but do not say so
    in their comment ("# long", or "# with the real archive")."""
    return [(n, c) for n, c, comment in commands(text, comments=True)
            if NOT_IN_TESTS.search(c) and "long" not in comment
            and "real archive" not in comment]


def test_the_marking_reader_finds_an_unmarked_long_command():
    page = ("    make recipe ARCHIVE=data/en_es_xformer_8_90000.tar.gz   # long: 35 minutes\n"
            "    python3 seq2seq_with_transformerFG.py\n"
            "    python -m DLStudio.data inspect data/en_es_xformer_8_90000.tar.gz   # quick\n"
            "    python3 seq2seq_with_transformerFG.py --archive bundled --epochs 1\n")
    assert unmarked(page) == [
        (2, "python3 seq2seq_with_transformerFG.py"),
        (3, "python -m DLStudio.data inspect data/en_es_xformer_8_90000.tar.gz")]


@pytest.mark.parametrize("doc", DOCS)
def test_a_command_that_takes_long_or_needs_the_real_archive_says_so(doc):
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        assert unmarked(f.read()) == []
