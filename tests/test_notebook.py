"""The notebook tour runs top to bottom (fast mode), in a kernel of this Python; any cell's
error fails the test. The stored notebook carries no outputs."""

import json
import os
import sys

import pytest

from .conftest import ROOT

NOTEBOOK = os.path.join(ROOT, "notebooks", "transformer_tour.ipynb")


def test_the_notebook_is_stored_without_outputs():
    cells = json.load(open(NOTEBOOK, encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


@pytest.mark.slow
def test_the_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # A kernel of this test's own Python (another "python3" kernel may lack torch).
    spec = tmp_path / "kernels" / "dlstudio-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "DLStudio test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("DLSTUDIO_TOUR_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="dlstudio-test",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()          # raises CellExecutionError, naming the cell, on any error
    text = "".join(out.get("text", "") for cell in nb.cells for out in cell.get("outputs", []))
    assert "same as the model's scaled_dot_product: True" in text
    assert "held-out BLEU of FG" in text and "PreLN" in text
    assert "2017 (pre-LN): " in text and "today's parts: " in text       # side by side
    assert "test accuracy" in text and "without the mask" in text
    assert "0 of 6 checks pass" in text and "not implemented" in text     # the skeleton
    assert "FAIL  projections      the scores are not divided by sqrt(s_qkv)" in text
    assert "6 of 6 checks pass" in text and "MyTransformer" in text       # and --train
    frames = [out["data"]["text/html"] for cell in nb.cells for out in cell.get("outputs", [])
              if "text/html" in out.get("data", {}) and "srcdoc" in out["data"]["text/html"]]
    assert len(frames) == 1 and "explorer-data" in frames[0]      # the explorer, inline
    assert "the explorer page:" in text
