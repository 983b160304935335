"""An ensemble: several translation models decoding as one, from the mean of their next-word
probabilities. Its step is that mean, computed by hand; with the caches it decodes as
without them; of one model twice it translates as the model; the scripts take --ensemble and
refuse models it cannot average, by name."""

import copy
import os

import pytest
import torch

from DLStudio import TransformerFG
from DLStudio.checkpoints import checkpoint_files
from DLStudio.evaluation import beam_search, greedy_decode
from DLStudio.evaluation.ensemble import Ensemble, same_vocabulary

from .close import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny(seed, embedding_size=16):
    from DLStudio import DLStudio
    from DLStudio.data import generate_corpus
    torch.manual_seed(seed)
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=1, seed=seed)
    x = TransformerFG(dl_studio=dls, corpus=generate_corpus(60, seed=5),
                      embedding_size=embedding_size)
    enc = x.MasterEncoder(dls, x, num_basic_encoders=1, num_atten_heads=2)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=2, num_atten_heads=2)
    return x, x.model_from(enc, dec).eval()


@pytest.fixture(scope="module")
def two():
    (x, a), (_, b) = tiny(0), tiny(1)
    src = x.vocab.encode([en for en, _ in x.training_corpus[:3]], "en")
    return x, a, b, src


class WithoutCaches(Ensemble):
    """The same ensemble, each step decoding the whole prefix again (no caches)."""

    def decoding(self):
        from contextlib import nullcontext
        return nullcontext([])


def test_its_next_word_is_the_mean_of_the_members_probabilities(two):
    x, a, b, src = two
    tgt = torch.tensor([[1, 7, 9, 4]] * 3)                    # SOS and three Spanish ids
    with torch.no_grad():
        expected = torch.log((torch.softmax(a(src, tgt), -1) + torch.softmax(b(src, tgt), -1))
                             / 2)                              # (B, T, V)
        ensemble = Ensemble([a, b])
        memory, mask = ensemble.encode(src)
        got = ensemble.decode(tgt, memory, mask)
    assert got.shape == expected.shape
    assert_close(got, expected)
    assert_close(got.exp().sum(-1), torch.ones(3, 4))  # probabilities


def test_with_the_caches_it_decodes_as_without_them(two):
    x, a, b, src = two
    cached, whole = Ensemble([a, b]), WithoutCaches([a, b])
    n = x.vocab.max_seq_length
    assert torch.equal(greedy_decode(cached, src, n, stop_at_eos=False),
                       greedy_decode(whole, src, n, stop_at_eos=False))
    assert torch.equal(beam_search(cached, src, n, beam_width=3),
                       beam_search(whole, src, n, beam_width=3))


def test_an_ensemble_of_one_model_twice_translates_as_the_model(two):
    x, a, _, src = two
    twice = Ensemble([a, copy.deepcopy(a)])
    n = x.vocab.max_seq_length
    assert torch.equal(greedy_decode(twice, src, n), greedy_decode(a, src, n))
    assert torch.equal(beam_search(twice, src, n, beam_width=4, length_penalty=1.0),
                       beam_search(a, src, n, beam_width=4, length_penalty=1.0))


def test_what_it_cannot_average_is_refused_by_name(two):
    x, a, _, _ = two
    with pytest.raises(ValueError, match="two models or more, not 1"):
        Ensemble([a])
    _, wide = tiny(2, embedding_size=32)
    with pytest.raises(ValueError, match=r"embedding sizes differ \(\[16, 32\]\)"):
        Ensemble([a, wide])
    from DLStudio.data.vocabulary import Vocabulary
    other = Vocabulary(x.vocab.vocab_en, x.vocab.vocab_es[:-1] + ["zzz"], x.vocab.max_seq_length)
    with pytest.raises(ValueError, match="model 2 was trained with another vocabulary"):
        same_vocabulary([x.vocab, other])
    longer = Vocabulary(x.vocab.vocab_en, x.vocab.vocab_es, x.vocab.max_seq_length + 1)
    with pytest.raises(ValueError, match="model 2 translates up to"):
        same_vocabulary([x.vocab, longer])
    same_vocabulary([x.vocab, Vocabulary(x.vocab.vocab_en, x.vocab.vocab_es,
                                         x.vocab.max_seq_length)])


