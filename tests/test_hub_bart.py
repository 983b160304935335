"""BART in the lecture's classes: BartForConditionalGeneration folders (learned positions
offset by 2, embedding norms, exact GELU, one vocabulary, <s> forced after the decoder's
</s>) made by transformers itself with random small weights (tests/hub_seq2seq_folders.py),
read into TransformerFG and compared with transformers: the tokenizer's ids and text (its
tokenizer.json, and the older vocab.json and merges.txt), the logits, generate's output and
PEFT's adapter. They need transformers (the parity extra)."""

import json
import random

import pytest
import torch

from DLStudio.Transformers import TransformerFG
from tests.hub_seq2seq_folders import SPANISH, VARIED_EN, bart_folder
from tests.test_hub_seq2seq import (
    GENERATION,
    assert_bf16_argmax_is_theirs,
    assert_generation_is_theirs,
    assert_logits_are_theirs,
    assert_translations_are_theirs,
    assert_uncached_beams_are_theirs,
    long_batch,
    lora_on,
    theirs,
)
from tests.test_real_models import transformers_or_skip

from .close import assert_close

pytestmark = pytest.mark.slow
END = 2                                                       # BART's </s>
RULES = {"forced_bos_token_id": 0, "num_beams": 4, "max_length": 24}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    transformers_or_skip()
    root = tmp_path_factory.mktemp("bart")
    return {"tokenizer.json": bart_folder(str(root / "json")),
            "vocab.json": bart_folder(str(root / "vocab"), files="vocab.json"),
            "ends": bart_folder(str(root / "ends"), std=0.2, end_bias=4.0, generation=RULES),
            "bf16": bart_folder(str(root / "bf16"), std=0.1)}


@pytest.mark.parametrize("files", ["tokenizer.json", "vocab.json"])
def test_ids_and_text_are_bart_tokenizer_s(folders, files):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folders[files])
    ours = TransformerFG.from_huggingface(folders[files]).container.vocab
    texts = VARIED_EN + SPANISH[:9] + ["<s> x </s>", "<pad> y", "a<mask>b", " lead"]
    assert [ours.ids(t) for t in texts] == [tokenizer(t).input_ids for t in texts]
    rng = random.Random(0)
    ids = [[rng.randrange(len(ours.vocab_en)) for _ in range(rng.randrange(1, 12))]
           for _ in range(200)]
    assert [ours.decode(i) for i in ids] == \
        [tokenizer.decode(i, skip_special_tokens=True) for i in ids]


def test_logits_are_transformers_within_1e_4_of_their_scale(folders):
    assert_logits_are_theirs(folders["tokenizer.json"], TransformerFG, lambda ours: (
        ours.embeddings_generator_en.learned_positions,                 # both are read
        ours.embeddings_generator_es.norm.weight))


def test_in_bf16_the_likeliest_tokens_are_transformers(folders):
    model = theirs(folders["bf16"], torch.bfloat16)
    xformer, ours, _ = TransformerFG.from_huggingface(folders["bf16"], dtype=torch.bfloat16)
    assert_bf16_argmax_is_theirs(model, ours, xformer.vocab)


@pytest.mark.parametrize("case", ["as the folder says", "no_repeat_ngram_size 3",
                                  "length_penalty 0.6"])
def test_greedy_and_beam_search_give_generate_s_output(folders, case):
    """<s> forced first (forced_bos_token_id), </s> last (forced_eos_token_id)."""
    for got in assert_generation_is_theirs(folders["ends"], TransformerFG, GENERATION[case]):
        assert all(r[0] == 0 for r in got.tolist())                   # <s> forced


def test_without_the_cache_the_output_is_the_same(folders):
    assert_uncached_beams_are_theirs(folders["ends"], TransformerFG)


def test_translate_reads_the_folder_s_tokenizer(folders):
    assert_translations_are_theirs(folders["ends"], TransformerFG)


def test_lora_is_peft_s_seq2seq_adapter(folders, tmp_path):
    from peft import PeftModel

    from DLStudio.containers.hub import read_adapter, write_adapter, write_merged
    folder = folders["tokenizer.json"]
    xformer, ours, _ = TransformerFG.from_huggingface(folder)
    lora_on(ours)
    src, mask, tgt = long_batch(xformer.vocab)
    with torch.no_grad():
        adapted = ours(src, tgt)
    write_adapter(ours, str(tmp_path / "adapter"))
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["task_type"] == "SEQ_2_SEQ_LM"
    peft = PeftModel.from_pretrained(theirs(folder), str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        want = peft(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    assert_close(adapted, want, rel=1e-4)
    _, again, _ = TransformerFG.from_huggingface(folder)
    read_adapter(again, str(tmp_path / "adapter"))
    write_merged(ours, str(tmp_path / "merged"))
    with torch.no_grad():
        assert_close(again(src, tgt), want, rel=1e-4)
        merged = theirs(str(tmp_path / "merged"))(input_ids=src, attention_mask=mask,
                                                  decoder_input_ids=tgt).logits
    assert_close(merged, want, rel=1e-4)


def test_translate_sentence_takes_a_bart_folder(folders, capsys):
    from DLStudio.cli import translate_main
    xformer, ours, _ = TransformerFG.from_huggingface(folders["ends"])
    assert translate_main([folders["ends"], "the quick brown fox"]) == 0
    assert capsys.readouterr().out == xformer.translate(ours, ["the quick brown fox"])[0] + "\n"
