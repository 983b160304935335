"""`pip install` gives a student what the clone gives. The sdist and the wheel are built as a
packager builds them (``python -m build``: the sdist, then the wheel from the sdist), both
install, and the installed wheel trains on the bundled corpus, writes a checkpoint and
translates with it from a folder outside the repository, through its own ``dlstudio``
command and ``python -m DLStudio.examples.*``, importing the installed copy, not the clone.
"""

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from DLStudio.cli import COMMANDS
from DLStudio.data import BUNDLED_NAME, BUNDLED_SHA256

from .conftest import ROOT

EXAMPLES = sorted(os.path.basename(p)[:-3]
                  for p in glob.glob(os.path.join(ROOT, "ExamplesTransformers", "*.py")))
TINY = ["--epochs", "1", "--max-steps", "4", "--embedding-size", "16", "--num-layers", "1",
        "--batch-size", "32", "--num-warmup-steps", "20", "--cpu"]


def run(command, cwd, env, timeout=300):
    out = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    return out.returncode, out.stdout, out.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sdist and the wheel, built without network (the test environment's setuptools)."""
    out = tmp_path_factory.mktemp("dist")
    status, stdout, stderr = run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                                  str(out), ROOT], ROOT, dict(os.environ))
    assert status == 0, stdout[-2000:] + stderr[-3000:]
    [sdist], [wheel] = glob.glob(str(out / "*.tar.gz")), glob.glob(str(out / "*.whl"))
    return sdist, wheel


