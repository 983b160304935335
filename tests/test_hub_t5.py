"""T5 in the lecture's classes: T5ForConditionalGeneration folders of the three kinds the hub
holds (v1.0: ReLU, the output tied and scaled; v1.1 as transformers 5 writes it; Flan-T5's
layout: GELU-gated, an lm_head of its own), 6 heads of 8 on 32 wide, made by transformers
itself with random small weights (tests/hub_seq2seq_folders.py), read into TransformerPreLN
and compared with transformers: the tokenizer's ids and text, the logits, and generate's
output (greedy and beam search). They need transformers (the parity extra)."""

import json
import os
import random
import shutil

import pytest
import torch

from DLStudio.data.hub_tokenizer import FolderError
from DLStudio.Transformers import TransformerFG, TransformerPreLN
from tests.hub_seq2seq_folders import SPANISH, VARIED_EN, t5_folder
from tests.test_hub_seq2seq import (
    GENERATION,
    assert_bf16_argmax_is_theirs,
    assert_generation_is_theirs,
    assert_translations_are_theirs,
    assert_uncached_beams_are_theirs,
    long_batch,
    lora_on,
    theirs,
)
from tests.test_real_models import transformers_or_skip

from .close import assert_close, differ

pytestmark = pytest.mark.slow
VERSIONS = ("1.0", "1.1", "flan")
END = 1                                                       # T5's </s>


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    transformers_or_skip()
    root = tmp_path_factory.mktemp("t5")
    made = {v: t5_folder(str(root / v), v) for v in VERSIONS}
    made["hub tokenizer"] = t5_folder(str(root / "hub"), "flan", hub_style=True)
    made["bf16"] = t5_folder(str(root / "bf16"), "flan", std=0.1)   # well-conditioned
    for v in ("1.0", "flan"):
        made[f"ends {v}"] = t5_folder(str(root / f"ends_{v}"), v, std=0.2, end_bias=1.5,
                                      generation={"max_length": 24, "num_beams": 4})
    return made


