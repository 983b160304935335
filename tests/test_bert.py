"""TransformerBERT: the masking rule, the loss at the selected tokens only, the special
tokens by the tokenizer's ids (never 0 and 1), a student's nested classes reaching it,
pre-training that learns, resumes as an unbroken run and masks anew each epoch, the
tasks' files, rows refused by line, and Hugging Face BERT weights read into ours (slow)."""

import os

import pytest
import torch

from DLStudio import DLStudio, TransformerBERT
from DLStudio.checkpoints import checkpoint_path, load_checkpoint
from DLStudio.data import BUNDLED_ARCHIVE, generate_corpus, load_archive, split_pairs
from DLStudio.data.bert_text import (
    RowError,
    SpecialTokenizer,
    mask_tokens,
    read_labelled_rows,
)
from DLStudio.data.tasks import task_rows, write_task
from DLStudio.model.bert import BERTParts

from .close import assert_close

SENTENCES = [f"the {a} {v} the {b}" for a in ("dog", "cat", "girl", "boy", "bird")
             for v in ("sees", "likes", "chases", "finds") for b in ("ball", "toy", "hat")]


def small(sentences=SENTENCES, seed=0, **settings):
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=2, seed=seed, learning_rate=2e-3)
    options = dict(tokenizer="word", embedding_size=16, num_basic_encoders=1,
                   num_atten_heads=2)
    options.update(settings)
    return TransformerBERT(dl_studio=dls, sentences=sentences, **options)


def test_the_masking_rule_selects_15_percent_and_corrupts_80_10_10_never_a_special():
    ids = torch.randint(5, 1000, (400, 50))
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    special[:, 40:] = True                                     # [CLS], [SEP], [PAD]s
    corrupted, selected = mask_tokens(ids, special, torch.Generator().manual_seed(1), 4, 1000)
    assert not selected[special].any()
    rate = selected.sum().item() / (~special).sum().item()
    assert abs(rate - 0.15) < 0.01
    chosen, was = corrupted[selected], ids[selected]
    masked = (chosen == 4).float().mean().item()
    kept = (chosen == was).float().mean().item()
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1 - 0.001) < 0.02
    assert torch.equal(corrupted[~selected], ids[~selected])
    again = mask_tokens(ids, special, torch.Generator().manual_seed(1), 4, 1000)
    assert torch.equal(again[0], corrupted) and torch.equal(again[1], selected)


def test_a_random_replacement_is_never_a_special_token():
    """Issue 49, item 13: the 10% random tokens are drawn from the ordinary ids only, in
    the container's masking and the held-out rows' alike (a random [PAD] would hide a
    position the model must predict)."""
    bert = small()
    specials = torch.tensor(bert.vocab.special_ids)
    ids, _ = bert.vocab.layout(SENTENCES * 40)
    special = bert.vocab.special_mask(ids)
    corrupted, selected = bert.mask_tokens(ids, special, torch.Generator().manual_seed(3))
    swapped = corrupted[selected & (corrupted != bert.vocab.mask_id) & (corrupted != ids)]
    assert len(swapped) > 100 and not torch.isin(swapped, specials).any()
    ordinary = set(range(bert.vocab.size)) - set(bert.vocab.special_ids)
    assert set(swapped.tolist()) <= ordinary and len(set(swapped.tolist())) > 0.8 * len(ordinary)
    from DLStudio.data.bert_text import masked_once
    held, _, chosen, original = masked_once(bert.vocab, SENTENCES * 40, 12, seed=5)
    changed = held[chosen & (held != bert.vocab.mask_id) & (held != original)]
    assert len(changed) and not torch.isin(changed, specials).any()


