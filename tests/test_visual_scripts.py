"""The pictures: every script writes a real PNG from a small checkpoint, and the attention
weights plotted are the ones the model used."""

import os
import subprocess
import sys

import pytest
import torch
from matplotlib.image import imread

from DLStudio.checkpoints import load_checkpoint
from DLStudio.evaluation.visualize import find_divergence
from DLStudio.model.tokens import padding_mask

from .close import assert_close
from .conftest import ROOT

EXAMPLES = os.path.join(ROOT, "ExamplesTransformers")
ENV = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")


def run(script, *args, cwd):
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *map(str, args)],
                         cwd=cwd, capture_output=True, text=True, env=ENV, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def assert_picture(path, min_width=300, min_height=200):
    image = imread(path)
    height, width = image.shape[:2]
    assert width >= min_width and height >= min_height, (path, image.shape)
    assert image[..., :3].std() > 0.05, f"{path} looks blank"


@pytest.mark.slow
def test_show_attention_writes_three_grids(trained):
    folder = trained[0]
    out = run("show_attention.py", "ck", 1, "She is not tired today.", "--out", "maps",
              cwd=folder)
    assert "->" in out
    for kind in ("encoder", "decoder_self", "cross"):
        assert_picture(folder / "maps" / f"attention_{kind}.png", 600, 400)


