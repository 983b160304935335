"""--recipe NAME gives the training flags their measured values (a flag given beside it still
wins) and scores the recipe's other decodings after the greedy one; the sweep that chooses
a recipe combines only the changes that beat the noise of two seeds."""

import json
import os
import re
import sys

import pytest
import torch

from DLStudio.checkpoints import checkpoint_files
from DLStudio.cli import common
from DLStudio.cli.translation import parse_training_args, train_main

from .conftest import ROOT


def test_a_recipe_sets_the_defaults_and_a_flag_still_wins():
    plain = parse_training_args("FG", [])
    assert (plain.batch_size, plain.tokenizer, plain.max_minutes) == (50, "word", None)
    recipe = parse_training_args("FG", ["--recipe", "today30"])
    assert (recipe.batch_size, recipe.tokenizer, recipe.dropout, recipe.max_minutes) == \
        (128, "bpe", 0.1, 30.0)
    mine = parse_training_args("FG", ["--recipe", "today30", "--batch-size", "7",
                                      "--tokenizer", "word"])
    assert (mine.batch_size, mine.tokenizer, mine.label_smoothing) == (7, "word", 0.1)


@pytest.mark.slow
def test_a_recipe_scores_its_other_decodings(tmp_path, monkeypatch, capsys):
    from DLStudio import TransformerFG
    from DLStudio.evaluation.decode_and_score import evaluate_bleu
    monkeypatch.setitem(common.RECIPES, "tiny", {
        "archive": "bundled", "embedding_size": 16, "num_layers": 1, "num_atten_heads": 2,
        "batch_size": 32, "max_steps": 12, "tokenizer": "bpe", "vocab_size": 300,
        "ema": 0.9, "also_score": [("average", 2, 1.0)]})
    folder, results = str(tmp_path / "ck"), str(tmp_path / "results" / "recipes.json")
    assert train_main("FG", ["--recipe", "tiny", "--checkpoints-dir", folder,
                             "--results", results]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("held-out BLEU, average weights"))
    assert "beam 2, length penalty 1.0" in line
    x, model, _ = TransformerFG.from_checkpoint(checkpoint_files(folder)[-1], weights="average")
    r = evaluate_bleu(model, x.vocab, x.held_out_corpus, 2, length_penalty=1.0)
    assert f": {r['bleu']:.2f} (sacreBLEU" in line
    # --results: the figures printed, with how they were made, added to the result file
    greedy = re.search(r"held-out BLEU \(NLTK[^:]*: ([\d.]+)", out)[1]
    assert train_main("FG", ["--recipe", "tiny", "--checkpoints-dir", folder, "--overwrite",
                             "--seed", "1", "--results", results]) == 0
    with open(results, encoding="utf-8") as f:
        rows = json.load(f)["rows"]
    assert [row["seed"] for row in rows] == [0, 1]
    assert f"{rows[0]['greedy_bleu']:.2f}" == greedy
    assert rows[0]["other_decodings"] == [{"weights": "average", "beam": 2,
                                           "length_penalty": 1.0, "bleu": round(r["bleu"], 2),
                                           "sacrebleu": round(r["sacrebleu"], 2)}]
    assert rows[0]["steps"] == 12 and rows[0]["machine"]["cores"] >= 1
    assert rows[1]["command"] == ("python3 ExamplesTransformers/seq2seq_with_transformerFG.py "
                                  "--recipe tiny --checkpoints-dir ck --overwrite --seed 1 "
                                  "--results recipes.json")


@pytest.mark.slow
def test_modern30_is_todays_parts_and_only_the_preln_script_runs_it(tmp_path, capsys):
    """The recipe sets each switch since 2017; the post-LN script refuses it with the script
    that runs it; through that script the checkpoint records the parts and the decoding."""
    from DLStudio.checkpoints import load_checkpoint
    args = parse_training_args("PreLN", ["--recipe", "modern30"])
    assert (args.norm, args.positions, args.feed_forward, args.kv_heads, args.full_width_heads,
            args.ema, args.learning_rate, args.dropout, args.tokenizer) == \
        ("rmsnorm", "rope", "swiglu", 1, True, 0.998, 1e-3, 0.0, "bpe")
    assert train_main("FG", ["--recipe", "modern30"]) == 1
    said = capsys.readouterr().err
    assert "run seq2seq_with_transformerPreLN.py --recipe modern30" in said
    folder = str(tmp_path / "ck")
    assert train_main("PreLN", ["--recipe", "modern30", "--archive", "bundled",
                                "--embedding-size", "16", "--num-layers", "1",
                                "--num-atten-heads", "2", "--vocab-size", "300",
                                "--max-steps", "4", "--max-seq-length", "12",
                                "--checkpoints-dir", folder]) == 0
    beam, alpha = common.RECIPES["modern30"]["also_score"][-1][1:]
    assert f"held-out BLEU, average weights, beam {beam}, length penalty {alpha}:" in \
        capsys.readouterr().out
    payload = load_checkpoint(checkpoint_files(folder)[-1])
    made = payload["container_args"]
    assert (made["norm"], made["positions"], made["feed_forward"], made["kv_heads"],
            made["full_width_heads"]) == ("rmsnorm", "rope", "swiglu", 1, True)