def test_the_padding_is_the_uncorrupted_rows():
    """A [PAD] written into a row by a corruption (a student's masking may) hides nothing:
    the loss reads where the padding is from the targets, the uncorrupted row."""
    bert = small()
    bert.eval()
    ids, segments = bert.vocab.layout(SENTENCES[:4])
    selected = torch.zeros_like(ids, dtype=torch.bool)
    selected[:, 2] = True
    corrupted = ids.clone()
    corrupted[:, 2] = bert.vocab.pad_id
    with torch.no_grad():
        total, _ = bert.mlm_loss(corrupted, segments, selected, ids)
        as_real = bert(corrupted, segments, selected, pad=ids == bert.pad_id)
        as_padding = bert(corrupted, segments, selected)
    by_hand = torch.nn.functional.cross_entropy(as_real, ids[selected], reduction="sum")
    assert_close(total, by_hand)
    assert not torch.allclose(as_real, as_padding)        # the mask would have hidden it


def test_the_loss_counts_the_selected_tokens_only():
    bert = small()
    ids, segments = bert.vocab.layout(SENTENCES[:4])
    selected = torch.zeros_like(ids, dtype=torch.bool)
    selected[:, 2] = True
    total, n = bert.mlm_loss(ids, segments, selected, ids)
    logits = bert(ids, segments)                                            # (B, T, V)
    by_hand = torch.nn.functional.cross_entropy(logits[:, 2], ids[:, 2], reduction="sum")
    assert n == 4
    assert_close(total, by_hand)


def shuffled_vocab(folder):
    """A WordPiece vocabulary whose special tokens are nowhere near ids 0 and 1."""
    words = ["the", "dog", "cat", "sees", "ball", "a", "runs", "##s", "[SEP]", "big", "[PAD]",
             "red", "[CLS]", "toy", "[MASK]", "hat", "[UNK]"]
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(words) + "\n")
    return SpecialTokenizer.from_vocab_txt(path)


def test_special_tokens_are_the_tokenizer_s_ids_and_padding_changes_no_vector(tmp_path):
    tok = shuffled_vocab(tmp_path)
    assert (tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id) == (10, 12, 8, 14)
    bert = small(tokenizer="wordpiece", vocab=tok, sentences=None, max_seq_length=12).eval()
    ids, segments = tok.layout(["the big dog sees the red ball", "a cat"])
    assert ids[1, 4:].tolist() == [tok.pad_id] * (ids.size(1) - 4)    # [CLS] a cat [SEP]
    alone, _ = tok.layout(["a cat"])
    with torch.no_grad():
        padded = bert.encode(ids, segments)[1, :4]
        unpadded = bert.encode(alone)[0]
    assert_close(padded, unpadded)
    ids, _ = tok.layout(["the dog [MASK] the ball"])       # the literal [MASK] is the token
    assert ids[0].tolist() == [12, 0, 1, 14, 0, 4, 8]


def test_a_pair_is_laid_out_with_segments_and_cut_to_fit():
    tok = small().vocab
    ids, segments = tok.layout(["the dog sees the ball"], ["the cat likes the toy"], max_len=9)
    assert ids[0, 0] == tok.cls_id and (ids[0] == tok.sep_id).sum() == 2
    assert ids.size(1) == 9 and segments[0].tolist() == [0] * 5 + [1] * 4


