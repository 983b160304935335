"""mBART in the lecture's classes: MBartForConditionalGeneration folders (pre-LN with final
norms, BART's learned positions and embedding norms, words scaled, a language code after
each side's </s>, the decoder starting from the target's code) made by transformers itself
with random small weights (tests/hub_seq2seq_folders.py), read into TransformerPreLN and
compared with transformers. They need transformers (the parity extra)."""

import random

import pytest
import torch

from DLStudio.data.hub_tokenizer import FolderError
from DLStudio.evaluation.decode_and_score import beam_search, greedy_decode
from DLStudio.Transformers import TransformerFG, TransformerPreLN
from tests.hub_seq2seq_folders import SPANISH, VARIED_EN, mbart_folder
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
    upto_end,
)
from tests.test_real_models import transformers_or_skip

from .close import assert_close

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    transformers_or_skip()
    root = tmp_path_factory.mktemp("mbart")
    return {"plain": mbart_folder(str(root / "plain")),
            "ends": mbart_folder(str(root / "ends"), end_bias=8.0,
                                 generation={"num_beams": 4, "max_length": 24}),
            "bf16": mbart_folder(str(root / "bf16"), std=0.1)}


def test_ids_and_text_are_mbart_tokenizer_s_with_each_side_s_language_code(folders):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folders["plain"])
    ours = TransformerPreLN.from_huggingface(folders["plain"]).container.vocab
    texts = VARIED_EN + SPANISH[:9] + ["<s> x </s>", "<pad> y", "a<mask>b", "en_XX hola"]
    assert [ours.ids(t) for t in texts] == [tokenizer(t).input_ids for t in texts]
    assert [ours.ids(t, "es") for t in texts] == \
        [tokenizer(text_target=t).input_ids for t in texts]
    codes = [tokenizer.convert_tokens_to_ids(c) for c in ("en_XX", "es_XX")]
    assert ours.ids("hola")[-2:] == [2, codes[0]] and ours.ids("hola", "es")[-2:] == [2, codes[1]]
    rng = random.Random(0)
    ids = [[rng.randrange(len(ours.vocab_en)) for _ in range(rng.randrange(1, 12))]
           for _ in range(200)]
    assert [ours.decode(i) for i in ids] == \
        [tokenizer.decode(i, skip_special_tokens=True) for i in ids]


def test_logits_are_transformers_within_1e_4_of_their_scale(folders):
    """Padded sources whose language code follows </s>: the code is read, the padding not."""
    xformer, _ = assert_logits_are_theirs(folders["plain"], TransformerPreLN, lambda ours: (
        ours.encoder.final_norm.weight, ours.embeddings_generator_en.norm.bias))
    src = long_batch(xformer.vocab)[0]
    assert (src[1] == xformer.vocab.pad_id).any()                 # (the second is padded)


def test_in_bf16_the_likeliest_tokens_are_transformers(folders):
    model = theirs(folders["bf16"], torch.bfloat16)
    xformer, ours, _ = TransformerPreLN.from_huggingface(folders["bf16"], dtype=torch.bfloat16)
    assert_bf16_argmax_is_theirs(model, ours, xformer.vocab)


@pytest.mark.parametrize("case", ["as the folder says", "no_repeat_ngram_size 3",
                                  "length_penalty 0.6"])
def test_greedy_and_beam_search_give_generate_s_output(folders, case):
    """(Random mBART weights end a sentence at once or seldom: 10 at least end before
    max_length, at varied lengths, where the other families' tests ask 50.)"""
    assert_generation_is_theirs(folders["ends"], TransformerPreLN, GENERATION[case],
                                ended=10)


def test_without_the_cache_the_output_is_the_same(folders):
    assert_uncached_beams_are_theirs(folders["ends"], TransformerPreLN)


def test_translate_reads_the_folder_s_tokenizer(folders):
    assert_translations_are_theirs(folders["ends"], TransformerPreLN)


def test_a_folder_s_loss_is_transformers_on_the_same_pairs(folders):
    """Teacher forcing: the labels are the target's pieces, </s> and its language code, as
    transformers' labels are."""
    model = theirs(folders["plain"])
    xformer, ours, _ = TransformerPreLN.from_huggingface(folders["plain"])
    vocab = xformer.vocab
    src, tgt = vocab.encode(VARIED_EN[:6], "en"), vocab.encode(SPANISH[:6], "es")
    labels = tgt[:, 1:]
    with torch.no_grad():
        total, n = ours.loss(src, tgt)
        want = model(input_ids=src, attention_mask=(src != vocab.pad_id).long(),
                     decoder_input_ids=tgt[:, :-1],
                     labels=labels.masked_fill(labels == vocab.pad_id, -100)).loss
    assert n == int((labels != vocab.pad_id).sum())
    assert_close(total / n, want, rel=1e-5)


