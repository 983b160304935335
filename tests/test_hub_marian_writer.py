"""Our TransformerFG written as a MarianMTModel folder (save_to_huggingface.py): transformers
reads it with our logits and greedy translations, and AutoTokenizer reads its BPE
tokenizer with our ids."""

import pytest
import torch

from DLStudio.data.hub_tokenizer import FolderError
from DLStudio.data.vocabulary import plain_words
from DLStudio.evaluation.decode_and_score import greedy_decode
from DLStudio.model.tokens import padding_mask
from DLStudio.Transformers import TransformerFG, TransformerPreLN
from tests.test_hub_seq2seq import upto_end
from tests.test_real_models import transformers_or_skip

from .close import assert_close

WRITTEN = {"the lecture's (sliced heads, sin/cos pairs, ReLU)": {},
           "full-width heads, Marian's sinusoid, SiLU, tied": dict(
               full_width_heads=True, positions="sinusoidal_halves", feed_forward="silu",
               tie_embeddings=True, num_atten_heads=2),
           "BPE, a vocabulary a side": dict(tokenizer="bpe", vocab_size=400),
           "BPE, one vocabulary for both": dict(tokenizer="bpe", vocab_size=500,
                                               shared_vocab=True)}


@pytest.mark.parametrize("case", WRITTEN)
def test_our_fg_written_as_a_marian_folder_gives_our_logits_and_translations(tmp_path,
                                                                           case):
    """A TransformerFG trained a few steps, written as a MarianMTModel folder: transformers
    reads it with our logits, and its greedy generate gives our greedy ids."""
    transformers_or_skip()
    from transformers import MarianMTModel

    from DLStudio import DLStudio
    from DLStudio.containers.hub_seq2seq import write_marian
    from DLStudio.data import BUNDLED_ARCHIVE
    changes = dict(WRITTEN[case])
    heads = changes.pop("num_atten_heads", 4)
    dls = DLStudio(use_gpu=False, seed=0, batch_size=32, epochs=1,
                   path_saved_model=str(tmp_path / "saved.pt"))
    xformer = TransformerFG(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=32,
                            num_warmup_steps=20, **changes)
    enc = xformer.MasterEncoder(dls, xformer, num_basic_encoders=2, num_atten_heads=heads)
    dec = xformer.MasterDecoderWithMasking(dls, xformer, num_basic_decoders=1,
                                           num_atten_heads=heads)
    xformer.run_code_for_training(dls, enc, dec, checkpoints_dir=str(tmp_path / "ck"),
                                  max_steps=8)
    model = xformer.model_from(enc, dec)
    write_marian(xformer, model, str(tmp_path / "marian"))
    hf = MarianMTModel.from_pretrained(str(tmp_path / "marian")).eval()
    english = [en for en, _ in xformer.held_out_corpus[:16]]
    src = xformer.vocab.encode(english, "en")
    mask = (~padding_mask(src)).long()
    tgt = xformer.vocab.encode([es for _, es in xformer.held_out_corpus[:16]], "es")[:, :-1]
    with torch.no_grad():
        assert_close(model(src, tgt), hf(input_ids=src, attention_mask=mask,
                                         decoder_input_ids=tgt).logits, rel=1e-4)
        ours = greedy_decode(model, src, xformer.max_seq_length)
        theirs = hf.generate(input_ids=src, attention_mask=mask, num_beams=1)
    assert [upto_end(r, 1) for r in ours.tolist()] == \
        [upto_end(r[1:], 1) for r in theirs.tolist()]
    readme = (tmp_path / "marian" / "README.md").read_text()
    if xformer.vocab.kind == "word":
        assert "padding_mask" in readme and "give it our ids" in readme
        assert not (tmp_path / "marian" / "tokenizer.json").exists()
    else:
        assert_tokenizers_are_ours(xformer, hf, tmp_path / "marian", ours)
        assert "AutoTokenizer" in readme


def assert_tokenizers_are_ours(xformer, hf, folder, ours):
    """AutoTokenizer on the folder (English) gives our ids and mask, padded as ours are,
    on held-out sentences and on texts typed otherwise (upper case, blank space); generate
    on its batch gives our greedy ids; the target side decodes them into our words."""
    from transformers import AutoTokenizer
    english = AutoTokenizer.from_pretrained(str(folder))
    two = (folder / "target" / "tokenizer.json").exists()
    assert two != bool(xformer.shared_vocab)
    spanish = AutoTokenizer.from_pretrained(str(folder / "target" if two else folder))
    held_out = [" ".join(plain_words(en)) for en, _ in xformer.held_out_corpus[:16]]
    typed = ["  She IS  not tired ", "Tom\tlikes   the cat", "ÉL COME   PAN  "]
    for texts in (held_out, typed):
        want = xformer.vocab.encode([xformer.vocab.prepare(t) for t in texts], "en")
        batch = english(texts, padding=True, return_tensors="pt")
        n = batch["input_ids"].shape[1]
        assert torch.equal(batch["input_ids"], want[:, :n]) and (want[:, n:] == 1).all()
        assert torch.equal(batch["attention_mask"], (~padding_mask(want[:, :n])).long())
    batch = english(held_out, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = hf.generate(**batch, num_beams=1)
    assert [upto_end(r, 1) for r in ours.tolist()] == \
        [upto_end(r[1:], 1) for r in theirs.tolist()]
    assert [t.split() for t in spanish.batch_decode(theirs, skip_special_tokens=True)] == \
        [xformer.vocab.words(r) for r in ours.tolist()]


def test_a_model_marian_cannot_hold_is_refused_with_every_reason(tmp_path):
    from DLStudio import DLStudio
    from DLStudio.containers.hub_seq2seq import write_marian
    from DLStudio.data import BUNDLED_ARCHIVE
    dls = DLStudio(use_gpu=False, seed=0)
    xformer = TransformerPreLN(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=16,
                               positions="rope", norm="rmsnorm", feed_forward="swiglu")
    enc = xformer.MasterEncoder(dls, xformer, num_basic_encoders=1, num_atten_heads=2)
    dec = xformer.MasterDecoderWithMasking(dls, xformer, num_basic_decoders=1,
                                           num_atten_heads=2)
    with pytest.raises(FolderError) as e:
        write_marian(xformer, xformer.model_from(enc, dec), str(tmp_path / "no"))
    for reason in ("pre-LN", "positions 'rope'", "norm 'rmsnorm'", "feed_forward 'swiglu'"):
        assert reason in str(e.value)
    assert not (tmp_path / "no").exists()