def test_a_student_s_attention_head_and_embeddings_reach_bert():
    calls = []

    class MyBERT(TransformerBERT):
        class AttentionHead(TransformerBERT.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                calls.append("head")
                return super().forward(x, mask, memory)

        class EmbeddingsGenerator(TransformerBERT.EmbeddingsGenerator):
            def forward(self, ids):                   # the contract: ids in, vectors out
                calls.append("embeddings")
                return super().forward(ids)

    dls = DLStudio(use_gpu=False, seed=0)
    bert = MyBERT(dl_studio=dls, sentences=SENTENCES, tokenizer="word", embedding_size=16,
                  num_basic_encoders=1, num_atten_heads=2)
    ids, segments = bert.vocab.layout(SENTENCES[:2], SENTENCES[2:4])
    bert(ids, segments)
    assert calls == ["embeddings", "head", "head"]


def test_segments_reach_the_vectors():
    bert = small().eval()
    ids, segments = bert.vocab.layout(["the dog sees the ball"], ["the cat likes the toy"])
    with torch.no_grad():
        assert not torch.allclose(bert.encode(ids, segments), bert.encode(ids))


def test_pre_training_learns_and_a_resumed_run_is_the_unbroken_one(tmp_path):
    unbroken = small().run_code_for_pretraining(str(tmp_path / "a"))
    assert sum(unbroken.train_losses[-3:]) < sum(unbroken.train_losses[:3])
    small().run_code_for_pretraining(str(tmp_path / "b"), max_steps=5)
    resumed = small().run_code_for_pretraining(str(tmp_path / "b"), resume=True)
    assert resumed.train_losses == pytest.approx(unbroken.train_losses, abs=1e-6)


def test_every_epoch_masks_anew_and_the_held_out_once(tmp_path):
    trainer = small().trainer(str(tmp_path / "c"), track_perplexity=True)
    trainer.dls.batch_size = 64                       # one batch of every sentence an epoch

    def masks(epoch):
        (corrupted, _, selected, targets), = trainer.batches(epoch)
        return {tuple(t.tolist()): s for t, s in zip(targets, selected)}
    first, second = masks(0), masks(1)
    assert set(first) == set(second)
    differ = sum(not torch.equal(first[row], second[row]) for row in first)
    assert differ > len(first) // 2
    assert all(torch.equal(first[row], m) for row, m in masks(0).items())   # repeatable
    trainer.run()
    payload = load_checkpoint(checkpoint_path(str(tmp_path / "c"), 1))
    assert len(payload["held_out_mlm_perplexity"]) == 1
    assert 0 <= payload["held_out_mlm_accuracy"][0][2] <= 100
    untrained = small().masked_scores()
    assert untrained == small().masked_scores()                # masked once: the same
    assert untrained["perplexity"] > payload["held_out_mlm_perplexity"][0][2]


def test_a_checkpoint_rebuilds_the_model_and_its_tokenizer(tmp_path):
    bert = small()
    bert.run_code_for_pretraining(str(tmp_path / "d"), max_steps=2)
    again = TransformerBERT.from_checkpoint(checkpoint_path(str(tmp_path / "d"), "0_partial"))
    ids, segments = bert.vocab.layout(SENTENCES[:3])
    bert.eval()
    assert torch.equal(again.model(ids, segments), bert(ids, segments))
    assert again.model.vocab.fingerprint == bert.vocab.fingerprint
    assert again.model.fill_mask("the dog [MASK] the ball")[0][0][1] > 0


def test_resume_refuses_another_mask_rate(tmp_path):
    small().run_code_for_pretraining(str(tmp_path / "e"), max_steps=2)
    with pytest.raises(ValueError, match="mask_rate"):
        small(mask_rate=0.3).run_code_for_pretraining(str(tmp_path / "e"), resume=True)


def test_the_next_sentence_task_needs_ordered_text():
    with pytest.raises(ValueError, match="in order"):
        small(pair_task="next").trainer()
    trainer = small(pair_task="next", sentences=SENTENCES, ordered=True).trainer()
    ids, segments, selected, targets, is_next = next(trainer.batches(0))
    assert (segments == 1).any() and set(is_next.tolist()) <= {0, 1}
    mlm, pair = trainer.model(ids, segments, selected, "mlm+next")          # one pass
    assert mlm.shape == (int(selected.sum()), trainer.model.vocab.size)
    assert pair.shape == (len(ids), 2)
    total, n = trainer.model.pair_task_loss(ids, segments, selected, targets, is_next)
    alone, _ = trainer.model.mlm_loss(ids, segments, selected, targets)
    assert n == int(selected.sum()) and total > alone


def test_fine_tuning_from_a_pre_trained_bert_keeps_its_weights_but_the_classifier():
    bert = small()
    tuned = bert.with_labels(("no", "yes"))
    base = dict(bert.named_parameters())
    for name, p in tuned.named_parameters():
        if name.startswith("classifier."):
            assert name not in base
        else:
            assert torch.equal(p, base[name]), name
    scratch = bert.with_labels(("no", "yes"), pretrained=False)
    assert not torch.equal(scratch.segment_embeddings.weight, tuned.segment_embeddings.weight)
    assert scratch.vocab is bert.vocab and scratch.embedding_size == bert.embedding_size


def test_bad_rows_are_refused_with_their_line_and_unseen_labels_by_name(tmp_path):
    path = tmp_path / "rows.tsv"
    path.write_text("yes\tgood\nno\tbad\n\nyes good\n", encoding="utf-8")
    with pytest.raises(RowError, match="line 4"):
        read_labelled_rows(str(path))
    path.write_text("yes\tgood\tbueno\nno\tbad\n", encoding="utf-8")
    with pytest.raises(RowError, match="line 2: 1 text"):
        read_labelled_rows(str(path))
    bert = small().with_labels(("no", "yes"))
    path.write_text("maybe\tthe dog\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'maybe'"):
        bert.run_code_for_finetuning(read_labelled_rows(str(path)), save_checkpoints=False)


def test_a_byte_order_mark_and_a_header_are_not_labels(tmp_path):
    """Issue 49, item 14: a file saved with a byte-order mark keeps its first label; a
    header row is refused, saying what it would have been."""
    path = tmp_path / "rows.tsv"
    path.write_text("yes\tgood\nno\tbad\n", encoding="utf-8-sig")
    assert read_labelled_rows(str(path)).labels == ["yes", "no"]
    assert read_labelled_rows("-", ["\ufeffyes\tgood", "no\tbad"]).labels == ["yes", "no"]
    path.write_text("label\ttext\nyes\tgood\nno\tbad\n", encoding="utf-8")
    with pytest.raises(RowError, match="line 1 looks like a header"):
        read_labelled_rows(str(path))


def test_the_held_out_rows_are_masked_with_the_runs_seed_everywhere(tmp_path):
    bert = small(seed=7)
    trainer = bert.trainer()
    by_trainer = masked_scores_of(bert, trainer.held_out)
    assert bert.masked_scores() == by_trainer
    assert bert.masked_scores(seed=0) != by_trainer


def masked_scores_of(bert, held_out):
    from DLStudio.training.bert import masked_scores
    return masked_scores(bert, *held_out)


@pytest.mark.slow
def test_a_benchmarks_pretraining_text_holds_no_sentence_of_the_test_rows():
    from DLStudio.data.tasks import pretraining_sentences
    corpus = load_archive(BUNDLED_ARCHIVE)
    test = task_rows(corpus, "translation")["test"]
    tested = {text for row in test for text in row[1:]}
    sentences = pretraining_sentences(corpus)
    assert len(sentences) > 10_000 and not tested & set(sentences)


def test_fine_tuning_takes_the_subclass_a_bert_was_pre_trained_with(tmp_path, capsys,
                                                                    monkeypatch):
    from DLStudio.cli.bert import finetune_main, pretrain_main
    text = tmp_path / "text.txt"
    text.write_text("\n".join(SENTENCES + ["word " * 80]) + "\n", encoding="utf-8")
    solution = os.path.join(os.path.dirname(__file__), "exercise_solutions", "masking.py")
    (tmp_path / "my_masking_49.py").write_text(open(solution).read())
    monkeypatch.chdir(tmp_path)                          # --model-class finds it here
    homework = "my_masking_49"
    status = pretrain_main(["--text", str(text), "--tokenizer", "word", "--max-steps", "2",
                            "--embedding-size", "16", "--num-layers", "1",
                            "--num-atten-heads", "2", "--checkpoints-dir",
                            str(tmp_path / "pre"), "--model-class", f"{homework}:MyBERT"])
    out = capsys.readouterr().out
    assert status == 0 and "1 of 61 lines have more than 60 words" in out
    hint = next(line for line in out.splitlines() if "--pretrained" in line)
    assert f"--model-class {homework}:MyBERT" in hint
    rows = tmp_path / "rows.tsv"
    rows.write_text("yes\tthe dog sees the ball\nno\tthe cat likes the hat\n" * 4)
    assert finetune_main(["--pretrained", str(tmp_path / "pre"), "--model-class",
                          f"{homework}:MyBERT", "--train", str(rows), "--max-steps", "2",
                          "--checkpoints-dir", str(tmp_path / "ft")]) == 0


def test_fine_tuning_learns_the_question_task(tmp_path):
    corpus = generate_corpus(600, seed=3)
    write_task(corpus, "question", str(tmp_path), synthetic_seed=3)
    train = read_labelled_rows(str(tmp_path / "train.tsv"))
    test = read_labelled_rows(str(tmp_path / "test.tsv"))
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=6, seed=0, learning_rate=2e-3)
    bert = TransformerBERT(dl_studio=dls, sentences=train.texts, tokenizer="word",
                           embedding_size=32, num_basic_encoders=1, num_atten_heads=2,
                           labels=("no", "yes"), save_checkpoints=False)
    before = (bert.classify(test.texts).argmax(-1) == torch.tensor(
        [bert.labels.index(x) for x in test.labels])).float().mean()
    bert.run_code_for_finetuning(train, test)
    after = (bert.classify(test.texts).argmax(-1) == torch.tensor(
        [bert.labels.index(x) for x in test.labels])).float().mean()
    assert after > 0.9 > before


