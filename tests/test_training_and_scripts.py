"""Training learns, checkpoints describe themselves, and the scripts work end to end."""

import os
import shutil
import subprocess
import sys

import pytest
import torch

from DLStudio import TransformerFG, TransformerPreLN
from DLStudio.checkpoints import CheckpointError, list_checkpoints, load_checkpoint
from DLStudio.data import BUNDLED_ARCHIVE, generate_corpus, save_archive, split_pairs
from DLStudio.Transformers import TransformerBase

from .conftest import ROOT

EXAMPLES = os.path.join(ROOT, "ExamplesTransformers")
ENV = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")


def run(args, cwd, stdin=None):
    return subprocess.run([sys.executable] + args, cwd=cwd, capture_output=True, text=True,
                          env=ENV, input=stdin, timeout=600)


def test_short_training_raises_held_out_bleu(trained):
    folder, x, enc, dec, trainer, untrained = trained
    result = x.run_code_for_evaluating(enc, dec, show=0, print_fn=lambda *a: None)
    assert untrained["bleu"] < 5
    assert result["bleu"] > untrained["bleu"] + 25, (untrained["bleu"], result["bleu"])
    losses = trainer.train_losses
    assert sum(losses[-20:]) / 20 < 0.5 * sum(losses[:20]) / 20
    # held-out English sentences were never trained on
    assert not {en for en, _ in x.held_out_corpus} & {en for en, _ in x.training_corpus}


def test_finished_sentences_leave_the_batch_without_changing_translations(trained):
    from DLStudio.evaluation import greedy_decode
    from DLStudio.model.tokens import EOS_INDEX
    _, x, enc, dec, trainer, _ = trained
    model = trainer.model.eval()
    src = x.sentence_with_words_to_ints([en for en, _ in x.held_out_corpus[:200]], "en")
    fast = greedy_decode(model, src, x.max_seq_length)
    every_step = greedy_decode(model, src, x.max_seq_length, stop_at_eos=False)
    assert every_step.size(1) == x.max_seq_length - 1
    lengths = (fast != EOS_INDEX).sum(1)
    assert len(set(lengths.tolist())) > 2          # sentences do finish at different steps
    expected = every_step.masked_fill((every_step == EOS_INDEX).cumsum(1) > 0, EOS_INDEX)
    assert torch.equal(fast, expected[:, :fast.size(1)])
    assert (expected[:, fast.size(1):] == EOS_INDEX).all()


def test_checkpoints_every_epoch_and_self_describing(trained):
    folder, x, enc, dec, trainer, _ = trained
    assert list_checkpoints(folder / "ck") == [0, 1]
    assert (folder / "ck" / "train_loss.png").stat().st_size > 5000
    payload = load_checkpoint(str(folder / "ck" / "checkpoint_1.pt"))
    assert payload["variant"] == "FG" and payload["epoch"] == 1
    assert payload["encoder_config"] == {"num_basic_encoders": 2, "num_atten_heads": 4}
    assert payload["container_args"]["embedding_size"] == 64
    assert payload["vocab_fingerprint"] == x.vocab_fingerprint
    assert set(payload["model"]) == {"embeddings_generator_en", "embeddings_generator_es",
                                     "encoder", "decoder"}
    assert payload["optimizer"]["n_steps"] == trainer.step


def test_checkpoint_round_trip_gives_identical_translations(trained):
    folder, x, enc, dec, trainer, _ = trained
    english = [en for en, _ in x.held_out_corpus[:40]]
    before = x.translate(trainer.model, english)
    x2, model2, _ = TransformerBase.from_checkpoint(str(folder / "ck" / "checkpoint_1.pt"))
    assert isinstance(x2, TransformerFG)
    assert x2.translate(model2, english) == before
    assert x2.held_out_corpus == x.held_out_corpus   # the archive was found again
    # the final model, at path_saved_model, is the same model
    x3, model3, _ = TransformerBase.from_checkpoint(str(folder / "saved_FG.pt"))
    assert x3.translate(model3, english[:5]) == before[:5]


def test_checkpoint_for_another_model_is_refused(trained):
    folder, x, enc, dec, trainer, _ = trained
    path = str(folder / "ck" / "checkpoint_1.pt")
    dls = x.dl_studio
    wrong_layers = x.MasterEncoder(dls, x, num_basic_encoders=3, num_atten_heads=4)
    with pytest.raises(CheckpointError, match="encoder_config"):
        x.load_weights(path, wrong_layers, dec)
    other = TransformerFG(dl_studio=dls, corpus=generate_corpus(200, seed=9), embedding_size=64)
    e2 = other.MasterEncoder(dls, other, 2, 4)
    d2 = other.MasterDecoderWithMasking(dls, other, 2, 4)
    with pytest.raises(CheckpointError, match="vocabularies"):
        other.load_weights(path, e2, d2)
    preln = TransformerPreLN(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=64)
    with pytest.raises(CheckpointError, match="variant"):
        preln.load_weights(path, preln.MasterEncoder(dls, preln, 2, 4),
                           preln.MasterDecoderWithMasking(dls, preln, 2, 4))