def test_the_sweep_combines_only_what_beats_the_noise():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from recipe_sweep import best_levers, needless, settings_of

    def row(*bleus):
        return {"dev": {f"d{i}": {"bleu": b} for i, b in enumerate(bleus)}}
    results = {"baseline": row(30.0, 31.0), "seed1": row(30.5, 30.2),  # noise 0.5
               "budget": row(31.2, 32.0), "shared": row(31.4),         # +1.0 and +0.4
               "deep-encoder": row(29.0, 30.0)}
    assert best_levers(results) == (["budget"], pytest.approx(0.5))
    sizes = {"embedding_size": 256, "num_layers": 4, "num_atten_heads": 4}
    best = settings_of("best", 30.0, 10.0, sizes, ["budget", "deep-encoder"])
    assert (best["schedule"], best["num_encoder_layers"], best["num_decoder_layers"],
            best["max_minutes"], best["shared_vocab"]) == ("budget", 6, 2, 30.0, False)
    assert settings_of("best-10", 30.0, 10.0, sizes, ["budget"])["max_minutes"] == 10.0
    assert settings_of("shared", 30.0, 10.0, sizes)["shared_vocab"] is True
    # Nothing beats the noise: "best" would be the baseline again; best-10 is still new.
    results["budget"] = row(30.9)
    assert best_levers(results)[0] == []
    assert "the baseline row" in needless("best", []) and needless("best-10", []) is None
    assert needless("best", ["budget"]) is None