def test_the_synthetic_tasks_label_what_the_generator_drew_and_keep_test_rows_held_out():
    corpus = load_archive(BUNDLED_ARCHIVE)
    rows = task_rows(corpus, "tense")
    _, held_out = split_pairs(corpus.pairs)
    held = {" ".join(en.split()[1:-1]) for en, _ in held_out}
    assert {text for _, text in rows["test"]} == held
    assert not {text for _, text in rows["train"] + rows["dev"]} & held
    for label, text in rows["train"][:300]:
        words = text.split()
        if "will" in words:
            assert label == "future", text
        if words[0] in ("did", "was", "were"):
            assert label == "past", text


def test_translation_negatives_are_never_a_translation_and_test_rows_are_held_out(tmp_path):
    corpus = generate_corpus(800, seed=2)
    rows = task_rows(corpus, "translation", seed=1)
    pairs = {(" ".join(en.split()[1:-1]), " ".join(es.split()[1:-1]))
             for en, es in corpus.pairs}
    _, held_out = split_pairs(corpus.pairs)
    held_es = {" ".join(es.split()[1:-1]) for _, es in held_out}
    for name, part in rows.items():
        labels = [label for label, _, _ in part]
        assert abs(labels.count("yes") - labels.count("no")) <= len(labels) * 0.02
        for label, en, es in part:
            assert ((en, es) in pairs) == (label == "yes"), (name, en, es)
            if name == "test":
                assert es in held_es
    write_task(corpus, "translation", str(tmp_path / "a"), seed=1)
    write_task(corpus, "translation", str(tmp_path / "b"), seed=1)
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_the_heads_a_task_does_not_read_rest():
    bert = small(labels=("a", "b"))
    mlm = {id(p) for p in bert.unused_parameters("mlm")}
    assert {id(p) for p in bert.classifier.parameters()} <= mlm
    assert id(bert.embeddings_generator.embedding.weight) not in \
        {id(p) for p in bert.unused_parameters("classifier")}       # (tied to the MLM head)