def test_existing_checkpoints_are_not_overwritten_without_asking(trained):
    folder, x, enc, dec, trainer, _ = trained
    with pytest.raises(FileExistsError, match="overwrite"):
        x.run_code_for_training(x.dl_studio, enc, dec, checkpoints_dir=str(folder / "ck"))


def test_translating_user_input(trained):
    folder, x, enc, dec, trainer, _ = trained
    out = x.run_code_for_translating_user_input(enc, dec, str(folder / "ck"), 1,
                                                "She is NOT tired, today!")
    x1, model1, _ = TransformerBase.from_checkpoint(str(folder / "ck" / "checkpoint_1.pt"))
    assert out == x1.translate(model1, ["she is not tired today"])[0]      # normalised
    english = [en for en, _ in x.held_out_corpus[:40]]
    by_checkpoint = [TransformerBase.from_checkpoint(str(folder / "ck" / f"checkpoint_{i}.pt"))
                     for i in (0, 1)]
    said = [x.run_code_for_translating_user_input(enc, dec, str(folder / "ck"), i, english)
            for i in (0, 1)]
    assert said == [xi.translate(model, english) for xi, model, _ in by_checkpoint]
    assert said[0] != said[1]                    # so the index named is the one translating
    with pytest.raises(ValueError, match="'xylophone'"):
        x.run_code_for_translating_user_input(enc, dec, str(folder / "ck"), 1, "i xylophone")
    with pytest.raises(ValueError, match="nothing to translate"):
        x.run_code_for_translating_user_input(enc, dec, str(folder / "ck"), 1, " ?! ")
    with pytest.raises(ValueError, match="at most 8"):
        x.run_code_for_translating_user_input(enc, dec, str(folder / "ck"), 1, "i am " * 5)


@pytest.mark.slow
def test_scripts_test_checkpoint_and_translate(trained):
    folder = trained[0]
    out = run([os.path.join(EXAMPLES, "test_checkpointFG.py"), "ck", "1", "--show", "3",
               "--beam", "2"], cwd=folder)
    assert out.returncode == 0, out.stderr
    assert "held-out BLEU" in out.stdout and "sacreBLEU" in out.stdout
    out = run([os.path.join(EXAMPLES, "translate_sentence.py"), "ck", "1", "i am hungry"],
              cwd=folder)
    assert out.returncode == 0 and out.stdout.strip(), out.stderr
    lines = "she is tired\nblorp\n\nwe are happy\n"
    out = run([os.path.join(EXAMPLES, "translate_sentence.py"), "ck", "1", "-"], cwd=folder,
              stdin=lines)
    printed = out.stdout.split("\n")
    assert out.returncode == 1 and "'blorp'" in out.stderr
    assert printed[0] and printed[1] == "" and printed[2] == "" and printed[3]
    for bad in (["ck"], ["ck", "x", "hi"], ["ck", "7", "hi"], ["nodir", "1", "hi"]):
        out = run([os.path.join(EXAMPLES, "translate_sentence.py")] + bad, cwd=folder)
        assert out.returncode in (1, 2) and "Traceback" not in out.stderr, out.stderr
        assert ("usage" in out.stderr) or ("error:" in out.stderr)