def test_modern30_trains_what_the_sweep_measured_as_modern30_nodrop():
    """The recipe is the sweep row it was chosen from: each flag the row sets, the recipe
    sets to the same value (the rate 1e-3, not today30's 5e-4, and no dropout included)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from recipe_sweep import settings_of
    sizes = {"embedding_size": 256, "num_layers": 4, "num_atten_heads": 4}
    row = settings_of("modern30-nodrop", 30.0, 10.0, sizes)
    args = parse_training_args("PreLN", ["--recipe", "modern30"])
    for flag in ("learning_rate", "norm", "positions", "feed_forward", "full_width_heads",
                 "kv_heads", "batch_size", "dropout", "label_smoothing", "vocab_size",
                 "tokenizer", "embedding_size", "num_atten_heads", "max_minutes"):
        assert getattr(args, flag) == row[flag], flag
    assert (row["learning_rate"], row["dropout"], row["variant"]) == (1e-3, 0.0, "PreLN")
    assert settings_of("modern-gqa", 30.0, 10.0, sizes)["learning_rate"] == 5e-4


@pytest.mark.slow
def test_the_length_penalty_reaches_the_beam_of_every_script(trained, capsys):
    from DLStudio import TransformerFG
    from DLStudio.cli.translation import test_checkpoint_main, translate_main
    from DLStudio.evaluation.decode_and_score import evaluate_bleu, translate_sentences
    folder = str(trained[0] / "ck")
    x, model, _ = TransformerFG.from_checkpoint(checkpoint_files(folder)[-1])
    english = "she will not eat the red apples"
    for alpha in (0.0, 2.0):
        assert translate_main([folder, "last", english, "--beam", "3",
                               "--length-penalty", str(alpha)]) == 0
        said = capsys.readouterr().out.splitlines()[-1]
        assert said == translate_sentences(model, x.vocab, [english], 3, length_penalty=alpha)[0]
        assert test_checkpoint_main("FG", [folder, "last", "--beam", "3", "--show", "0",
                                           "--length-penalty", str(alpha)]) == 0
        out = capsys.readouterr().out
        bleu = evaluate_bleu(model, x.vocab, x.held_out_corpus, 3, length_penalty=alpha)
        assert f"length penalty {alpha}" in out and f"BLEU (NLTK corpus_bleu, 4-gram, " \
            f"smoothing method1): {bleu['bleu']:.2f}" in out


def test_the_length_penalty_changes_which_hypothesis_the_beam_chooses(trained, capsys):
    """A beam that ignored alpha would pass the test above (script and library alike):
    here alpha must change the choice, towards the longer hypothesis as it grows."""
    from DLStudio import TransformerFG
    from DLStudio.cli.translation import translate_main
    from DLStudio.evaluation.decode_and_score import translate_sentences
    early = os.path.join(str(trained[0] / "ck"), "checkpoint_0.pt")    # after one epoch
    x, model, _ = TransformerFG.from_checkpoint(early)
    english = [" ".join(en.split()[1:-1]) for en, _ in x.held_out_corpus[:50]]
    short = translate_sentences(model, x.vocab, english, 3, length_penalty=0.0)
    long = translate_sentences(model, x.vocab, english, 3, length_penalty=2.0)
    changed = [i for i, (a, b) in enumerate(zip(short, long)) if a != b]
    assert changed, "alpha changed no translation"
    assert all(len(long[i].split()) >= len(short[i].split()) for i in changed)
    i = changed[0]
    for alpha, expected in ((0.0, short[i]), (2.0, long[i])):
        assert translate_main([early, english[i], "--beam", "3",
                               "--length-penalty", str(alpha)]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == expected


def test_the_sweep_refuses_a_development_split_as_large_as_the_training_one(
        tmp_path, monkeypatch, capsys):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import recipe_sweep
    monkeypatch.setattr(sys, "argv", ["recipe_sweep.py", "--dev-sentences", "19000",
                                      "--out", str(tmp_path / "sweep")])
    with pytest.raises(SystemExit) as stopped:
        recipe_sweep.main()
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and "--dev-sentences 19000" in said
    assert "distinct English sentences" in said and "Traceback" not in said


@pytest.mark.slow
def test_make_recipe_runs_the_script_the_recipe_names(tmp_path):
    """``make recipe RECIPE=modern30`` runs the PreLN script (the FG script would refuse it
    by name); fast30 the FG script. A missing archive stops each after the recipe is read."""
    import subprocess
    for name in ("modern30", "fast30"):
        r = subprocess.run(["make", "-s", "recipe", f"ARCHIVE={tmp_path}/missing.tar.gz",
                            f"RECIPE={name}", f"PY={sys.executable}", "STAMP="], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
        said = r.stdout + r.stderr
        assert r.returncode != 0 and "missing.tar.gz" in said, said
        assert "this script trains" not in said and "Traceback" not in said, said


def test_the_sweeps_other_averages_match_the_trainers_own_at_its_decay(tmp_path):
    """--also-ema keeps its averages beside the trainer's: at the trainer's decay and every
    step they must be the trainer's average (the same formula, the same weights); every 4
    steps with the decay raised to the 4th power, close to it; the file holds each decay."""
    import torch

    from DLStudio import DLStudio, TransformerPreLN
    from DLStudio.data import BUNDLED_ARCHIVE
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from recipe_sweep import OtherAverages, decays
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=1, seed=0, learning_rate=1e-3)
    x = TransformerPreLN(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=16,
                         checkpoint_freq=1)
    enc, dec = x.MasterEncoder(dls, x, 1, 2), x.MasterDecoderWithMasking(dls, x, 1, 2)
    trainer = x.trainer(enc, dec, str(tmp_path / "ck"), max_steps=30, ema=0.9)
    same, sparse = OtherAverages(trainer.model, [0.9], every=1), OtherAverages(
        trainer.model, [0.9], every=4)
    trainer.run(callback=lambda t: same(t) or sparse(t))
    same.finish(trainer)
    sparse.finish(trainer)
    own = dict(trainer.average.named_parameters())
    for name, p in same.averages[0.9].named_parameters():
        assert torch.equal(p, own[name]), name
    far = max((p - own[n]).abs().max().item() / (own[n].abs().max().item() + 1e-12)
              for n, p in sparse.averages[0.9].named_parameters())
    assert far < 0.05
    moved = max((p - dict(trainer.model.named_parameters())[n]).abs().max().item()
                for n, p in same.averages[0.9].named_parameters())
    assert moved > 0                                   # an average, not the weights
    same.save(str(tmp_path / "averages.pt"))
    saved = torch.load(str(tmp_path / "averages.pt"), weights_only=True)
    assert set(saved["averages"]) == {"0.9"} and saved["since_step"] == 0
    assert decays("0.999,0.9995") == (0.999, 0.9995)
    from recipe_sweep import reached_at
    for decay in (0.9, 0.998, 0.999, 0.9995):
        s = reached_at(decay)
        assert (1 + s) / (10 + s) >= decay > (1 + s - 1) / (10 + s - 1)
    assert reached_at(0.999) == 8990 and reached_at(0.999, start=4) == 2996
    quick = OtherAverages(trainer.model, [0.5], every=1, start=4)
    assert quick.start == 4
    import argparse
    with pytest.raises(argparse.ArgumentTypeError):
        decays("0.999,1.5")


def trained_sweep_rows(tmp_path, rows, minutes=30.0, **more):
    """Each sweep row trained at tiny sizes on the bundled corpus through recipe_sweep.py's
    own settings_of and train_row (word tokens; ``more``: other settings, e.g. max_steps),
    restored from its checkpoint: {row: (container, model, checkpoint)}."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from recipe_sweep import VARIANTS, settings_of, train_row

    from DLStudio.data import BUNDLED_ARCHIVE, load_archive, split_pairs
    corpus = load_archive(BUNDLED_ARCHIVE)
    split = split_pairs(corpus.pairs)
    sizes = {"embedding_size": 16, "num_layers": 1, "num_atten_heads": 2}
    made = {}
    for row in rows:
        s = {**settings_of(row, minutes, minutes, sizes), "tokenizer": "word", **more}
        path = train_row(str(tmp_path / row), s, corpus, split, ema=None)
        made[row] = VARIANTS["PreLN"].from_checkpoint(path)
    return made