# ---------------------------------------------------------------------------------------
# Hugging Face BERT weights, read into ours.
def hugging_face_folder(folder, old_names=False):
    transformers = pytest.importorskip(
        "transformers", reason="the parity test needs transformers (pip install -e '.[parity]')")
    torch.manual_seed(0)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "ball", "##s",
             "runs", "red", "a"] + [f"w{i}" for i in range(40)]
    config = transformers.BertConfig(       # bert-base-uncased's settings but the sizes
        vocab_size=len(words), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=24, hidden_act="gelu",
        layer_norm_eps=1e-12, type_vocab_size=2)
    model = transformers.BertForMaskedLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.normal_(0, 0.3)                  # so that they matter
    model.save_pretrained(str(folder / "safe"))
    (folder / "old").mkdir()
    (folder / "old" / "config.json").write_text((folder / "safe" / "config.json").read_text())
    state = model.state_dict()
    if old_names:
        state = {k.replace("LayerNorm.weight", "LayerNorm.gamma")
                 .replace("LayerNorm.bias", "LayerNorm.beta"): v for k, v in state.items()}
    torch.save(state, folder / "old" / "pytorch_model.bin")
    for sub in ("safe", "old"):
        (folder / sub / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    return model


@pytest.mark.slow
def test_hugging_face_bert_weights_give_the_same_masked_lm_logits(tmp_path):
    model = hugging_face_folder(tmp_path, old_names=True)
    assert os.listdir(tmp_path / "safe") and (tmp_path / "safe" / "model.safetensors").exists()
    ids = torch.tensor([[2, 5, 6, 4, 5, 10, 7, 3, 0, 0]])
    segments = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0]])
    keep = ids != 0
    with torch.no_grad():
        theirs = model(input_ids=ids, attention_mask=keep.long(), token_type_ids=segments).logits
    for sub in ("safe", "old"):
        bert = TransformerBERT.from_huggingface(str(tmp_path / sub))
        assert bert.full_width_heads and bert.vocab.kind == "wordpiece"
        with torch.no_grad():
            ours = bert(ids, segments)
        assert_close(ours[keep], theirs[keep], what=sub)
    assert bert.vocab.layout(["The red dogs [MASK]"])[0][0].tolist() == [2, 5, 10, 6, 8, 4, 3]