# ---------------------------------------------------------------------------------------
# The scripts: test_checkpoint and translate_sentence take --ensemble FILE, once per file
def train(folder, seed, *more):
    from DLStudio.cli.translation import train_main
    assert train_main("FG", ["--archive", "bundled", "--embedding-size", "16", "--num-layers",
                             "1", "--num-atten-heads", "2", "--batch-size", "32",
                             "--max-steps", "15", "--ema", "--seed", str(seed),
                             "--checkpoints-dir", str(folder), "--no-eval", "--cpu", *more]) == 0
    return checkpoint_files(folder)[-1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ensemble")
    return [train(root / f"seed{seed}", seed) for seed in (0, 1)], root


@pytest.mark.slow
def test_test_checkpoint_scores_the_ensemble(runs, capsys):
    from DLStudio.cli.translation import test_checkpoint_main
    from DLStudio.evaluation import evaluate_bleu
    (first, second), _ = runs
    x, a, _ = TransformerFG.from_checkpoint(first, weights="average")
    _, b, _ = TransformerFG.from_checkpoint(second, weights="average")
    bleu = evaluate_bleu(Ensemble([a, b]), x.vocab, x.held_out_corpus, 2,
                         length_penalty=1.0)["bleu"]
    capsys.readouterr()
    assert test_checkpoint_main("FG", [first, "--ensemble", second, "--weights", "average",
                                       "--beam", "2", "--length-penalty", "1.0",
                                       "--show", "0"]) == 0
    said = capsys.readouterr()
    assert f": {bleu:.2f}" in said.out
    assert "an ensemble of 2 checkpoints" in said.err


@pytest.mark.slow
def test_translate_sentence_takes_an_ensemble(runs, capsys):
    from DLStudio.cli.translation import translate_main
    (first, second), _ = runs
    x, a, _ = TransformerFG.from_checkpoint(first, weights="average")
    _, b, _ = TransformerFG.from_checkpoint(second, weights="average")
    expected = x.translate(Ensemble([a, b]), ["she is tired"], 1)
    capsys.readouterr()
    assert translate_main([first, "she is tired", "--ensemble", second, "--weights",
                           "average", "--beam", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == expected


@pytest.mark.slow
def test_ensemble_goes_before_or_after_the_checkpoint(runs, capsys):
    from DLStudio.cli.translation import test_checkpoint_main, translate_main
    (first, second), root = runs
    said = []
    for argv in ([first, "--ensemble", second, "--show", "0"],
                 ["--ensemble", second, first, "--show", "0"],
                 ["--ensemble", second, "--ensemble", second, first, "--show", "0"]):
        capsys.readouterr()
        assert test_checkpoint_main("FG", argv) == 0, argv
        said.append(capsys.readouterr())
    assert said[0].out == said[1].out and "an ensemble of 2" in said[1].err
    assert "an ensemble of 3" in said[2].err
    folder = os.path.dirname(first)                     # DIR last, the ensemble first
    assert translate_main(["--ensemble", second, folder, "last", "she is tired"]) == 0
    assert translate_main([first, "she is tired", "--ensemble", second]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0] == out[1]
    with pytest.raises(SystemExit) as usage:        # the old form: one flag, two files
        test_checkpoint_main("FG", [first, "--ensemble", second, second])
    assert usage.value.code == 2 and f"unrecognized arguments: {second}" in \
        capsys.readouterr().err


@pytest.mark.slow
def test_a_model_of_another_vocabulary_is_refused_with_a_message(runs, capsys):
    from DLStudio.cli.translation import test_checkpoint_main
    (first, _), root = runs
    bpe = train(root / "bpe", 2, "--tokenizer", "bpe", "--vocab-size", "300")
    capsys.readouterr()
    assert test_checkpoint_main("FG", [first, "--ensemble", bpe, "--show", "0"]) == 1
    err = capsys.readouterr().err
    assert "--ensemble: model 2 was trained with another vocabulary" in err
    assert "Traceback" not in err
    with pytest.raises(SystemExit) as usage:
        test_checkpoint_main("FG", [first, "--ensemble", str(root / "missing.pt")])
    assert usage.value.code == 2 and "--ensemble: no file" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# --members N: N models trained at once, one process each, then their ensemble scored.
@pytest.mark.slow
def test_members_train_at_once_and_their_ensemble_is_scored(tmp_path, capsys):
    import json

    from DLStudio.cli.translation import train_main
    from DLStudio.evaluation import evaluate_bleu
    top, results = tmp_path / "run", tmp_path / "rows.json"
    assert train_main("FG", ["--recipe", "fast30", "--archive", "bundled", "--vocab-size", "300",
                             "--embedding-size", "16", "--num-layers", "1",
                             "--num-atten-heads", "2", "--batch-size", "32", "--max-steps", "12",
                             "--ema", "0.9", "--members", "2", "--seed", "1",
                             "--checkpoints-dir", str(top), "--cpu",
                             "--results", str(results)]) == 0
    out = capsys.readouterr().out
    paths = [checkpoint_files(top / f"member_{i}")[-1] for i in (0, 1)]
    members = [TransformerFG.from_checkpoint(p, weights="average") for p in paths]
    from DLStudio.checkpoints import load_checkpoint
    assert [load_checkpoint(p)["step"] for p in paths] == [12, 12]
    assert "seed 2" in out and "seed 3" in out                  # seeds 2 x 1 + 0, 1
    assert not torch.equal(members[0][1].decoder.out.weight, members[1][1].decoder.out.weight)
    x = members[0][0]
    bleu = evaluate_bleu(Ensemble([m for _, m, _ in members]), x.vocab, x.held_out_corpus, 4,
                         length_penalty=1.0)["bleu"]
    assert f"the ensemble of 2, average weights, beam 4, length penalty 1.0: {bleu:.2f}" in out
    assert f"\" --ensemble {paths[1]}" in out                 # the command it prints runs
    for i in (0, 1):          # each member scored itself too, in its own log
        assert "held-out BLEU, average weights, beam 4" in (top / f"member_{i}.log").read_text()
    row = json.loads(results.read_text())["rows"][-1]
    assert row["steps"] == [12, 12] and [m["seed"] for m in row["members"]] == [2, 3]
    for i, (member, (x, model, _)) in enumerate(zip(row["members"], members)):
        alone = evaluate_bleu(model, x.vocab, x.held_out_corpus, 4, length_penalty=1.0)
        assert member["other_decodings"][-1]["bleu"] == round(alone["bleu"], 2), i
        assert isinstance(member["greedy_bleu"], (int, float))
    assert row["other_decodings"][-1]["bleu"] == round(bleu, 2)


@pytest.mark.slow
def test_a_member_that_fails_is_reported_with_its_own_message(tmp_path, capsys):
    from DLStudio.cli.translation import train_main
    top = tmp_path / "run"
    assert train_main("FG", ["--archive", str(tmp_path / "none.tar.gz"), "--members", "2",
                             "--checkpoints-dir", str(top), "--max-steps", "2"]) == 1
    err = capsys.readouterr().err
    assert "member 0 failed: " in err and "member 1 failed: " in err
    assert "error: " in err and f"(all it said: {top / 'member_0.log'})" in err
    assert "Traceback" not in err
    assert train_main("FG", ["--archive", "bundled", "--members", "2", "--resume",
                             "--checkpoints-dir", str(top)]) == 1
    assert "resume each member's directory" in capsys.readouterr().err


def test_an_abbreviated_flag_is_refused_and_starts_nothing(tmp_path, capsys):
    """argparse would read --member 2 as --members 2; the members' command lines, which
    strip --members by its spelling, would then start members of their own, without end."""
    import subprocess
    import sys
    top = tmp_path / "run"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "ExamplesTransformers",
                                                     "seq2seq_with_transformerFG.py"),
                        "--member", "2", "--checkpoints-dir", str(top), "--max-steps", "1"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 2 and "unrecognized arguments: --member 2" in r.stderr
    assert not top.exists()
    from DLStudio.cli.common.flags import Parser
    assert Parser().allow_abbrev is False


def test_members_flags_are_passed_on_by_what_they_set_not_their_spelling():
    from DLStudio.cli.ensemble import _passed_on
    from DLStudio.cli.translation import training_parser
    argv = ["--members=2", "--seed", "3", "--checkpoints-dir=run", "--epochs", "2",
            "--results", "r.json", "--results-command=x y", "--archive", "bundled"]
    assert _passed_on(argv, training_parser("FG")) == ["--epochs", "2", "--archive", "bundled"]


def test_a_member_never_starts_members(tmp_path, capsys, monkeypatch):
    from DLStudio.cli.translation import train_main
    monkeypatch.setenv("DLSTUDIO_MEMBER", "1")
    assert train_main("FG", ["--members", "2", "--checkpoints-dir", str(tmp_path / "run"),
                             "--max-steps", "1"]) == 1
    assert "inside a member" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_result_row_is_not_dirty_by_its_own_result_file(tmp_path):
    import subprocess

    from DLStudio.cli.common import results
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    (repo / "rows.json").write_text('{"rows": []}')
    (repo / "code.py").write_text("x = 1\n")
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run(git + command, cwd=repo, check=True)

    def commit():
        old = results.__file__
        results.__file__ = str(repo / "code.py")
        try:
            return results._commit(str(repo / "rows.json"))
        finally:
            results.__file__ = old
    (repo / "rows.json").write_text('{"rows": [1]}')
    assert not commit().endswith("-dirty")
    (repo / "code.py").write_text("x = 2\n")
    assert commit().endswith("-dirty")
