"""DLSTUDIO_QUICK=1: every script at a size that runs in seconds, the epochs and checkpoint
indices as given (the pages' next commands find their checkpoints), and nothing changed
without it."""

import argparse

import torch

from DLStudio.quick import BATCHES_PER_EPOCH, CAPS, shrink


def _args(**values):
    return argparse.Namespace(**values)


def test_a_quick_run_shrinks_sizes_and_budgets_and_keeps_the_rest(monkeypatch):
    monkeypatch.setenv("DLSTUDIO_QUICK", "1")
    args = shrink(_args(embedding_size=256, num_layers=4, num_atten_heads=8, kv_heads=4,
                        epochs=40, minutes=30.0, steps=3000, every=500, batch_size=8,
                        pairs="my_pairs.tsv", full_width_heads=True, seed=7))
    assert (args.embedding_size, args.num_layers, args.num_atten_heads) == (16, 1, 2)
    assert args.kv_heads == 1 and args.num_atten_heads % args.kv_heads == 0
    assert args.epochs == 40                       # checkpoint_39.pt is still written
    assert args.minutes == CAPS["minutes"] and isinstance(args.minutes, float)
    assert args.steps == 20 and args.every == 2    # a tenth of the budget, at most
    assert args.batch_size == 8                    # smaller than the cap: as given
    assert args.pairs == "my_pairs.tsv" and args.full_width_heads is True and args.seed == 7


def test_without_the_variable_nothing_changes(monkeypatch):
    for value in (None, "0", "yes"):
        if value is None:
            monkeypatch.delenv("DLSTUDIO_QUICK", raising=False)
        else:
            monkeypatch.setenv("DLSTUDIO_QUICK", value)
        assert vars(shrink(_args(embedding_size=256, steps=3000))) == {
            "embedding_size": 256, "steps": 3000}


def test_a_scripts_parser_is_shrunk_as_it_reads_the_flags(monkeypatch):
    from DLStudio.cli.common import Parser
    p = Parser()
    p.add_argument("--embedding-size", type=int, default=256)
    p.add_argument("--max-steps", type=int, default=None)
    monkeypatch.setenv("DLSTUDIO_QUICK", "1")
    assert vars(p.parse_args(["--embedding-size", "512"])) == {"embedding_size": 16,
                                                               "max_steps": None}
    monkeypatch.delenv("DLSTUDIO_QUICK")
    assert p.parse_args([]).embedding_size == 256


def test_a_quick_epoch_trains_a_few_batches_and_its_checkpoints_keep_their_indices(
        tmp_path, monkeypatch):
    from DLStudio import DLStudio, TransformerFG
    from DLStudio.data import generate_corpus
    corpus = generate_corpus(400, seed=0)
    monkeypatch.setenv("DLSTUDIO_QUICK", "1")
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=5, seed=0,
                   path_saved_model=str(tmp_path / "saved.pt"))
    x = TransformerFG(dl_studio=dls, corpus=corpus, embedding_size=16, num_warmup_steps=4)
    trainer = x.run_code_for_training(dls, x.MasterEncoder(dls, x, 1, 2),
                                      x.MasterDecoderWithMasking(dls, x, 1, 2),
                                      checkpoints_dir=str(tmp_path / "ck"))
    assert trainer.step == 5 * BATCHES_PER_EPOCH       # 400 pairs would be 25 batches each
    payload = torch.load(tmp_path / "ck" / "checkpoint_4.pt", weights_only=False)
    assert payload["epoch"] == 4
