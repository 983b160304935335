"""The override contract: a subclass that replaces one nested class (DLStudio's constructor
signature) gets it used everywhere it applies, through training, checkpoints, the scripts'
reload path, greedy and beam decoding and attention maps; what cannot be called is refused
when the model is built, with the signature to write."""

import logging

import pytest
import torch

from DLStudio import DLStudio, TransformerFG, cli
from DLStudio.checkpoints import CheckpointError, checkpoint_path, class_path
from DLStudio.data import generate_corpus, save_archive
from DLStudio.model.overrides import OverrideError
from DLStudio.Transformers import TransformerBase

from .homework_classes import CALLS, CONTAINERS

#: Where each override runs. The optimiser's schedule runs in training only.
EVERYWHERE = ("training", "greedy", "beam", "attention maps", "script translate",
              "script test_checkpoint", "from_checkpoint")
PLACES = {name: EVERYWHERE for name in CONTAINERS}
PLACES["ScheduledOptim"] = ("training",)


@pytest.fixture(scope="module")
def tiny_archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "tiny.tar.gz"
    save_archive(generate_corpus(300, seed=5), path)
    return str(path)


def build(cls, archive, folder, epochs=2):
    dls = DLStudio(use_gpu=False, batch_size=32, epochs=epochs, seed=0,
                   path_saved_model=str(folder / "saved.pt"))
    x = cls(dl_studio=dls, data_archive=archive, embedding_size=16, num_warmup_steps=20,
            checkpoint_freq=1)
    return dls, x, x.MasterEncoder(dls, x, 1, 2), x.MasterDecoderWithMasking(dls, x, 1, 2)


def counting(key):
    """calls(action) -> (how many times the override ran during action(), its result)."""
    def calls(action):
        before = CALLS[key]
        result = action()
        return CALLS[key] - before, result
    return calls


@pytest.mark.parametrize("name", list(CONTAINERS))
def test_an_override_runs_everywhere_and_survives_a_reload(name, tmp_path, tiny_archive,
                                                           capsys):
    cls, key = CONTAINERS[name], name.split()[0]
    calls, ran = counting(key), {}
    dls, x, enc, dec = build(cls, tiny_archive, tmp_path)
    ck = str(tmp_path / "ck")
    ran["training"], trainer = calls(lambda: x.run_code_for_training(dls, enc, dec,
                                                                     checkpoints_dir=ck))
    model = trainer.model.eval()
    english = [" ".join(en.split()[1:-1]) for en, _ in x.held_out_corpus[:6]]
    ran["greedy"], greedy = calls(lambda: x.translate(model, english))
    ran["beam"], beam = calls(lambda: x.translate(model, english, beam_width=2))
    src = x.sentence_with_words_to_ints(english[:2], "en")
    ran["attention maps"], maps = calls(lambda: model.attention_maps(src, src[:, :4]))
    assert len(maps["cross"]) == 1 and maps["cross"][0].shape[:2] == (2, 2)
    x.run_code_for_evaluating(enc, dec, model=model, show=0, result_file=str(tmp_path / "a"),
                              print_fn=lambda *a: None)
    capsys.readouterr()

    # the scripts' code path, with the class the checkpoint recorded
    path = class_path(cls)
    ran["script translate"], status = calls(lambda: cli.translate_main(
        [ck, "1", english[0], "--model-class", path]))
    out = capsys.readouterr()
    assert status == 0, out.err
    assert out.out.strip() == greedy[0]
    ran["script test_checkpoint"], status = calls(lambda: cli.test_checkpoint_main(
        "FG", [ck, "1", "--show", "0", "--model-class", path, "--result-file",
               str(tmp_path / "b")]))
    assert status == 0, capsys.readouterr().err
    assert (tmp_path / "b").read_text() == (tmp_path / "a").read_text()
    ran["from_checkpoint"], (x2, model2, _) = calls(lambda: TransformerBase.from_checkpoint(
        checkpoint_path(ck, 1), model_class=cls))
    assert type(x2) is cls
    again = counting(key)(lambda: (x2.translate(model2, english),
                                   x2.translate(model2, english, beam_width=2)))[1]
    assert again == (greedy, beam)
    ran["from_checkpoint"] += counting(key)(lambda: x2.translate(model2, english))[0]
    assert {place for place, n in ran.items() if n > 0} == set(PLACES[name]), ran

    # without the class, the scripts refuse in one line (it is never imported on the
    # checkpoint's word), and a wrong class is refused too
    capsys.readouterr()
    assert cli.translate_main([ck, "1", english[0]]) == 1
    err = capsys.readouterr().err
    assert f"--model-class {path}" in err and "Traceback" not in err
    assert cli.translate_main([ck, "1", english[0], "--model-class",
                               "DLStudio.Transformers:TransformerFG"]) == 1
    assert "was trained with " + path in capsys.readouterr().err


