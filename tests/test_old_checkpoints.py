"""Checkpoints written before the architecture moved into DLStudio/model/architecture.py still load
and translate as they did. The fixture is a TransformerFG (M = 32, one layer of two heads)
trained for 250 steps on the bundled corpus by commit 3dfdafd, its optimiser state left out
to keep the file small; old_fg_translations.json holds the translations that commit gave."""

import json
import os
import shutil

import pytest

from DLStudio import DLStudio, TransformerFG
from DLStudio.data import BUNDLED_NAME
from DLStudio.data.checkpoints import checkpoint_path, load_checkpoint
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