@pytest.mark.slow
def test_the_sweeps_tied_row_trains_a_tied_output_layer(tmp_path):
    """modern30-tied: the sweep hands tie_embeddings to the model it trains (the output
    layer is the decoder's word vectors, in the checkpoint too); modern30-nodrop's is not."""
    tied = {}
    rows = ("modern30-tied", "modern30-nodrop")
    for row, (_, model, _) in trained_sweep_rows(tmp_path, rows, minutes=0.003).items():
        out, words = model.decoder.out.weight, model.embeddings_generator_es.embedding.weight
        tied[row] = out.data_ptr() == words.data_ptr()
        assert tied[row] == torch.equal(out, words)
    assert tied == {"modern30-tied": True, "modern30-nodrop": False}


@pytest.mark.slow
def test_the_sweeps_larger_rows_train_larger_models_for_max_steps(tmp_path):
    """modern30-ffn1024, modern30-emb320 and modern30-6+4 train the model they name (the
    feed-forward width, the embedding, the layers reach the checkpoint), and a row given
    max_steps (recipe_sweep.py --max-steps) trains that many steps, not its minutes."""
    made = {}
    rows = ("modern30-nodrop", "modern30-ffn1024", "modern30-emb320", "modern30-6+4")
    for row, (x, model, payload) in trained_sweep_rows(tmp_path, rows, max_steps=3).items():
        hidden = model.encoder.basic_encoder_arr[0].feed_forward.W1.out_features    # SwiGLU's
        made[row] = (payload["step"], x.embedding_size, hidden,
                     len(model.encoder.basic_encoder_arr), len(model.decoder.basic_decoder_arr))
    assert made == {"modern30-nodrop": (3, 16, round(2 * 32 / 3), 1, 1),
                    "modern30-ffn1024": (3, 16, round(2 * 1024 / 3), 1, 1),
                    "modern30-emb320": (3, 320, round(2 * 640 / 3), 1, 1),
                    "modern30-6+4": (3, 16, round(2 * 32 / 3), 6, 4)}


def test_the_feed_forward_width_is_a_flag_and_a_checked_setting(tmp_path):
    """--feed-forward-size F reaches the model (ReLU's hidden width F) and its checkpoint,
    which rebuilds it alone; a width that is no whole number >= 1 is refused by name."""
    from DLStudio import DLStudio, TransformerPreLN
    folder = str(tmp_path / "ck")
    assert train_main("PreLN", ["--archive", "bundled", "--embedding-size", "16",
                                "--num-layers", "1", "--num-atten-heads", "2",
                                "--feed-forward-size", "40", "--max-steps", "2",
                                "--checkpoints-dir", folder, "--no-eval"]) == 0
    x, model, payload = TransformerPreLN.from_checkpoint(checkpoint_files(folder)[-1])
    assert payload["container_args"]["feed_forward_size"] == 40 == x.feed_forward_size
    assert model.decoder.basic_decoder_arr[0].feed_forward.W1.out_features == 40
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="feed_forward_size is the feed-forward"):
            TransformerPreLN(dl_studio=DLStudio(), feed_forward_size=bad)


@pytest.mark.parametrize("argv, said", [
    (["--time-steps", "11"], "--time-steps 11: the median leaves out the first 10 steps"),
    (["--time-steps", "20", "--rows", "baseline,best"], "--time-steps times the rows of LEVERS"),
])
def test_the_sweeps_step_timing_refuses_what_it_cannot_time(argv, said, tmp_path, monkeypatch,
                                                            capsys):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import recipe_sweep
    monkeypatch.setattr(sys, "argv", ["recipe_sweep.py", "--out", str(tmp_path / "s"),
                                      "--dev-sentences", "10", *argv])
    with pytest.raises(SystemExit) as stop:
        recipe_sweep.main()
    assert stop.value.code == 2 and said in capsys.readouterr().err