def test_the_scheduled_optim_override_drives_the_rate_and_resumes(tmp_path, tiny_archive):
    cls = CONTAINERS["ScheduledOptim"]
    dls, x, enc, dec = build(cls, tiny_archive, tmp_path, epochs=1)
    trainer = x.run_code_for_training(dls, enc, dec, checkpoints_dir=str(tmp_path / "ck"))
    standard = TransformerFG.ScheduledOptim(None, 1.0, 16, 20)
    assert isinstance(trainer.optimizer, cls.ScheduledOptim)
    assert trainer.current_lr() == pytest.approx(standard.lr_at(trainer.step) / 2)
    dls, x, enc, dec = build(cls, tiny_archive, tmp_path, epochs=2)
    resumed = x.run_code_for_training(dls, enc, dec, checkpoints_dir=str(tmp_path / "ck"),
                                      resume=True)
    assert resumed.optimizer.n_steps == resumed.step == 2 * trainer.step


# --- what cannot be called is refused when the model is built -----------------------------
def corpus():
    return generate_corpus(100, seed=1)


def test_dlstudio_maskless_head_is_refused_with_the_signature_to_write():
    class OldStyle(TransformerFG):
        class AttentionHead(TransformerFG.AttentionHead):
            def __init__(self, dl_studio, max_seq_length, qkv_size, num_atten_heads):
                super().__init__(dl_studio, max_seq_length, qkv_size, num_atten_heads)

            def forward(self, sent_embed_slice):
                return super().forward(sent_embed_slice)

    with pytest.raises(OverrideError) as e:
        OldStyle(dl_studio=DLStudio(use_gpu=False), corpus=corpus(), embedding_size=16)
    message = str(e.value)
    assert "OldStyle.AttentionHead has forward(self, sent_embed_slice)" in message
    assert "def forward(self, x, mask=None, memory=None)" in message and "mask" in message


def test_a_head_without_memory_is_refused_because_cross_attention_uses_it():
    class NoMemory(TransformerFG):
        class AttentionHead(TransformerFG.AttentionHead):
            def forward(self, x, mask=None):
                return super().forward(x, mask)

    with pytest.raises(OverrideError, match="cross-attention uses your AttentionHead"):
        NoMemory(dl_studio=DLStudio(use_gpu=False), corpus=corpus(), embedding_size=16)

    class NoMemoryButOwnCross(NoMemory):          # overriding CrossAttentionHead too is fine
        class CrossAttentionHead(TransformerFG.CrossAttentionHead):
            pass

    x = NoMemoryButOwnCross(dl_studio=DLStudio(use_gpu=False), corpus=corpus(),
                            embedding_size=16)
    dec = x.MasterDecoderWithMasking(x.dl_studio, x, 1, 2)
    layer = dec.basic_decoder_arr[0]
    assert type(layer.self_attention.heads[0]) is NoMemory.AttentionHead
    assert type(layer.cross_attention.heads[0]) is NoMemoryButOwnCross.CrossAttentionHead


