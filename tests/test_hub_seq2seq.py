"""Real translation models in the lecture's classes: MarianMTModel folders (OPUS-MT's layout)
made by transformers itself with random small weights (tests/hub_seq2seq_folders.py), read
into TransformerFG and compared with transformers: the tokenizer's ids and text, the logits,
and generate's output (greedy and beam search, with the folder's rules). They need
transformers (the parity extra): they skip without it and run in make test-all."""

import contextlib
import json
import os
import random

import pytest
import torch

from DLStudio.data.hub_tokenizer import FolderError
from DLStudio.evaluation.decode_and_score import beam_search, greedy_decode
from DLStudio.evaluation.folder_rules import GenerationRules
from DLStudio.Transformers import TransformerFG, TransformerPreLN
from tests.hub_folders import CORPUS
from tests.hub_seq2seq_folders import SPANISH, VARIED_EN, marian_folder
from tests.test_explorer import page_data
from tests.test_real_models import transformers_or_skip

from .close import assert_close, differ

pytestmark = pytest.mark.slow
KINDS = {"shared vocabulary": {}, "separate vocabularies": {"separate_vocabs": True}}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    transformers_or_skip()
    root = tmp_path_factory.mktemp("marian")
    made = {kind: marian_folder(str(root / kind.replace(" ", "_")), **changes)
            for kind, changes in KINDS.items()}
    made["ends"] = marian_folder(str(root / "ends"), end_bias=5.0, std=0.2)
    return made


def theirs(folder, dtype=torch.float32):
    from transformers import AutoModelForSeq2SeqLM
    return AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=dtype).eval()


@pytest.mark.parametrize("kind", KINDS)
def test_ids_and_text_are_marian_tokenizer_s(folders, kind):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folders[kind])
    ours = TransformerFG.from_huggingface(folders[kind]).container.vocab
    texts = VARIED_EN + ["<unk>", "a</s>b", " <pad> ", "<unk><unk>", "x  </s>  y", ">>es<< hola"]
    assert [ours.ids(t) for t in texts] == [tokenizer(t).input_ids for t in texts]
    spanish = SPANISH[:9] + ["  ¿qué?  ", "el <unk> día", "¡¡ya!!"]
    assert [ours.ids(t, "es") for t in spanish] == \
        [tokenizer(text_target=t).input_ids for t in spanish]
    rng = random.Random(0)
    ids = [[rng.randrange(ours.vocab_es_size) for _ in range(rng.randrange(1, 12))]
           for _ in range(200)]
    assert [ours.decode(i) for i in ids] == \
        [tokenizer.decode(i, skip_special_tokens=True) for i in ids]


def long_batch(vocab):
    """Two sources and targets of over 60 tokens each, the second shorter (padding)."""
    src = vocab.encode([" ".join(VARIED_EN[:6]), "the quick brown fox."], "en")
    tgt = vocab.encode([" ".join(SPANISH[:5]), "¿dónde está el café?"], "es")[:, :-1]
    assert min(src.size(1), tgt.size(1)) >= 60
    return src, (src != vocab.pad_id).long(), tgt


@pytest.mark.parametrize("kind", KINDS)
def test_logits_are_transformers_within_1e_4_of_their_scale(folders, kind):
    model = theirs(folders[kind])
    xformer, ours, _ = TransformerFG.from_huggingface(folders[kind])
    src, mask, tgt = long_batch(xformer.vocab)
    with torch.no_grad():
        want = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        assert_close(ours(src, tgt), want, rel=1e-4)
        wrong = ours.decoder.out.bias.clone()
        ours.decoder.out.bias.zero_()                    # final_logits_bias is read
        assert (ours(src, tgt) - want).abs().max() > 1e-2
        ours.decoder.out.bias.copy_(wrong)


def test_in_bf16_the_likeliest_tokens_are_transformers(folders):
    model = theirs(folders["shared vocabulary"], torch.bfloat16)
    xformer, ours, _ = TransformerFG.from_huggingface(folders["shared vocabulary"],
                                                       dtype=torch.bfloat16)
    assert_bf16_argmax_is_theirs(model, ours, xformer.vocab)


def assert_logits_are_theirs(folder, cls, read=lambda ours: ()):
    """`long_batch`'s logits within 1e-4 of transformers' scale; each parameter of
    ``read(ours)`` is read (zeroed, the logits move by more than rounding). Returns the
    container and our model."""
    model = theirs(folder)
    xformer, ours, _ = cls.from_huggingface(folder)
    src, mask, tgt = long_batch(xformer.vocab)
    with torch.no_grad():
        want = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        assert_close(ours(src, tgt), want, rel=1e-4)
        for part in read(ours):
            kept = part.clone()
            part.zero_()
            assert differ(ours(src, tgt), want)
            part.copy_(kept)
    return xformer, ours