def outside_env(site, home):
    """An environment that sees the installed copy and the test's own torch, never the
    clone: PYTHONPATH is the install folder alone, and the clone is not the working folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(site), HOME=str(home), MPLBACKEND="Agg",
               PATH=f"{site / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    return env


def install(package, site):
    status, stdout, stderr = run([sys.executable, "-m", "pip", "install", "--no-deps",
                                  "--no-build-isolation", "--no-index", "--target", str(site),
                                  package], ROOT, dict(os.environ))
    assert status == 0, stdout[-2000:] + stderr[-3000:]


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory):
    """The wheel installed into a folder outside the repository; a student folder beside it."""
    site, student = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("student")
    install(built[1], site)
    return site, student, outside_env(site, student)


#: The attention explorer's files, which the package carries beside its code.
EXPLORER = tuple(f"DLStudio/evaluation/explorer/{name}"
                 for name in ("page.html", "explorer.js", "explorer.css"))


@pytest.mark.slow
def test_the_sdist_holds_what_the_clone_holds(built):
    with tarfile.open(built[0]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for script in EXAMPLES:
        assert f"ExamplesTransformers/{script}.py" in names
    for needed in ("README.md", f"datasets/{BUNDLED_NAME}", "datasets/README.md",
                   "tests/test_package.py", "tests/dlstudio_scripts/seq2seq_with_transformerFG.py",
                   "benchmarks/bench_train.py", "notebooks/transformer_tour.ipynb",
                   "Makefile", "LICENSE", "DLStudio/Transformers.py", "Transformers.py",
                   *EXPLORER):
        assert needed in names, needed
    assert not [n for n in names if n.startswith((".venv", ".git/")) or "__pycache__" in n]


@pytest.mark.slow
def test_the_wheel_carries_the_corpus_and_the_scripts(built):
    with zipfile.ZipFile(built[1]) as wheel:
        names = set(wheel.namelist())
        corpus = wheel.read(f"DLStudio/data/{BUNDLED_NAME}")
        entry_points = wheel.read(next(n for n in names if n.endswith("entry_points.txt")))
    assert hashlib.sha256(corpus).hexdigest() == BUNDLED_SHA256
    assert {f"DLStudio/examples/{s}.py" for s in EXAMPLES} <= names
    assert {"Transformers.py", "DLStudio/examples/README.md", "DLStudio/__main__.py"} <= names
    assert set(EXPLORER) <= names                         # the explorer's page, script, style
    assert b"dlstudio = DLStudio.cli:main" in entry_points
    assert any(".dist-info/" in n and n.endswith("/LICENSE") for n in names)    # MIT's text


def test_every_example_script_is_a_command():
    assert set(COMMANDS) == set(EXAMPLES)


@pytest.mark.slow
def test_the_sdist_installs(built, tmp_path):
    site = tmp_path / "site"
    install(built[0], site)
    code = ("import DLStudio, DLStudio.examples.demo, os\n"
            "from DLStudio.data import BUNDLED_ARCHIVE\n"
            "print(DLStudio.__file__, DLStudio.examples.demo.__file__, BUNDLED_ARCHIVE, "
            "os.path.isfile(BUNDLED_ARCHIVE))")
    status, stdout, stderr = run([sys.executable, "-c", code], tmp_path,
                                 outside_env(site, tmp_path))
    assert status == 0, stderr
    paths = stdout.split()
    assert all(p.startswith(str(site)) for p in paths[:3]) and paths[3] == "True", stdout


@pytest.mark.slow
def test_the_installed_copy_trains_checkpoints_and_translates(installed):
    site, student, env = installed
    status, stdout, stderr = run([sys.executable, "-c", "import DLStudio, Transformers, "
                                  "DLStudio.cli; print(DLStudio.__file__, Transformers.__file__, "
                                  "DLStudio.cli.__file__)"], student, env)
    assert status == 0, stderr
    assert all(p.startswith(str(site)) for p in stdout.split()), stdout
    assert "Kak" not in stderr

    status, stdout, stderr = run(["dlstudio", "seq2seq_with_transformerFG", "--archive",
                                  "bundled", *TINY, "--checkpoints-dir", "ck", "--no-eval"],
                                 student, env)
    assert status == 0, stdout[-2000:] + stderr[-3000:]
    assert os.path.join(str(site), "DLStudio", "data", BUNDLED_NAME) in stdout
    hint = stdout.rstrip().splitlines()[-1].split()          # the command it says to run
    assert hint[:2] == ["dlstudio", "test_checkpointFG"], stdout[-500:]
    assert os.path.isfile(student / hint[2])

    status, stdout, stderr = run([*hint, "--show", "2"], student, env)
    assert status == 0, stderr
    assert "BLEU" in stdout

    sentence = ["i will eat the red apples tomorrow"]
    translations = []
    for command in (["dlstudio", "translate_sentence", "ck", "last"],
                    [sys.executable, "-m", "DLStudio.examples.translate_sentence", "ck", "last"],
                    [sys.executable, "-m", "DLStudio", "translate_sentence", "ck", "last"]):
        status, stdout, stderr = run(command + sentence, student, env)
        assert status == 0, stderr
        translations.append(stdout.strip())
    assert translations[0] and len(set(translations)) == 1      # one model, greedy: one answer

    status, stdout, stderr = run(["dlstudio", "explore", "ck", "last", *sentence, "--out",
                                  "page.html"], student, env)
    assert status == 0, stderr
    page = (student / "page.html").read_text(encoding="utf-8")
    assert "explorer-data" in page and translations[0] in page   # its style and script inside


@pytest.mark.slow
def test_a_homework_subclass_trains_and_is_scored_from_the_installed_copy(installed):
    """The homework's class lives in the installed DLStudio.examples: its checkpoint records
    that module, and the command the run prints rebuilds the class from it."""
    site, student, env = installed
    status, _, stderr = run([sys.executable, "-m", "DLStudio.data", "synth", "-o",
                             "tiny.tar.gz", "--pairs", "300", "--seed", "5"], student, env)
    assert status == 0, stderr
    status, stdout, stderr = run(["dlstudio", "homework_my_attention_head", "--archive",
                                  "tiny.tar.gz", *TINY[:2], *TINY[4:-1], "--out", "hw",
                                  "--cpu"], student, env)
    assert status == 0, stdout[-2000:] + stderr[-3000:]
    hint = stdout.rstrip().splitlines()[-1].split()
    assert hint[:2] == ["dlstudio", "test_checkpointFG"] and hint[-2:] == [
        "--model-class",
        "DLStudio.examples.homework_my_attention_head:TransformerFGWithTemperature"], stdout
    status, stdout, stderr = run(hint + ["--show", "1"], student, env)
    assert status == 0 and "BLEU" in stdout, stderr


@pytest.mark.slow
def test_the_vistransformer_trains_on_its_shapes_from_the_installed_copy(installed):
    site, student, env = installed
    status, stdout, stderr = run(["dlstudio", "image_recog_with_visTransformer", "--num-train",
                                  "64", "--num-test", "32", "--epochs", "1", "--embedding-size",
                                  "16", "--num-layers", "1", "--checkpoints-dir", "vit",
                                  "--cpu"], student, env)
    assert status == 0, stdout[-2000:] + stderr[-3000:]
    assert "64 training and 32 test images" in stdout
    assert stdout.rstrip().splitlines()[-1].split()[:2] == [
        "dlstudio", "test_checkpoint_for_visTransformer"]


@pytest.mark.slow
def test_each_command_says_how_to_run_it(installed):
    site, student, env = installed
    status, stdout, _ = run(["dlstudio"], student, env)        # the jobs listed, exit 0
    assert status == 0 and all(f"  {name} " in stdout for name in COMMANDS)
    assert "python -m DLStudio.data --help" in stdout
    status, stdout, _ = run(["dlstudio", "show_attention", "--help"], student, env)
    assert status == 0 and stdout.startswith("usage: dlstudio show_attention")
    status, _, stderr = run(["dlstudio", "seq2seq_with_transformerF"], student, env)
    assert status == 2 and "did you mean seq2seq_with_transformerFG" in stderr
    status, stdout, stderr = run(["dlstudio", "homework_gated_feedforward", "--help"],
                                 student, env)
    assert status == 0 and "TransformerFGWithGEGLU" in stdout, stderr


@pytest.mark.slow
def test_the_examples_are_copied_out_for_reading_and_never_overwritten(installed):
    site, student, env = installed
    status, stdout, stderr = run(["dlstudio", "examples", "my_examples"], student, env)
    assert status == 0, stderr
    copied = sorted(os.listdir(student / "my_examples"))
    assert copied == sorted([f"{s}.py" for s in EXAMPLES] + ["README.md"])
    (student / "my_examples" / "demo.py").write_text("# my own changes\n")
    status, _, stderr = run(["dlstudio", "examples", "my_examples"], student, env)
    assert status == 1 and "nothing was copied" in stderr
    assert (student / "my_examples" / "demo.py").read_text() == "# my own changes\n"


@pytest.mark.slow
def test_kaks_dlstudio_in_the_same_environment_is_named_with_what_to_do(installed, tmp_path):
    """DLStudio 2.5.8 installs the packages DLStudio and Transformers: pip writes its files over
    ours and records it as installed. Here its record and its Transformers package."""
    site, student, env = installed
    mixed = tmp_path / "site"
    shutil.copytree(site, mixed)
    info = mixed / "DLStudio-2.5.8.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: DLStudio\nVersion: 2.5.8\n")
    (info / "RECORD").write_text("DLStudio/__init__.py,,\nDLStudio/DLStudio.py,,\n"
                                 "Transformers/__init__.py,,\nTransformers/Transformers.py,,\n")
    (mixed / "Transformers").mkdir()
    (mixed / "Transformers" / "__init__.py").write_text("")
    env = outside_env(mixed, student)
    status, _, stderr = run([sys.executable, "-c", "import DLStudio"], student, env)
    assert status == 0
    assert "Avi Kak's DLStudio 2.5.8 is installed in the same place" in stderr
    assert "`import Transformers` finds the package" in stderr
    assert "separate virtual environments" in stderr
    status, stdout, stderr = run(["dlstudio", "demo"], student, env)
    assert status == 1 and "separate virtual environments" in stderr and not stdout
