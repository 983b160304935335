import atexit
import os
import shutil
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest -n auto (make test): one worker a core, one torch thread each; the scripts a
    # test starts inherit it
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    torch.set_num_threads(1)

REAL_ARCHIVE = os.path.join(ROOT, "..", "shared", "data", "en_es_xformer_8_90000.tar.gz")

#: The files whose slow tests start processes with time limits of their own (the grader's
#: sandbox, torchrun's ranks, the SIGKILL stress run, the browser): they are also marked
#: ``alone``, and make test-all runs them one at a time after the rest, which share the cores.
ALONE = {"test_grading.py", "test_exercises.py", "test_grader_holes.py", "test_grader_wire.py",
         "test_grader_withheld.py",
         "test_distributed.py", "test_fsdp.py",
         "test_robustness.py", "test_explorer_browser.py"}


@pytest.fixture(autouse=True)
def files_of_one_test_forgotten_after_it(tmp_path_factory):
    """The checker keeps a student's file in sys.modules under the file's name, and
    --model-class puts the current folder on sys.path: both for the life of a student's
    process. Tests share a process, so what one test's temporary folder put there is taken
    away after it; else a later test's patch_embedding.py would import an earlier one's."""
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    base = str(tmp_path_factory.getbasetemp())
    for name in set(sys.modules) - modules:
        if (getattr(sys.modules[name], "__file__", None) or "").startswith(base):
            del sys.modules[name]


def pytest_configure(config):
    """DLStudio's default path_saved_model is ./saved_model, one file in the clone for every
    test and fixture that leaves it out: two workers training at once would each find the
    other's file there (not written by this process: refused), and the clone would keep
    it. Each process's default is a folder of its own (and each test's, below)."""
    from DLStudio.runtime.studio import DLStudio
    folder = tempfile.mkdtemp(prefix="dlstudio-saved-")
    atexit.register(shutil.rmtree, folder, True)
    DLStudio._DEFAULTS["path_saved_model"] = os.path.join(folder, "saved_model")


@pytest.fixture(autouse=True)
def the_final_model_of_a_test_in_its_own_folder(tmp_path_factory, monkeypatch):
    from DLStudio.runtime.studio import DLStudio
    monkeypatch.setitem(DLStudio._DEFAULTS, "path_saved_model",
                        str(tmp_path_factory.mktemp("saved") / "saved_model"))


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("slow") and item.path.name in ALONE:
            item.add_marker(pytest.mark.alone)


@pytest.fixture
def tiny_corpus():
    from DLStudio.data import build_corpus
    return build_corpus([("i eat", "yo como"), ("you eat", "tú comes"), ("i run", "yo corro"),
                         ("we run", "nosotros corremos"), ("i eat", "como yo")])


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A small FG trained briefly on the bundled corpus, with its checkpoints."""
    from DLStudio import DLStudio, TransformerFG
    from DLStudio.data import BUNDLED_ARCHIVE
    folder = tmp_path_factory.mktemp("trained")
    dls = DLStudio(use_gpu=False, batch_size=64, epochs=2, seed=0,
                   path_saved_model=str(folder / "saved_FG.pt"))
    x = TransformerFG(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=64,
                      num_warmup_steps=200, checkpoint_freq=1)
    enc = x.MasterEncoder(dls, x, num_basic_encoders=2, num_atten_heads=4)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=2, num_atten_heads=4)
    untrained = x.run_code_for_evaluating(enc, dec, model=x.model_from(enc, dec), show=0,
                                          print_fn=lambda *a: None)
    trainer = x.run_code_for_training(dls, enc, dec, display_train_loss=True,
                                      checkpoints_dir=str(folder / "ck"), track_bleu=True)
    return folder, x, enc, dec, trainer, untrained