def assert_bf16_argmax_is_theirs(model, ours, vocab):
    """Both in bf16: the same likeliest token wherever transformers' top two are apart by
    more than four of bf16's epsilon, at half the positions of `long_batch` at least."""
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16}
    src, mask, tgt = long_batch(vocab)
    with torch.no_grad():
        want = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits.float()
        got = ours(src, tgt).float()
    top2 = want.topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1]) > 4 * torch.finfo(torch.bfloat16).eps * \
        top2[..., 0].abs()
    assert clear.sum() >= clear.numel() // 2
    assert torch.equal(got.argmax(-1)[clear], want.argmax(-1)[clear])


def sentences(n=200, seed=0):
    rng = random.Random(seed)
    return [" ".join(rng.sample(CORPUS[:9], 2))[:rng.randrange(5, 60)] for _ in range(n)]


def upto_end(row, end=0):
    row = [int(i) for i in row]
    return row[:row.index(end) + 1] if end in row else row


@contextlib.contextmanager
def no_cache(model):
    """Our decoding with every prefix read again (no key/value cache)."""
    model.decoding = lambda: contextlib.nullcontext([])
    try:
        yield model
    finally:
        del model.decoding


GENERATION = {"as the folder says": {}, "no_repeat_ngram_size 3": {"no_repeat_ngram_size": 3},
              "min_length 6": {"min_length": 6}, "length_penalty 0.6": {"length_penalty": 0.6},
              "length_penalty 2, never stop early": {"length_penalty": 2.0,
                                                     "early_stopping": "never"},
              "early_stopping": {"early_stopping": True},
              "6 beams, max_length 20": {"max_length": 20, "num_beams": 6}}


@pytest.mark.parametrize("case", GENERATION)
def test_greedy_and_beam_search_give_generate_s_output(folders, case):
    """200 sentences, many ending early (their end token's bias is raised), batched; greedy
    and beam search under the folder's generation_config.json and other settings."""
    assert_generation_is_theirs(folders["ends"], TransformerFG, GENERATION[case],
                                ended=0 if case == "length_penalty 2, never stop early" else 50)


def assert_generation_is_theirs(folder, cls, changes, ended=50):
    """Greedy and beam search (the folder's beams) on 200 sentences: generate's output under
    the folder's rules and ``changes``, ``ended`` of them at least before max_length.
    Returns our outputs, greedy's and the beams'."""
    model = theirs(folder)
    xformer, ours, _ = cls.from_huggingface(folder)
    end = xformer.vocab.end_id
    rules = GenerationRules.of_folder(dict(xformer.generation_config, **changes), {}, end)
    src = xformer.vocab.encode(sentences(), "en")
    mask = (src != xformer.vocab.pad_id).long()
    outputs = []
    for beams in (1, rules.num_beams):
        with torch.no_grad():
            want = model.generate(input_ids=src, attention_mask=mask,
                                  **dict(changes, num_beams=beams))
            got = greedy_decode(ours, src, rules.max_length, rules=rules) if beams == 1 else \
                beam_search(ours, src, rules.max_length, beams, rules.length_penalty,
                            rules=rules)
        assert [upto_end(r, end) for r in got.tolist()] == \
            [upto_end(r[1:], end) for r in want.tolist()]
        assert sum(len(upto_end(r, end)) < rules.max_length - 1 for r in got.tolist()) >= ended
        outputs.append(got)
    return outputs


def test_without_the_cache_the_output_is_the_same(folders):
    assert_uncached_beams_are_theirs(folders["ends"], TransformerFG)


def assert_uncached_beams_are_theirs(folder, cls):
    """Beam search on 40 sentences, every prefix read again on both sides."""
    model = theirs(folder)
    xformer, ours, _ = cls.from_huggingface(folder)
    rules, end = xformer.generation_rules, xformer.vocab.end_id
    src = xformer.vocab.encode(sentences(40, seed=1), "en")
    mask = (src != xformer.vocab.pad_id).long()
    with torch.no_grad():
        want = model.generate(input_ids=src, attention_mask=mask, use_cache=False)
        with no_cache(ours):
            got = beam_search(ours, src, rules.max_length, rules.num_beams,
                              rules.length_penalty, rules=rules)
    assert [upto_end(r, end) for r in got.tolist()] == \
        [upto_end(r[1:], end) for r in want.tolist()]


