"""--ema: an exponential moving average of the weights, kept beside them in each checkpoint;
--weights average translates and scores with it. The average is the formula's, step by step;
a resumed run continues it as an unbroken one would; a checkpoint without one says so."""

import pytest
import torch

from DLStudio import DLStudio, TransformerFG
from DLStudio.checkpoints import CheckpointError, checkpoint_files
from DLStudio.data import generate_corpus

from .close import assert_close

CORPUS = generate_corpus(200, seed=5)


def run_with(folder, epochs=2, **options):
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=epochs, seed=1, learning_rate=1e-3)
    x = TransformerFG(dl_studio=dls, corpus=CORPUS, embedding_size=16, num_warmup_steps=10,
                      checkpoint_freq=1)
    enc = x.MasterEncoder(dls, x, num_basic_encoders=1, num_atten_heads=2)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=1, num_atten_heads=2)
    return x.trainer(enc, dec, str(folder), **options)


def params(model):
    return [p.detach().clone() for p in model.parameters()]


def test_the_average_is_the_formulas_step_by_step(tmp_path):
    t = run_with(tmp_path / "ck", ema=0.9)
    mean = params(t.model)                                  # it starts from the first weights

    def follow(trainer):
        d = min(0.9, (1 + trainer.step) / (10 + trainer.step))
        for m, w in zip(mean, params(trainer.model)):
            m.mul_(d).add_(w, alpha=1 - d)
    t.run(callback=follow)
    assert t.step > 20
    for ours, theirs in zip(params(t.average), mean):
        assert_close(ours, theirs)
    assert any(not torch.equal(a, w) for a, w in zip(params(t.average), params(t.model)))


def test_a_checkpoint_hands_out_either_weights(tmp_path):
    t = run_with(tmp_path / "ck", ema=0.99)
    t.run()
    path = checkpoint_files(tmp_path / "ck")[-1]
    for which, expected in (("raw", t.model), ("average", t.average)):
        _, model, _ = TransformerFG.from_checkpoint(path, weights=which)
        assert all(torch.equal(a, b) for a, b in zip(params(model), params(expected)))


def test_a_resumed_average_is_the_unbroken_runs(tmp_path):
    whole = run_with(tmp_path / "whole", ema=0.95)
    whole.run()
    first = run_with(tmp_path / "parts", ema=0.95)
    first.run(callback=lambda trainer: trainer.step >= 17)   # stopped inside epoch 2
    rest = run_with(tmp_path / "parts", ema=0.95, resume=True)
    rest.run()
    assert rest.step == whole.step
    for a, b in zip(params(rest.average), params(whole.average)):
        assert_close(a, b)


def test_no_average_is_said_and_a_bad_decay_refused(tmp_path, capsys):
    t = run_with(tmp_path / "ck", epochs=1)
    t.run()
    path = checkpoint_files(tmp_path / "ck")[-1]
    with pytest.raises(CheckpointError, match="trained without --ema"):
        TransformerFG.from_checkpoint(path, weights="average")
    from DLStudio.cli.translation import translate_main
    assert translate_main([path, "you eat", "--weights", "average"]) == 1
    assert "--weights raw" in capsys.readouterr().err
    with pytest.raises(ValueError, match="between 0 and 1"):
        run_with(tmp_path / "other", ema=1.5)


def test_the_scripts_train_with_ema_and_translate_with_the_average(tmp_path, capsys):
    from DLStudio.cli.explore import explore_main
    from DLStudio.cli.translation import train_main, translate_main
    ck = str(tmp_path / "ck")
    assert train_main("FG", ["--archive", "bundled", "--embedding-size", "16", "--num-layers",
                             "1", "--num-atten-heads", "2", "--batch-size", "32",
                             "--max-steps", "15", "--ema", "--checkpoints-dir", ck,
                             "--no-eval", "--cpu"]) == 0
    capsys.readouterr()
    assert translate_main([ck, "last", "she is tired", "--weights", "average"]) == 0
    assert capsys.readouterr().out.strip()
    page = tmp_path / "page.html"
    assert explore_main([ck, "last", "she is tired", "--weights", "average", "--out",
                         str(page)]) == 0
    assert '"weights":"average"' in page.read_text(encoding="utf-8")


def test_resume_refuses_another_decay_of_the_average_by_name(tmp_path):
    first = run_with(tmp_path / "ck", ema=0.998)
    first.run(callback=lambda trainer: trainer.step >= 5)
    with pytest.raises(ValueError, match="ema: 0.998 there, 0.999 now"):
        run_with(tmp_path / "ck", ema=0.999, resume=True)
    with pytest.raises(ValueError, match="ema: 0.998 there, None now"):
        run_with(tmp_path / "ck", resume=True)                 # the average would be lost
    assert run_with(tmp_path / "ck", ema=0.998, resume=True).step == 5
    plain = run_with(tmp_path / "plain")                       # no average there: as today
    plain.run(callback=lambda trainer: trainer.step >= 5)
    assert run_with(tmp_path / "plain", ema=0.99, resume=True).step == 5


def gpt_run(folder, **options):
    from DLStudio import TransformerGPT
    sentences = [es for _, es in CORPUS.pairs]
    dls = DLStudio(use_gpu=False, seed=0, batch_size=32, epochs=2, learning_rate=1e-3,
                   path_saved_model=str(folder / "saved.pt"))
    gpt = TransformerGPT(dl_studio=dls, sentences=sentences, tokenizer="word",
                         embedding_size=16, num_basic_decoders=1, num_atten_heads=2,
                         dropout=0.1, checkpoint_freq=1)
    return gpt.run_code_for_training(str(folder), **options)