@pytest.mark.slow
def test_training_script_missing_archive_explains(tmp_path):
    out = run([os.path.join(EXAMPLES, "seq2seq_with_transformerFG.py")], cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "build-archive" in out.stderr and "synthetic" in out.stderr
    out = run([os.path.join(EXAMPLES, "seq2seq_with_transformerFG.py"), "--epochs", "0"],
              cwd=tmp_path)
    assert out.returncode == 2 and "usage" in out.stderr


@pytest.mark.parametrize("variant", ["FG", pytest.param("PreLN", marks=pytest.mark.slow)])
def test_dlstudio_258_script_runs_unchanged(tmp_path, variant):
    """DLStudio's own example script, with only the epochs and the archive name changed."""
    script = f"seq2seq_with_transformer{variant}.py"
    shutil.copy(os.path.join(ROOT, "tests", "dlstudio_scripts", script), tmp_path)
    corpus = generate_corpus(300, seed=2)
    save_archive(corpus, tmp_path / "data" / "en_es_tiny.tar.gz")
    out = run([script], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "held-out BLEU" in out.stdout
    checkpoints = tmp_path / f"checkpoints_with_masking_{variant}"
    assert list_checkpoints(checkpoints) == [0]
    # myoutput.txt: every held-out sentence, translated by the trained model
    x, model, _ = TransformerBase.from_checkpoint(str(checkpoints / "checkpoint_0.pt"))
    english = sorted({en for en, _ in split_pairs(corpus.pairs)[1]})
    rows = [line.split("\t") for line in
            (tmp_path / "myoutput.txt").read_text(encoding="utf-8").splitlines()]
    assert sorted(row[0] for row in rows) == [" ".join(en.split()[1:-1]) for en in english]
    assert [row[1] for row in rows] == x.translate(model, [row[0] for row in rows])
    # DLStudio's saved_* files: the final model, part by part (it trained one epoch)
    final = load_checkpoint(str(checkpoints / "checkpoint_0.pt"))["model"]
    assert load_checkpoint(str(tmp_path / f"saved_encoder_{variant}"))["epoch"] == 0
    for part in ("decoder", "embeddings_generator_en", "embeddings_generator_es"):
        saved = torch.load(tmp_path / f"saved_{part}_{variant}", weights_only=True)
        assert saved.keys() == final[part].keys()
        assert all(torch.equal(saved[k], final[part][k]) for k in saved)


def test_beam_search_drops_finished_sentences_without_changing_a_translation(trained):
    """A sentence whose every hypothesis has emitted EOS leaves the batch; the translations
    are those of the search that keeps every sentence to the last step."""
    from DLStudio.evaluation import beam_search
    from DLStudio.model.tokens import EOS_INDEX
    folder, x, enc, dec, trainer, untrained = trained
    model = trainer.model.eval()
    src = x.vocab.encode([en for en, _ in x.held_out_corpus[:40]], "en")

    def sentences(ids):
        return [row[:row.index(EOS_INDEX)] if EOS_INDEX in row else row for row in ids.tolist()]

    dropping = beam_search(model, src, x.max_seq_length, beam_width=4)
    keeping = beam_search(model, src, x.max_seq_length, beam_width=4, stop_at_eos=False)
    assert keeping.size(1) == x.max_seq_length - 1
    assert sentences(dropping) == sentences(keeping)
    lengths = {len(s) for s in sentences(dropping)}
    assert len(lengths) > 2              # sentences did finish at different steps


def test_encoder_and_decoder_depths_are_set_apart_and_a_checkpoint_keeps_them(tmp_path, capsys):
    """--num-encoder-layers / --num-decoder-layers: a deep encoder, a shallow decoder."""
    from DLStudio.checkpoints import checkpoint_files, load_checkpoint
    from DLStudio.cli.translation import train_main, translate_main
    ck = str(tmp_path / "ck")
    assert train_main("FG", ["--archive", "bundled", "--embedding-size", "16", "--num-layers",
                             "1", "--num-encoder-layers", "3", "--num-atten-heads", "2",
                             "--batch-size", "32", "--max-steps", "4", "--checkpoints-dir", ck,
                             "--no-eval", "--cpu"]) == 0
    payload = load_checkpoint(checkpoint_files(ck)[-1])
    assert payload["encoder_config"]["num_basic_encoders"] == 3
    assert payload["decoder_config"]["num_basic_decoders"] == 1          # --num-layers
    capsys.readouterr()
    assert translate_main([ck, "last", "she is tired"]) == 0 and capsys.readouterr().out.strip()


def test_a_warm_up_longer_than_the_run_is_said(tmp_path, caplog):
    """FG's warm-up counts steps and the run epochs: when the run ends before the warm-up
    does, the rate never reaches its peak, and the run says so; otherwise it says nothing."""
    import logging

    from DLStudio import DLStudio
    archive = tmp_path / "tiny.tar.gz"
    save_archive(generate_corpus(300, seed=5), archive)
    said = []
    for warm_up in (1000, 5):
        dls = DLStudio(use_gpu=False, batch_size=32, epochs=1, seed=0,
                       path_saved_model=str(tmp_path / f"saved_{warm_up}.pt"))
        x = TransformerFG(dl_studio=dls, data_archive=str(archive), embedding_size=16,
                          num_warmup_steps=warm_up)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            x.run_code_for_training(dls, x.MasterEncoder(dls, x, 1, 2),
                                    x.MasterDecoderWithMasking(dls, x, 1, 2),
                                    checkpoints_dir=str(tmp_path / f"ck_{warm_up}"))
        said.append(" ".join(r.getMessage() for r in caplog.records))
    assert "the warm-up is 1000 steps and this run 9" in said[0], said[0]
    assert "warm-up" not in said[1], said[1]