@pytest.mark.slow
def test_the_scripts_read_a_hugging_face_folder(tmp_path, capsys):
    from DLStudio.cli.bert import fill_mask_main, finetune_main
    hugging_face_folder(tmp_path)
    assert fill_mask_main([str(tmp_path / "safe"), "the [MASK] runs", "--top", "3"]) == 0
    assert capsys.readouterr().out.startswith("'the [MASK] runs': ")
    rows = tmp_path / "rows.tsv"
    rows.write_text("yes\tthe dog runs\nno\tthe red ball\n" * 4, encoding="utf-8")
    assert finetune_main(["--pretrained", str(tmp_path / "safe"), "--train", str(rows),
                          "--test", str(rows), "--max-steps", "2", "--checkpoints-dir",
                          str(tmp_path / "tuned")]) == 0
    out = capsys.readouterr().out
    assert "held-out accuracy" in out
    # the BERT paper's fine-tuning (A.3): 3e-5, a tenth of the steps warming up, then decay
    assert "a Hugging Face BERT: fine-tuned at 3e-05, warming up over 1 step (a tenth)" in out
    # with no budget given, the decay ends with the epochs (2 epochs of 8 rows in batches of 4)
    assert finetune_main(["--pretrained", str(tmp_path / "safe"), "--train", str(rows),
                          "--epochs", "2", "--batch-size", "4", "--checkpoints-dir",
                          str(tmp_path / "by_epochs")]) == 0
    assert torch.load(tmp_path / "by_epochs" / "checkpoint_1.pt",
                      weights_only=False)["step"] == 4


@pytest.mark.slow
def test_a_hugging_face_weight_we_cannot_place_is_refused_by_name(tmp_path):
    hugging_face_folder(tmp_path)
    state = torch.load(tmp_path / "old" / "pytorch_model.bin", weights_only=True)
    state["bert.encoder.layer.0.attention.self.distance_embedding.weight"] = torch.zeros(3, 32)
    torch.save(state, tmp_path / "old" / "pytorch_model.bin")
    from DLStudio.checkpoints import CheckpointError
    with pytest.raises(CheckpointError, match="distance_embedding"):
        TransformerBERT.from_huggingface(str(tmp_path / "old"))