def vit_run(folder, **options):
    from DLStudio import visTransformer
    from DLStudio.data import SHAPE_CLASSES
    dls = DLStudio(use_gpu=False, seed=0, batch_size=16, epochs=2, learning_rate=1e-3,
                   path_saved_model=str(folder / "saved.pt"))
    vit = visTransformer(dl_studio=dls, patch_size=(8, 8), embedding_size=16,
                         num_basic_encoders=1, num_atten_heads=2, classes=SHAPE_CLASSES,
                         checkpoint_freq=1, augment=True, dropout=0.1)
    vit.load_shapes_dataset(num_train=96, num_test=16)
    return vit.run_code_for_training_visTransformer(checkpoint_dir=str(folder), **options)


@pytest.mark.parametrize("run", [gpt_run, vit_run], ids=["GPT", "visTransformer"])
def test_a_resumed_average_of_a_gpt_or_a_vit_is_the_unbroken_runs(tmp_path, run):
    whole = run(tmp_path / "whole", ema=0.9)
    first = run(tmp_path / "parts", ema=0.9, max_steps=whole.step // 2 + 1)
    assert 0 < first.step < whole.step
    rest = run(tmp_path / "parts", ema=0.9, resume=True)
    assert rest.step == whole.step
    for a, b in zip(params(rest.average), params(whole.average)):
        assert_close(a, b)
    assert any(not torch.equal(a, w) for a, w in zip(params(rest.average), params(rest.model)))


# ---------------------------------------------------------------------------------------
# What a student keeps is the best the run gives: a checkpoint with an average records its
# best use (the average, and its recipe's decoding), and every later script uses it.
@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory):
    from DLStudio.cli import common
    from DLStudio.cli.translation import train_main
    folder = str(tmp_path_factory.mktemp("recipe") / "ck")
    common.RECIPES["tiny-best"] = {
        "archive": "bundled", "embedding_size": 16, "num_layers": 1, "num_atten_heads": 2,
        "batch_size": 32, "max_steps": 30, "ema": 0.9, "num_warmup_steps": 20,
        "also_score": [("average", 1, 0.6), ("average", 3, 1.0)]}
    try:
        assert train_main("FG", ["--recipe", "tiny-best", "--checkpoints-dir", folder,
                                 "--no-eval"]) == 0
    finally:
        del common.RECIPES["tiny-best"]
    return folder


def test_a_recipe_run_records_its_best_use_and_the_scripts_use_it(recipe_run, capsys):
    from DLStudio.checkpoints import load_checkpoint
    from DLStudio.cli.translation import translate_main
    path = checkpoint_files(recipe_run)[-1]
    assert load_checkpoint(path)["best_use"] == {"weights": "average", "beam": 3,
                                                 "length_penalty": 1.0}
    english = ["she is not tired today", "we will eat the red apples"]
    x, average, _ = TransformerFG.from_checkpoint(path, weights="average")
    _, raw, _ = TransformerFG.from_checkpoint(path, weights="raw")
    best = x.translate(average, english, 3, length_penalty=1.0)
    plain = x.translate(raw, english, 1)
    capsys.readouterr()
    for sentence, expected in zip(english, best):
        assert translate_main([recipe_run, "last", sentence]) == 0
        said = capsys.readouterr()
        assert said.out.splitlines() == [expected]                  # one line per input
        assert "averaged weights and a beam of 3 (length penalty 1.0)" in said.err
    for sentence, expected in zip(english, plain):
        assert translate_main([recipe_run, "last", sentence, "--weights", "raw",
                               "--beam", "1"]) == 0
        said = capsys.readouterr()
        assert said.out.splitlines() == [expected] and not said.err.strip()


def test_test_checkpoint_and_the_explorer_take_the_best_use(recipe_run, tmp_path, capsys):
    from DLStudio.cli.explore import explore_main
    from DLStudio.cli.translation import test_checkpoint_main
    from DLStudio.evaluation.decode_and_score import evaluate_bleu
    path = checkpoint_files(recipe_run)[-1]
    x, average, _ = TransformerFG.from_checkpoint(path, weights="average")
    bleu = evaluate_bleu(average, x.vocab, x.held_out_corpus, 3, length_penalty=1.0)["bleu"]
    capsys.readouterr()
    assert test_checkpoint_main("FG", [recipe_run, "last", "--show", "0"]) == 0
    said = capsys.readouterr()
    assert "beam 3, length penalty 1.0" in said.out and f": {bleu:.2f}" in said.out
    assert "averaged weights" in said.err
    page = tmp_path / "page.html"
    assert explore_main([recipe_run, "last", "she is tired", "--out", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert '"weights":"average"' in text and "width 3, length penalty 1.0" in text


def test_a_gpt_and_a_vit_with_an_average_are_used_with_it(tmp_path, capsys):
    from DLStudio.cli.gpt import prompts_main
    from DLStudio.cli.vision import vit_test_checkpoint_main
    gpt_run(tmp_path / "gpt", ema=0.9)
    capsys.readouterr()
    assert prompts_main([str(tmp_path / "gpt"), "last", "el", "--samples", "1",
                         "--seed", "0"]) == 0
    assert "its averaged weights" in capsys.readouterr().err
    vit_run(tmp_path / "vit", ema=0.9)
    capsys.readouterr()
    assert vit_test_checkpoint_main([str(tmp_path / "vit"), "last", "--images", "4"]) == 0
    assert "its averaged weights" in capsys.readouterr().err