def test_translate_reads_the_folder_s_beams_and_tokenizer(folders):
    assert_translations_are_theirs(folders["ends"], TransformerFG)


def assert_translations_are_theirs(folder, cls):
    """The container's translate on 12 texts: transformers' tokenizer, generate, decode."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = theirs(folder)
    xformer, ours, _ = cls.from_huggingface(folder)
    texts = sentences(12, seed=2)
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        want = tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True)
    assert xformer.translate(ours, texts) == want


def test_a_marian_folder_is_refused_by_pre_ln_and_unknown_settings_by_name(folders, tmp_path):
    with pytest.raises(FolderError, match="post-LN; read it with TransformerFG"):
        TransformerPreLN.from_huggingface(folders["shared vocabulary"])
    folder = tmp_path / "odd"
    marian_folder(str(folder), activation_function="tanh", encoder_ffn_dim=48)
    with pytest.raises(FolderError) as e:
        TransformerFG.from_huggingface(str(folder))
    assert "activation_function 'tanh'" in str(e.value) and "encoder_ffn_dim 48" in str(e.value)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["FSMTForConditionalGeneration"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(FolderError, match="FSMT.s fairseq layout"):
        TransformerFG.from_huggingface(str(folder))


def test_generation_settings_we_do_not_reproduce_are_refused_by_name(folders, tmp_path):
    import shutil
    folder = tmp_path / "sampling"
    shutil.copytree(folders["shared vocabulary"], folder)
    generation = json.loads((folder / "generation_config.json").read_text())
    generation.update(do_sample=True, repetition_penalty=1.2)
    (folder / "generation_config.json").write_text(json.dumps(generation))
    with pytest.raises(FolderError, match="do_sample True; repetition_penalty 1.2"):
        TransformerFG.from_huggingface(str(folder))


def test_a_folder_of_opus_mt_s_sizes_builds_and_translates(tmp_path):
    """OPUS-MT en-es's sizes: 6 + 6 layers, 512 wide, 8 heads, F = 2048."""
    transformers_or_skip()
    folder = marian_folder(str(tmp_path / "opus"), std=0.02, d_model=512, encoder_layers=6,
                           decoder_layers=6, encoder_attention_heads=8,
                           decoder_attention_heads=8, encoder_ffn_dim=2048,
                           decoder_ffn_dim=2048, max_position_embeddings=512,
                           generation={"max_length": 12})
    xformer, model, _ = TransformerFG.from_huggingface(folder)
    assert sum(p.numel() for p in model.parameters()) > 40e6
    assert len(model.encoder.basic_encoder_arr) == 6 == len(model.decoder.basic_decoder_arr)
    out = xformer.translate(model, ["the quick brown fox", "la casa"])
    assert len(out) == 2 and all(isinstance(t, str) for t in out)
    assert os.path.isfile(os.path.join(folder, "source.spm"))


def test_translate_sentence_takes_a_folder(folders, capsys):
    from transformers import AutoTokenizer

    from DLStudio.cli import translate_main
    tokenizer = AutoTokenizer.from_pretrained(folders["ends"])
    model = theirs(folders["ends"])
    text = "the quick brown fox"
    with torch.no_grad():
        want = tokenizer.decode(model.generate(**tokenizer([text], return_tensors="pt"))[0],
                                skip_special_tokens=True)
    assert translate_main([folders["ends"], text]) == 0
    assert capsys.readouterr().out == want + "\n"
    with pytest.raises(SystemExit):                                 # a folder takes no N
        translate_main([folders["ends"], "3", text])
    assert "is a model folder: give one sentence" in capsys.readouterr().err