def pre_training_folder(folder, cased):
    """A BertForPreTraining (the masked-LM, pooler and next-sentence heads) saved with its
    tokenizer as Hugging Face saves them: do_lower_case in tokenizer_config.json."""
    transformers = pytest.importorskip(
        "transformers", reason="the parity test needs transformers (pip install -e '.[parity]')")
    torch.manual_seed(1)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "The", "Café", "café",
             "cafe", "runs", "Runs", "dog", "Dog", "##s", "."] + [f"w{i}" for i in range(30)]
    config = transformers.BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=24)
    model = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.normal_(0, 0.3)
    model.save_pretrained(str(folder))
    (folder / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=not cased)
    tokenizer.save_pretrained(str(folder))
    return model, transformers.AutoTokenizer.from_pretrained(str(folder))


@pytest.mark.slow
@pytest.mark.parametrize("cased", [True, False])
def test_a_cased_bert_keeps_case_and_accents_as_hugging_face_does(tmp_path, cased):
    _, theirs = pre_training_folder(tmp_path, cased)
    assert "do_lower_case" not in (tmp_path / "config.json").read_text()
    bert = TransformerBERT.from_huggingface(str(tmp_path))
    for text in ("The Café runs.", "the cafe Dogs", "THE CAFÉ"):
        assert bert.vocab.layout([text])[0][0].tolist() == theirs(text)["input_ids"], text


@pytest.mark.slow
def test_every_head_of_a_pre_training_bert_means_what_ours_says(tmp_path):
    """The masked LM, the pooler (the classifier's input) and the next-sentence head of
    BertForPreTraining; its next-sentence label 0 ("B follows A") is our 1 (is_next)."""
    model, tok = pre_training_folder(tmp_path, cased=False)
    bert = TransformerBERT.from_huggingface(str(tmp_path))
    pair = tok(["the dog runs", "the cafe"], ["the cafe .", "dogs run"], padding=True,
               return_tensors="pt")
    ids, segments = pair["input_ids"], pair["token_type_ids"]
    keep = pair["attention_mask"].bool()
    with torch.no_grad():
        out = model(**pair)
        pooled = model.bert(**pair).pooler_output
        mlm, is_next = bert(ids, segments, head="mlm+next")
        ours_pooled = bert.pooler_layer(bert.encode(ids, segments)[:, 0])
    assert_close(mlm[keep], out.prediction_logits[keep])
    assert_close(ours_pooled, pooled)
    assert_close(is_next[:, 1], out.seq_relationship_logits[:, 0])
    assert_close(is_next[:, 0], out.seq_relationship_logits[:, 1])


@pytest.mark.slow
def test_an_untied_output_matrix_is_refused_not_dropped(tmp_path):
    pre_training_folder(tmp_path, cased=False)
    from safetensors.torch import load_file, save_file
    state = load_file(tmp_path / "model.safetensors")
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"] + 1
    save_file(state, tmp_path / "model.safetensors")
    from DLStudio.checkpoints import CheckpointError
    with pytest.raises(CheckpointError, match="untied"):
        TransformerBERT.from_huggingface(str(tmp_path))


def test_bert_parts_build_from_sizes_alone():
    bert = BERTParts(vocab_size=50, pad_id=7, embedding_size=16, max_seq_length=12,
                     num_basic_encoders=1, num_atten_heads=2, num_classes=3,
                     feed_forward="gelu", learned_positions=True, scale_embeddings=False)
    ids = torch.randint(0, 50, (2, 6))
    assert bert(ids).shape == (2, 6, 50)
    assert bert(ids, None, None, "classifier").shape == (2, 3)
    with pytest.raises(ValueError, match="no 'next' head"):
        bert(ids, None, None, "next")