def test_lora_is_peft_s_seq2seq_adapter(folders, tmp_path):
    from peft import PeftModel

    from DLStudio.containers.hub import write_adapter
    folder = folders["plain"]
    xformer, ours, _ = TransformerPreLN.from_huggingface(folder)
    lora_on(ours)
    src, mask, tgt = long_batch(xformer.vocab)
    write_adapter(ours, str(tmp_path / "adapter"))
    peft = PeftModel.from_pretrained(theirs(folder), str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        assert_close(ours(src, tgt), peft(input_ids=src, attention_mask=mask,
                                          decoder_input_ids=tgt).logits, rel=1e-4)


def test_an_mbart_folder_is_refused_by_fg(folders):
    with pytest.raises(FolderError, match="pre-LN; read it with TransformerPreLN"):
        TransformerFG.from_huggingface(folders["plain"])


def test_the_decoder_s_start_is_generation_config_s_where_the_config_names_none(folders,
                                                                             tmp_path):
    import json
    import shutil
    folder = tmp_path / "sparse"
    shutil.copytree(folders["ends"], folder)
    config = json.loads((folder / "config.json").read_text())
    start = config.pop("decoder_start_token_id")
    (folder / "config.json").write_text(json.dumps(config))
    assert TransformerPreLN.from_huggingface(str(folder)).container.vocab.start_id == start
    assert_translations_are_theirs(str(folder), TransformerPreLN)


def test_other_languages_are_mbart_tokenizer_s_src_lang_and_tgt_lang(folders, tmp_path):
    """languages=("de_DE", "fr_XX"): each side's ids end in its code as MBartTokenizer's
    with src_lang and tgt_lang, the decoder starts from the target's code, and greedy and
    beam search give generate's output told to start there; the checkpoint's tokenizer
    keeps them."""
    from transformers import MBartTokenizer
    folder = folders["ends"]
    tokenizer = MBartTokenizer.from_pretrained(folder, src_lang="de_DE", tgt_lang="fr_XX")
    xformer, ours, _ = TransformerPreLN.from_huggingface(folder, languages=("de_DE", "fr_XX"))
    vocab, french = xformer.vocab, tokenizer.convert_tokens_to_ids("fr_XX")
    texts = VARIED_EN[:8] + SPANISH[:8]
    assert [vocab.ids(t) for t in texts] == [tokenizer(t).input_ids for t in texts]
    assert [vocab.ids(t, "es") for t in texts] == \
        [tokenizer(text_target=t).input_ids for t in texts]
    assert vocab.start_id == french != TransformerPreLN.from_huggingface(
        folder).container.vocab.start_id
    assert vocab.fingerprint != TransformerPreLN.from_huggingface(
        folder, languages=("en_XX", "fr_XX")).container.vocab.fingerprint
    src = vocab.encode(VARIED_EN[:12], "en")
    rules, end = xformer.generation_rules, vocab.end_id
    with torch.no_grad():
        for beams in (1, 4):
            want = theirs(folder).generate(input_ids=src, attention_mask=(
                src != vocab.pad_id).long(), decoder_start_token_id=french, num_beams=beams)
            got = greedy_decode(ours, src, rules.max_length, rules=rules) if beams == 1 else \
                beam_search(ours, src, rules.max_length, beams, rules.length_penalty,
                            rules=rules)
            assert [upto_end(r, end) for r in got.tolist()] == \
                [upto_end(r[1:], end) for r in want.tolist()]
    from DLStudio.data.hub_translation import HubPair
    kept = HubPair.from_state(vocab.state())
    assert kept.start_id == french and kept.ids("hola", "es") == vocab.ids("hola", "es")


def test_a_language_the_tokenizer_lacks_is_refused_with_its_codes(folders):
    with pytest.raises(FolderError, match="'xx_YY' is not a language code.*es_XX, et_EE"):
        TransformerPreLN.from_huggingface(folders["plain"], languages=("en_XX", "xx_YY"))


def test_languages_are_refused_by_a_folder_without_codes(tmp_path):
    from tests.hub_seq2seq_folders import t5_folder
    folder = t5_folder(str(tmp_path / "t5"))
    with pytest.raises(FolderError, match="no language codes to choose"):
        TransformerPreLN.from_huggingface(folder, languages=("en_XX", "es_XX"))


def test_the_scripts_take_the_languages(folders, capsys, tmp_path):
    """translate_sentence.py FOLDER "..." --source-lang --target-lang: generate's output
    started from the target's code; a checkpoint of ours refuses them by name."""
    from transformers import MBartTokenizer

    from DLStudio.cli import translate_main
    folder, text = folders["ends"], "the quick brown fox"
    tokenizer = MBartTokenizer.from_pretrained(folder, src_lang="de_DE", tgt_lang="fr_XX")
    with torch.no_grad():
        want = tokenizer.decode(theirs(folder).generate(
            **tokenizer([text], return_tensors="pt"),
            decoder_start_token_id=tokenizer.convert_tokens_to_ids("fr_XX"))[0],
            skip_special_tokens=True)
    assert translate_main([folder, text, "--source-lang", "de_DE", "--target-lang",
                           "fr_XX"]) == 0
    assert capsys.readouterr().out == want + "\n"
    assert translate_main([folder, text, "--target-lang", "xx_YY"]) == 1
    assert "'xx_YY' is not a language code" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        translate_main([str(tmp_path / "mine.pt"), text, "--target-lang", "fr_XX"])
    assert "a checkpoint of ours translates the languages" in capsys.readouterr().err