def test_a_folder_is_scored_on_a_checkpoint_s_held_out_sentences(folders, trained, capsys):
    from DLStudio.cli import test_checkpoint_main
    from DLStudio.data import BUNDLED_ARCHIVE
    with pytest.raises(SystemExit):
        test_checkpoint_main("FG", [folders["ends"], "--show", "1"])
    assert "give --archive" in capsys.readouterr().err
    assert test_checkpoint_main("FG", [folders["ends"], "--archive", BUNDLED_ARCHIVE,
                                       "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "MarianMTModel" in out and "held-out BLEU" in out and "beam 4" in out
    assert "held-out loss " in out and "perplexity" in out
    folder = trained[0]
    assert test_checkpoint_main("FG", [str(folder / "ck"), "last", "--show", "0",
                                       "--against", folders["ends"]]) == 0
    out = capsys.readouterr().out
    held_out = len({en for en, _ in trained[1].held_out_corpus})
    assert f"On the same {held_out} English sentences: this checkpoint " in out


def test_the_explorer_shows_a_folder_s_self_and_cross_attention(folders, tmp_path):
    from DLStudio.cli.explore import explore_main
    out = tmp_path / "page.html"
    assert explore_main([folders["ends"], "the quick brown fox", "--out", str(out)]) == 0
    data = page_data(out.read_text())
    assert data["header"]["title"] == "Attention explorer: a real translation model"
    assert "MarianMTModel" in data["header"]["facts"]["model"]
    view = data["views"][0]
    assert set(view["maps"]) == {"encoder", "decoder_self", "cross"}
    assert view["decoding"] == "beam search, width 4, length penalty 1.0"
    xformer, model, _ = TransformerFG.from_huggingface(folders["ends"])
    assert view["output"] == xformer.translate(model, ["the quick brown fox"])[0]
    src = xformer.vocab.encode(["the quick brown fox"], "en")
    assert view["tokens"]["source"] == xformer.vocab.tokenizers["en"].readable(src[0])


def test_a_folder_s_loss_is_transformers_on_the_same_pairs(folders):
    """Teacher forcing on the folder's ids: our summed loss over the words up to each end
    token, against transformers' mean over its labels."""
    model = theirs(folders["shared vocabulary"])
    xformer, ours, _ = TransformerFG.from_huggingface(folders["shared vocabulary"])
    vocab = xformer.vocab
    src = vocab.encode(CORPUS[:6], "en")
    tgt = vocab.encode(SPANISH[:6], "es")                     # the start id first
    assert (tgt[:, 0] == vocab.start_id).all()
    labels = tgt[:, 1:]
    with torch.no_grad():
        total, n = ours.loss(src, tgt)
        want = model(input_ids=src, attention_mask=(src != vocab.pad_id).long(),
                     labels=labels.masked_fill(labels == vocab.pad_id, -100)).loss
    assert n == int((labels != vocab.pad_id).sum())
    assert_close(total / n, want, rel=1e-5)


def lora_on(model, seed=0, targets=("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")):
    """PEFT's Marian targets on both stacks and cross-attention, each B made non-zero."""
    trainable = model.add_lora(rank=4, alpha=8, targets=targets)
    torch.manual_seed(seed)
    with torch.no_grad():
        for _, _, lora, _ in model.lora_places():
            lora.B.normal_(0, 0.2)
    return trainable


def test_lora_on_both_stacks_and_cross_attention_is_peft_s_seq2seq_adapter(folders,
                                                                           tmp_path):
    from peft import PeftModel

    from DLStudio.containers.hub import read_adapter, write_adapter, write_merged
    folder = folders["shared vocabulary"]
    xformer, ours, _ = TransformerFG.from_huggingface(folder)
    trainable = lora_on(ours)
    names = {name for _, name, _, _ in ours.lora_places()}
    assert names == {"WQ", "WK", "WV", "W_O", "W1", "W2", "cross_WQ", "cross_WK", "cross_WV",
                     "cross_W_O"}
    assert trainable == sum(p.numel() for p in ours.parameters() if p.requires_grad) > 0
    src, mask, tgt = long_batch(xformer.vocab)
    with torch.no_grad():
        adapted = ours(src, tgt)
        with ours.lora_off():
            base = ours(src, tgt)
    assert (adapted - base).abs().max() > 1e-2
    write_adapter(ours, str(tmp_path / "adapter"))
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["task_type"] == "SEQ_2_SEQ_LM"
    assert set(config["target_modules"]) == {"q_proj", "k_proj", "v_proj", "out_proj", "fc1",
                                             "fc2"}
    peft = PeftModel.from_pretrained(theirs(folder), str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        want = peft(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    assert_close(adapted, want, rel=1e-4)
    _, again, _ = TransformerFG.from_huggingface(folder)          # PEFT's adapter into ours
    read_adapter(again, str(tmp_path / "adapter"))
    with torch.no_grad():
        assert_close(again(src, tgt), want, rel=1e-4)
    write_merged(ours, str(tmp_path / "merged"))                  # in Marian's own layout
    with torch.no_grad():
        merged = theirs(str(tmp_path / "merged"))(input_ids=src, attention_mask=mask,
                                                  decoder_input_ids=tgt).logits
    assert_close(merged, want, rel=1e-4)


@pytest.mark.parametrize("how", ["every weight", "LoRA"])
def test_a_folder_fine_tunes_on_an_archive_and_its_checkpoint_translates_as_it_does(
        folders, tmp_path, how):
    from DLStudio import DLStudio
    from DLStudio.data import BUNDLED_ARCHIVE
    dls = DLStudio(use_gpu=False, seed=0, batch_size=32, epochs=1, learning_rate=1e-3,
                   path_saved_model=str(tmp_path / "saved.pt"))
    xformer, model, _ = TransformerFG.from_huggingface(folders["ends"], dls,
                                                       data_archive=BUNDLED_ARCHIVE)
    assert xformer.num_warmup_steps == 0 and len(xformer.training_corpus) > 1000
    frozen = {n: p.detach().clone() for n, p in model.named_parameters()}
    if how == "LoRA":
        model.add_lora(rank=4, alpha=8, targets=("q_proj", "v_proj", "fc1"))
    trainer = xformer.run_code_for_training(dls, model.encoder, model.decoder,
                                            checkpoints_dir=str(tmp_path / "ck"), max_steps=12)
    losses = trainer.train_losses
    assert sum(losses[-3:]) < sum(losses[:3])                 # it learns the archive's pairs
    changed = {n for n, p in model.named_parameters() if n in frozen and
               not torch.equal(p, frozen[n])}
    assert (changed == set()) == (how == "LoRA")              # LoRA: the base stays as it was
    restored = TransformerFG.from_checkpoint(trainer.last_checkpoint)
    assert type(restored.container.vocab).__name__ == "SentencePiecePair"
    assert restored.container.generation_rules.num_beams == 4     # the folder's, kept
    texts = ["she is not tired", "we eat the red apple"]
    assert restored.container.translate(restored.model, texts) == \
        xformer.translate(model.eval(), texts)


def test_the_training_script_fine_tunes_a_folder_with_lora_and_writes_peft_s_adapter(
        folders, tmp_path, capsys, monkeypatch):
    from peft import PeftModel

    from DLStudio.cli import test_checkpoint_main, train_main
    from DLStudio.data import BUNDLED_ARCHIVE
    monkeypatch.chdir(tmp_path)
    ck = str(tmp_path / "ck")
    assert train_main("FG", ["--from-folder", folders["ends"], "--archive", BUNDLED_ARCHIVE,
                             "--max-steps", "4", "--batch-size", "16", "--lora-rank", "2",
                             "--lora-targets", "q_proj,v_proj,fc2", "--checkpoints-dir", ck,
                             "--learning-rate", "1e-3"]) == 0
    out = capsys.readouterr().out
    assert "LoRA of rank 2 on q_proj, v_proj, fc2" in out and "held-out BLEU" in out
    assert "test_checkpointFG.py" in out
    peft = PeftModel.from_pretrained(theirs(folders["ends"]), str(tmp_path / "ck" / "adapter"))
    restored = TransformerFG.from_checkpoint(os.path.join(ck, sorted(
        f for f in os.listdir(ck) if f.startswith("checkpoint_"))[-1]))
    src, mask, tgt = long_batch(restored.container.vocab)
    with torch.no_grad():
        want = peft.eval()(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        assert_close(restored.model(src, tgt), want, rel=1e-4)
    assert test_checkpoint_main("FG", [ck, "last", "--show", "1"]) == 0
    assert "held-out BLEU" in capsys.readouterr().out
    assert train_main("PreLN", ["--from-folder", folders["ends"], "--archive",
                                BUNDLED_ARCHIVE]) == 1
    assert "use seq2seq_with_transformerFG.py" in capsys.readouterr().err


def test_a_folder_s_held_out_loss_is_transformers_on_the_same_pairs(folders):
    from DLStudio.evaluation.decode_and_score import translation_loss
    model = theirs(folders["shared vocabulary"])
    xformer, ours, _ = TransformerFG.from_huggingface(folders["shared vocabulary"])
    pairs = list(zip(CORPUS[:9], SPANISH[:9])) * 3
    got = translation_loss(ours, xformer.vocab, pairs, batch_size=4)
    vocab = xformer.vocab
    src, tgt = vocab.encode(CORPUS[:9], "en"), vocab.encode(SPANISH[:9], "es")
    labels = tgt[:, 1:]
    with torch.no_grad():
        want = model(input_ids=src, attention_mask=(src != vocab.pad_id).long(),
                     labels=labels.masked_fill(labels == vocab.pad_id, -100)).loss
    assert got["tokens"] == 3 * int((labels != vocab.pad_id).sum())
    assert_close(torch.tensor(got["loss"]), want, rel=1e-5)
