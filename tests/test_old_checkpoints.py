"""Checkpoints written before the architecture moved into DLStudio/model/architecture.py still load
and translate as they did. The fixture is a TransformerFG (M = 32, one layer of two heads)
trained for 250 steps on the bundled corpus by commit 3dfdafd, its optimiser state left out
to keep the file small; old_fg_translations.json holds the translations that commit gave."""

import json
import os
import shutil

import pytest

from DLStudio import DLStudio, TransformerFG
from DLStudio.checkpoints import checkpoint_path, load_checkpoint
from DLStudio.data import BUNDLED_NAME
from DLStudio.Transformers import TransformerBase

from .conftest import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
OLD = os.path.join(FIXTURES, "old_fg_checkpoint.pt")
THEN = json.load(open(os.path.join(FIXTURES, "old_fg_translations.json"), encoding="utf-8"))


def test_the_fixture_was_written_before_the_move():
    payload = load_checkpoint(OLD)
    assert payload["container_class"] == "DLStudio.Transformers:TransformerFG"
    assert payload["container_args"]["data_archive"] == BUNDLED_NAME   # found in this copy


@pytest.mark.parametrize("called_on", [TransformerBase, TransformerFG])
def test_an_old_checkpoint_loads_and_translates_as_it_did(called_on):
    xformer, model, _ = called_on.from_checkpoint(OLD)
    assert type(xformer) is TransformerFG
    assert xformer.translate(model, THEN["english"]) == THEN["greedy"]
    assert xformer.translate(model, THEN["english"], beam_width=3) == THEN["beam"]


def test_dlstudio_s_run_code_for_evaluating_checkpoint_scores_an_old_checkpoint(tmp_path):
    folder = tmp_path / "checkpoints_FG"
    folder.mkdir()
    shutil.copyfile(OLD, checkpoint_path(str(folder), 4))
    xformer = TransformerFG.from_checkpoint(OLD).container          # its archive: the bundled one
    dls = DLStudio(use_gpu=False, seed=0)
    enc = TransformerFG.MasterEncoder(dls, xformer, num_basic_encoders=1, num_atten_heads=2)
    dec = TransformerFG.MasterDecoderWithMasking(dls, xformer, num_basic_decoders=1,
                                                 num_atten_heads=2)
    said = []
    result = xformer.run_code_for_evaluating_checkpoint(
        enc, dec, str(folder), 4, result_file=str(tmp_path / "out.txt"), show=0,
        print_fn=said.append)
    assert result["sentences"] == len(xformer.held_out_corpus) > 100
    assert 10 < result["bleu"] < 100 and "held-out BLEU" in said[-1]
    written = (tmp_path / "out.txt").read_text(encoding="utf-8")
    english, greedy = THEN["english"][0], THEN["greedy"][0]
    assert english in written and greedy in written
    with pytest.raises(Exception, match="checkpoint_7|no checkpoint|7"):
        xformer.run_code_for_evaluating_checkpoint(enc, dec, str(folder), 7, show=0)


# ---------------------------------------------------------------------------------------
# A run written before a setting existed still resumes. The fixture: a TransformerFG with
# the budget schedule, stopped after 6 of 12 steps by commit 97d52e5, the one before
# --shared-vocab (tests/fixtures/pre_shared_vocab_run/write_fixture.py wrote it).
PRE_SHARED = os.path.join(FIXTURES, "pre_shared_vocab_run", "checkpoint_0_partial.pt")


def pre_shared_run(folder, **options):
    from DLStudio.data import generate_corpus
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=100, seed=1, learning_rate=1e-3)
    x = TransformerFG(dl_studio=dls, corpus=generate_corpus(300, seed=4), embedding_size=16,
                      num_warmup_steps=10, checkpoint_freq=1000, schedule="budget")
    enc = x.MasterEncoder(dls, x, num_basic_encoders=1, num_atten_heads=2)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=1, num_atten_heads=2)
    return x.trainer(enc, dec, str(folder), max_steps=12, **options)


def test_a_run_from_before_a_new_setting_resumes_as_an_unbroken_run_goes_on(tmp_path):
    payload = load_checkpoint(PRE_SHARED)
    assert "shared_vocab" not in payload["training_config"] and payload["optimizer"]
    assert "warmup" not in payload["optimizer"]              # nor the warm-up, kept since
    folder = tmp_path / "ck"
    folder.mkdir()
    shutil.copyfile(PRE_SHARED, folder / "checkpoint_0_partial.pt")
    resumed = pre_shared_run(folder, resume=True)
    assert resumed.step == 6
    resumed.run()
    whole = pre_shared_run(tmp_path / "whole")
    whole.run()
    assert resumed.step == whole.step == 12
    # the same arithmetic as a run that was never stopped (fp32 sums: to 1e-5)
    assert resumed.train_losses == pytest.approx(whole.train_losses, rel=1e-5)
    assert resumed.current_lr() == whole.current_lr() == 0.0


def test_a_checkpoint_without_its_optimiser_state_is_refused_by_name(tmp_path):
    folder = tmp_path / "ck"
    folder.mkdir()
    shutil.copyfile(OLD, checkpoint_path(str(folder), 4))
    from DLStudio.checkpoints import CheckpointError
    with pytest.raises(CheckpointError, match="optimizer") as raised:
        pre_shared_run(folder, resume=True)
    assert "\n" not in str(raised.value) and "resume" in str(raised.value)


def test_a_model_class_is_named_by_its_module_or_by_its_file(tmp_path, monkeypatch):
    """--model-class hw/mine.py:Mine imports the file from anywhere; the class it names is
    recorded as mine:Mine, as --model-class mine:Mine (run from hw/) records it; a missing
    file is named."""
    from DLStudio.checkpoints.restore import ClassNotFound, class_path, import_class
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "mine_for_the_test.py").write_text(
        "from DLStudio import TransformerFG\n\nclass Mine(TransformerFG):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    cls = import_class("hw/mine_for_the_test.py:Mine")
    assert class_path(cls) == "mine_for_the_test:Mine"
    with pytest.raises(ClassNotFound, match="there is no file hw/nothing.py"):
        import_class("hw/nothing.py:Mine")