def test_dlstudio_cross_head_and_layer_signatures_are_refused(capsys):
    class OldCross(TransformerFG):
        class CrossAttentionHead(TransformerFG.CrossAttentionHead):
            def forward(self, basic_decoder_slice, final_encoder_slice):
                return basic_decoder_slice

    with pytest.raises(OverrideError, match=r"OldCross.CrossAttentionHead has forward"):
        OldCross(dl_studio=DLStudio(use_gpu=False), corpus=corpus(), embedding_size=16)

    class OldDecoder(TransformerFG):
        class BasicDecoderWithMasking(TransformerFG.BasicDecoderWithMasking):
            def forward(self, sentence_tensor, final_encoder_out):
                return sentence_tensor

    with pytest.raises(OverrideError, match=r"def forward\(self, x, memory, self_mask=None"):
        OldDecoder(dl_studio=DLStudio(use_gpu=False), corpus=corpus(), embedding_size=16)
    status = cli.common.run_job(lambda argv: OldDecoder(dl_studio=DLStudio(use_gpu=False),
                                              corpus=corpus()), [])
    err = capsys.readouterr().err                  # the scripts print it in one line
    assert status == 1 and err.startswith("error: ") and "Traceback" not in err


def test_a_fallback_is_said_once_and_never_skips_the_students_code(caplog):
    class Loud(TransformerFG):
        class AttentionHead(TransformerFG.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                return super().forward(x, mask, memory)

    caplog.set_level(logging.WARNING, logger="DLStudio")
    dls = DLStudio(use_gpu=False, seed=0)
    for _ in range(2):
        x = Loud(dl_studio=dls, corpus=corpus(), embedding_size=16)
        enc, dec = x.MasterEncoder(dls, x, 1, 2), x.MasterDecoderWithMasking(dls, x, 1, 2)
        model = x.model_from(enc, dec)
        x.translate(model, ["i eat", "you run"])
    said = [r.getMessage() for r in caplog.records if "Loud.AttentionHead" in r.getMessage()]
    assert len(said) == 2                        # each fallback once, for two models
    assert "heads run one by one" in said[0] and "re-reads the whole prefix" in said[1]
    assert not enc.basic_encoder_arr[0].self_attention.batched


def test_a_head_that_keeps_no_weights_gets_a_message_for_attention_maps():
    class Quiet(TransformerFG):
        class AttentionHead(TransformerFG.AttentionHead):
            def forward(self, x, mask=None, memory=None):
                kv = x if memory is None else memory
                return torch.softmax(self.WQ(x) @ self.WK(kv).transpose(1, 2), -1) @ self.WV(kv)

    dls = DLStudio(use_gpu=False, seed=0)
    x = Quiet(dl_studio=dls, corpus=corpus(), embedding_size=16)
    model = x.model_from(x.MasterEncoder(dls, x, 1, 2), x.MasterDecoderWithMasking(dls, x, 1, 2))
    src = x.sentence_with_words_to_ints(["i eat"], "en")
    with pytest.raises(ValueError, match=r"Quiet.AttentionHead.*self.keep_weights"):
        model.attention_maps(src, src)


def test_a_checkpoint_of_a_students_class_is_not_loaded_as_the_standard_one(tmp_path,
                                                                            tiny_archive):
    cls = CONTAINERS["FeedForward"]           # no parameters of its own: only the class says
    dls, x, enc, dec = build(cls, tiny_archive, tmp_path, epochs=1)
    x.run_code_for_training(dls, enc, dec, checkpoints_dir=str(tmp_path / "ck"))
    with pytest.raises(CheckpointError, match="--model-class tests.homework_classes:"):
        TransformerBase.from_checkpoint(checkpoint_path(str(tmp_path / "ck"), 0))
    with pytest.raises(CheckpointError, match="was trained with"):
        TransformerFG.from_checkpoint(checkpoint_path(str(tmp_path / "ck"), 0),
                                      model_class=CONTAINERS["BasicEncoder"])
    x2, _, _ = cls.from_checkpoint(checkpoint_path(str(tmp_path / "ck"), 0))
    assert type(x2) is cls


def test_full_width_heads_need_a_head_that_takes_input_size():
    from .homework_classes import WithAttentionHead
    with pytest.raises(OverrideError, match="takes no input_size, which full_width_heads"):
        WithAttentionHead(dl_studio=DLStudio(use_gpu=False), corpus=corpus(),
                          embedding_size=16, full_width_heads=True)
    x = TransformerFG(dl_studio=DLStudio(use_gpu=False), corpus=corpus(), embedding_size=16,
                      full_width_heads=True)                   # ours takes it
    assert x.SelfAttention(x.dl_studio, x, 2).heads[0].WQ.in_features == 16