def test_show_attention_html_writes_the_explorer_page(trained):
    import json
    import re
    folder = trained[0]
    out = run("show_attention.py", "ck", 1, "She is not tired today.", "--html", "one.html",
              cwd=folder)
    page = (folder / "one.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'type="application/json">(.*?)</script>', page, re.S)[1])
    [view] = data["views"]
    assert view["tokens"]["source"] == ["SOS", "she", "is", "not", "tired", "today", "EOS"]
    assert len(view["maps"]["cross"]["layers"]) == 2 and "one.html" in out
    assert not (folder / "attention_maps").exists()             # the page instead of PNGs


def test_attention_maps_are_the_weights_used(trained):
    _, x, enc, dec, trainer, _ = trained
    model = trainer.model.eval()
    src = x.sentence_with_words_to_ints(["she is tired", "we will not eat the red apples"],
                                        "en")
    tgt = x.sentence_with_words_to_ints(["ella está cansada", "nosotros no comeremos"], "es")
    maps = model.attention_maps(src, tgt[:, :-1])
    src_pad = padding_mask(src)
    for layer in maps["encoder"] + maps["cross"] + maps["decoder_self"]:
        assert_close(layer.sum(-1), torch.ones(layer.shape[:-1]))
    for layer in maps["encoder"] + maps["cross"]:
        assert (layer.permute(0, 3, 1, 2)[src_pad] == 0).all()        # padded keys
    for layer in maps["decoder_self"]:
        assert (layer.triu(diagonal=1) == 0).all()                      # future words
    # and they are what the forward pass used: recomputing the first head by hand agrees
    emb = model.embeddings_generator_en(src)
    head = enc.basic_encoder_arr[0].self_attention.heads[0]
    s = head.qkv_size
    x0 = emb[..., :s]
    scores = head.WQ(x0) @ head.WK(x0).transpose(1, 2) / s ** 0.5
    scores = scores.masked_fill(src_pad[:, None, :], float("-inf"))
    assert_close(torch.softmax(scores, -1), maps["encoder"][0][:, 0])
    # recording is off again afterwards, so training pays nothing
    assert enc.basic_encoder_arr[0].self_attention.record_attention is False


@pytest.mark.slow
def test_positional_encoding_and_schedule_pictures(tmp_path):
    out = run("show_positional_encoding.py", "--embedding-size", 64, cwd=tmp_path)
    assert "wrote" in out
    assert_picture(tmp_path / "positional_encoding.png", 800, 300)
    out = run("show_lr_schedule.py", "--num-warmup-steps", 100, "--steps", 1000,
              cwd=tmp_path)
    assert "peak learning rate 6.250e-03 at step 100" in out          # 256^-0.5 * 100^-0.5
    assert_picture(tmp_path / "lr_schedule.png", 400, 250)


@pytest.mark.slow
def test_score_checkpoints_table_plot_and_tracked_bleu(trained):
    folder, x, enc, dec, trainer, _ = trained
    out = run("score_checkpoints.py", "ck", cwd=folder)
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["0", "1"]
    assert float(rows[1][1]) > 5
    assert_picture(folder / "ck" / "bleu_by_epoch.png", 400, 250)
    # training tracked the same scores at its checkpoints
    tracked = load_checkpoint(str(folder / "ck" / "checkpoint_1.pt"))["held_out_bleu"]
    assert [round(b, 2) for _, _, b in tracked] == [float(r[1]) for r in rows]


def test_divergence_flag():
    assert find_divergence([1.0, 12.0, 20.0, 25.0, 3.0, 0.5]) == 4
    assert find_divergence([1.0, 12.0, 20.0, 19.0, 21.0]) is None
    assert find_divergence([0.0, 0.1, 0.0]) is None          # never rose: not a divergence


@pytest.mark.slow       # compare.py's quick test below runs the same code path in make test
@pytest.mark.parametrize("extra", [[], pytest.param(     # the switches
    ["--full-width-heads", "--tie-embeddings", "--learned-positions", "--dropout", "0.1",
     "--label-smoothing", "0.1"], marks=pytest.mark.slow)])
def test_compare_fg_preln_runs_and_plots(tmp_path, extra):
    from DLStudio.data import generate_corpus, save_archive
    save_archive(generate_corpus(400, seed=6), tmp_path / "tiny.tar.gz")
    out = run("compare_fg_preln.py", "--archive", tmp_path / "tiny.tar.gz", "--minutes", 0.05,
              "--every", 0.025, "--embedding-size", 32, "--num-layers", 1, *extra,
              cwd=tmp_path)
    assert "final held-out BLEU: FG" in out and "FG-no-warmup" in out and "PreLN" in out
    assert_picture(tmp_path / "compare_fg_preln" / "compare_fg_preln.png", 800, 500)
    lines = (tmp_path / "compare_fg_preln" / "compare_fg_preln.csv").read_text().splitlines()
    assert {line.split(",")[0] for line in lines[1:]} == {"FG", "FG-no-warmup", "PreLN"}


@pytest.mark.slow
def test_compare_runs_a_switch_each_for_the_same_number_of_steps(tmp_path):
    from DLStudio.data import generate_corpus, save_archive
    save_archive(generate_corpus(400, seed=6), tmp_path / "tiny.tar.gz")
    runs = "FG,FG:tie_embeddings,PreLN:dropout=0.1:learned_positions"
    out = run("compare_fg_preln.py", "--archive", tmp_path / "tiny.tar.gz", "--steps", 6,
              "--every", 4, "--embedding-size", 32, "--num-layers", 1, "--runs", runs,
              cwd=tmp_path)
    assert "tie_embeddings True" in out and "learned_positions True" in out
    lines = (tmp_path / "compare_fg_preln" / "compare_fg_preln.csv").read_text().splitlines()
    rows = [line.split(",") for line in lines[1:]]
    assert [r[0] for r in rows] == ["FG", "FG", "FG:tie_embeddings", "FG:tie_embeddings",
                                    "PreLN:dropout=0.1:learned_positions"] * 1 + \
        ["PreLN:dropout=0.1:learned_positions"]
    assert [int(r[2]) for r in rows] == [4, 6] * 3      # scored at step 4 and at the end
    bad = subprocess.run([sys.executable, os.path.join(EXAMPLES, "compare_fg_preln.py"),
                          "--runs", "FG:tied"], capture_output=True, text=True, env=ENV,
                         timeout=120)
    assert bad.returncode == 2 and "unknown switch 'tied'" in bad.stderr