@pytest.mark.parametrize("kind", ["1.0", "hub tokenizer"])
def test_ids_and_text_are_t5_tokenizer_s(folders, kind):
    """The file as transformers 5 writes it, and as the hub's folders have it (its steps
    rebuilt by transformers' T5Tokenizer): the same ids, special tokens typed in the text
    included, and the same text back."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folders[kind])
    ours = TransformerPreLN.from_huggingface(folders[kind]).container.vocab
    texts = VARIED_EN + SPANISH[:9] + ["<extra_id_0> x <extra_id_3>", "<pad> y", "a</s>b",
                                       "a  b   c", " x", "ñandú  ", "<unk><unk>"]
    assert [ours.ids(t) for t in texts] == [tokenizer(t).input_ids for t in texts]
    assert [ours.ids(t, "es") for t in SPANISH[:9]] == \
        [tokenizer(text_target=t).input_ids for t in SPANISH[:9]]
    rng = random.Random(0)
    ids = [[rng.randrange(len(ours.vocab_en)) for _ in range(rng.randrange(1, 12))]
           for _ in range(200)]
    assert [ours.decode(i) for i in ids] == \
        [tokenizer.decode(i, skip_special_tokens=True) for i in ids]


@pytest.mark.parametrize("version", VERSIONS)
def test_logits_are_transformers_within_1e_4_of_their_scale(folders, version):
    model = theirs(folders[version])
    xformer, ours, _ = TransformerPreLN.from_huggingface(folders[version])
    assert ours.encoder.basic_encoder_arr[0].self_attention.qkv_size * 6 != 32   # 6 x 8
    assert (ours.decoder.out.weight is ours.embeddings_generator_en.embedding.weight) == \
        (version != "flan")
    src, mask, tgt = long_batch(xformer.vocab)
    assert (tgt[:, 0] == 0).all()
    with torch.no_grad():
        want = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        assert_close(ours(src, tgt), want, rel=1e-4)
        table = ours.encoder.position_bias.table.weight
        kept = table.clone()
        table.zero_()                                  # the encoder's bias is read
        assert differ(ours(src, tgt), want)
        table.copy_(kept)


def test_in_bf16_the_likeliest_tokens_are_transformers(folders):
    """On weights of 0.1 (at 0.3 T5's unscaled scores make bf16 chaotic: both sides are
    then a fifth of the scale away from the exact logits of the same bf16 weights)."""
    model = theirs(folders["bf16"], torch.bfloat16)
    xformer, ours, _ = TransformerPreLN.from_huggingface(folders["bf16"], dtype=torch.bfloat16)
    assert_bf16_argmax_is_theirs(model, ours, xformer.vocab)


@pytest.mark.parametrize("version", ["1.0", "flan"])
@pytest.mark.parametrize("case", ["as the folder says", "no_repeat_ngram_size 3",
                                  "length_penalty 0.6"])
def test_greedy_and_beam_search_give_generate_s_output(folders, version, case):
    assert_generation_is_theirs(folders[f"ends {version}"], TransformerPreLN, GENERATION[case])


def test_without_the_cache_the_output_is_the_same(folders):
    assert_uncached_beams_are_theirs(folders["ends flan"], TransformerPreLN)


def test_translate_reads_the_folder_s_tokenizer(folders):
    assert_translations_are_theirs(folders["ends 1.0"], TransformerPreLN)


def test_a_folder_s_loss_is_transformers_on_the_same_pairs(folders):
    model = theirs(folders["flan"])
    xformer, ours, _ = TransformerPreLN.from_huggingface(folders["flan"])
    vocab = xformer.vocab
    src, tgt = vocab.encode(SPANISH[:6], "en"), vocab.encode(VARIED_EN[:6], "es")
    labels = tgt[:, 1:]
    with torch.no_grad():
        total, n = ours.loss(src, tgt)
        want = model(input_ids=src, attention_mask=(src != vocab.pad_id).long(),
                     labels=labels.masked_fill(labels == vocab.pad_id, -100)).loss
    assert n == int((labels != vocab.pad_id).sum())
    assert_close(total / n, want, rel=1e-5)


def test_a_t5_folder_is_refused_by_fg_and_unknown_settings_by_name(folders, tmp_path):
    with pytest.raises(FolderError, match="pre-LN; read it with TransformerPreLN"):
        TransformerFG.from_huggingface(folders["1.0"])
    folder = tmp_path / "odd"
    shutil.copytree(folders["1.0"], folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(feed_forward_proj="gated-relu", relative_attention_num_buckets=16)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(FolderError) as e:
        TransformerPreLN.from_huggingface(str(folder))
    assert "feed_forward_proj 'gated-relu'" in str(e.value)
    assert "relative_attention_num_buckets 16" in str(e.value)


def test_a_folder_left_without_the_fields_at_their_defaults_reads_as_transformers(
        folders, tmp_path):
    """The hub writes a config without the fields at the class's defaults: T5's epsilon
    (1e-6), its 32 buckets, a decoder as deep as the encoder, the output scaled (no
    tie_word_embeddings field)."""
    folder = tmp_path / "sparse"
    shutil.copytree(folders["1.0"], folder)
    config = json.loads((folder / "config.json").read_text())
    for field in ("layer_norm_epsilon", "relative_attention_num_buckets",
                  "relative_attention_max_distance", "num_decoder_layers",
                  "scale_decoder_outputs", "tie_word_embeddings", "feed_forward_proj"):
        config.pop(field, None)
    (folder / "config.json").write_text(json.dumps(config))
    model = theirs(str(folder))
    xformer, ours, _ = TransformerPreLN.from_huggingface(str(folder))
    src, mask, tgt = long_batch(xformer.vocab)
    with torch.no_grad():
        assert_close(ours(src, tgt), model(input_ids=src, attention_mask=mask,
                                           decoder_input_ids=tgt).logits, rel=1e-4)


@pytest.mark.parametrize("version", ["1.0", "flan"])
def test_lora_on_both_stacks_and_cross_attention_is_peft_s_seq2seq_adapter(folders, version,
                                                                           tmp_path):
    """PEFT's T5 names (q, k, v, o in both attentions; wi or wi_0, wi_1; wo): the adapter
    PEFT reads gives our logits, PEFT's adapter read into ours gives them too, and the
    merged folder in T5's own layout gives them to transformers."""
    from peft import PeftModel

    from DLStudio.containers.hub import read_adapter, write_adapter, write_merged
    folder = folders[version]
    targets = ("q", "k", "v", "o", "wo") + (("wi",) if version == "1.0" else ("wi_0", "wi_1"))
    xformer, ours, _ = TransformerPreLN.from_huggingface(folder)
    lora_on(ours, targets=targets)
    src, mask, tgt = long_batch(xformer.vocab)
    with torch.no_grad():
        adapted = ours(src, tgt)
        with ours.lora_off():
            assert differ(ours(src, tgt), adapted)
    write_adapter(ours, str(tmp_path / "adapter"))
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["task_type"] == "SEQ_2_SEQ_LM" and set(config["target_modules"]) == \
        set(targets)
    peft = PeftModel.from_pretrained(theirs(folder), str(tmp_path / "adapter")).eval()
    assert sum(1 for n, _ in peft.named_modules() if n.endswith(".lora_A")) == \
        len(list(ours.lora_places()))
    with torch.no_grad():
        want = peft(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    assert_close(adapted, want, rel=1e-4)
    _, again, _ = TransformerPreLN.from_huggingface(folder)
    read_adapter(again, str(tmp_path / "adapter"))
    with torch.no_grad():
        assert_close(again(src, tgt), want, rel=1e-4)
    write_merged(ours, str(tmp_path / "merged"))
    with torch.no_grad():
        merged = theirs(str(tmp_path / "merged"))(input_ids=src, attention_mask=mask,
                                                  decoder_input_ids=tgt).logits
    assert_close(merged, want, rel=1e-4)


def test_the_scripts_take_a_t5_folder(folders, tmp_path, capsys, monkeypatch):
    """translate_sentence.py FOLDER, test_checkpointPreLN.py FOLDER --archive, the
    explorer, and seq2seq_with_transformerPreLN.py --from-folder with LoRA (PEFT's T5
    adapter written; its checkpoint restores and is scored); the FG script refuses it."""
    from peft import PeftModel

    from DLStudio.cli import test_checkpoint_main, train_main, translate_main
    from DLStudio.cli.explore import explore_main
    from DLStudio.data import BUNDLED_ARCHIVE
    from tests.test_explorer import page_data
    folder = folders["ends flan"]
    xformer, ours, _ = TransformerPreLN.from_huggingface(folder)
    text = "the quick brown fox"
    assert translate_main([folder, text]) == 0
    assert capsys.readouterr().out == xformer.translate(ours, [text])[0] + "\n"
    assert test_checkpoint_main("PreLN", [folder, "--archive", BUNDLED_ARCHIVE,
                                          "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "T5ForConditionalGeneration" in out and "held-out BLEU" in out
    page = tmp_path / "page.html"
    assert explore_main([folder, text, "--out", str(page)]) == 0
    view = page_data(page.read_text())["views"][0]
    assert set(view["maps"]) == {"encoder", "decoder_self", "cross"}
    assert view["output"] == xformer.translate(ours, [text])[0]
    monkeypatch.chdir(tmp_path)
    ck = str(tmp_path / "ck")
    assert train_main("PreLN", ["--from-folder", folder, "--archive", BUNDLED_ARCHIVE,
                                "--max-steps", "4", "--batch-size", "16", "--lora-rank", "2",
                                "--checkpoints-dir", ck, "--learning-rate", "1e-3"]) == 0
    out = capsys.readouterr().out
    assert "LoRA of rank 2 on q, k, v, o" in out and "held-out BLEU" in out
    peft = PeftModel.from_pretrained(theirs(folder), os.path.join(ck, "adapter")).eval()
    restored = TransformerPreLN.from_checkpoint(os.path.join(ck, sorted(
        f for f in os.listdir(ck) if f.startswith("checkpoint_"))[-1]))
    assert type(restored.container.vocab).__name__ == "HubPair"
    assert [restored.container.vocab.ids(t) for t in VARIED_EN] == \
        [xformer.vocab.ids(t) for t in VARIED_EN]
    src, mask, tgt = long_batch(restored.container.vocab)
    with torch.no_grad():
        want = peft(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        assert_close(restored.model(src, tgt), want, rel=1e-4)
    assert test_checkpoint_main("PreLN", [ck, "last", "--show", "1"]) == 0
    assert "held-out BLEU" in capsys.readouterr().out
    assert train_main("FG", ["--from-folder", folder, "--archive", BUNDLED_ARCHIVE]) == 1
    assert "use seq2seq_with_transformerPreLN.py" in capsys.readouterr().err
