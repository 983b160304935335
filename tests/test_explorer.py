"""The attention explorer without a browser: the page carries the model's own weights (equal
to attention_maps to 1e-4), its translation is the scripts' greedy one, its beam hypotheses
score what the model gives them, it fetches nothing, it stays small for the lecture's model
untrained, and the live server refuses what it should. The browser tests are in
test_explorer_browser.py."""

import http.client
import json
import re
import threading

import pytest
import torch

from DLStudio import DLStudio, TransformerBERT, TransformerFG, TransformerGPT, visTransformer
from DLStudio.cli.explore import BODY_LIMIT, ExplorerServer, explore_main
from DLStudio.data import BUNDLED_ARCHIVE, SHAPE_CLASSES
from DLStudio.evaluation.decode_and_score import beam_search, translate_sentences
from DLStudio.evaluation.explorer_page import (
    SCALE,
    bert_view,
    gpt_view,
    render_page,
    translation_view,
    vision_view,
)
from DLStudio.evaluation.generation import generate, generate_text, prompt_ids
from DLStudio.model.tokens import SOS_INDEX

from .close import assert_close

SENTENCES = ["she is not tired today", "we will not eat the red apples"]

#: The page carries weights to 4 decimals (explorer_page.SCALE): equal to that, of 1.
ON_THE_PAGE = dict(scale=1.0, rel=1e-4)


def page_data(page):
    """The JSON a page carries, as the page's script reads it."""
    found = re.search(r'<script id="explorer-data" type="application/json">(.*?)</script>',
                      page, re.S)
    assert found, "the page carries no data"
    return json.loads(found.group(1))


def tokens_of(vocab, view):
    """The ids the view's axes name: the sentence's and SOS + the translation's."""
    src = torch.tensor(vocab.token_ids([vocab.prepare(view["input"])], "en"))
    out = vocab.tokenizers["es"].ids([view["output"]])[0] if view["output"] else []
    return src, torch.tensor([[SOS_INDEX] + out])


def assert_same_weights(carried, weights):
    """Quantised weights (layers x heads x ...) equal the model's to 1e-4."""
    assert len(carried) == len(weights)
    for layer, w in zip(carried, weights):
        got = torch.tensor(layer, dtype=torch.float64) / SCALE
        assert got.shape == w.shape, (got.shape, w.shape)
        assert_close(got, w.double(), **ON_THE_PAGE)


@pytest.fixture(scope="module")
def page(trained, tmp_path_factory):
    out = tmp_path_factory.mktemp("explorer") / "page.html"
    assert explore_main([str(trained[0] / "ck"), "1", *SENTENCES, "--out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def test_the_page_carries_the_models_weights_and_its_greedy_translation(trained, page):
    _, x, _, _, trainer, _ = trained
    model = trainer.model.eval()
    data = page_data(page)
    assert data["header"]["facts"]["checkpoint"].endswith("checkpoint_1.pt")
    assert "held-out BLEU" in data["header"]["facts"]["score"]      # trained --track-bleu
    greedy = translate_sentences(model, x.vocab, SENTENCES)
    for view, sentence, expected in zip(data["views"], SENTENCES, greedy):
        assert view["input"] == sentence and view["output"] == expected
        src, tgt = tokens_of(x.vocab, view)
        assert view["tokens"]["source"] == ["SOS", *sentence.split(), "EOS"]
        maps = model.attention_maps(src, tgt)
        for kind in ("encoder", "decoder_self", "cross"):
            assert_same_weights(view["maps"][kind]["layers"], [m[0] for m in maps[kind]])
        # each token's probability is the model's, and greedy took the likeliest
        probs = torch.softmax(model(src, tgt)[0].double(), dim=-1)
        assert len(view["steps"]) == tgt.size(1)                       # the words and EOS
        for t, step in enumerate(view["steps"]):
            assert_close(step["p"], probs[t].max().item(), **ON_THE_PAGE)
            assert len(step["top"]) == 5 and all(p <= step["p"] for _, p in step["top"])


def test_the_page_fetches_nothing(page):
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", page, re.I)
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page, re.I)
    assert "default-src 'none'" in page                     # and the browser is told so


def test_beam_hypotheses_are_ranked_and_scored_as_the_model_scores_them(trained):
    _, x, _, _, trainer, _ = trained
    model = trainer.model.eval()
    view = translation_view(model, x.vocab, SENTENCES[1], hypotheses=4)
    src = torch.tensor(x.vocab.token_ids([SENTENCES[1]], "en"))
    best = beam_search(model, src, x.vocab.max_seq_length, 4)[0].tolist()
    assert view["beam"][0]["text"] == " ".join(x.vocab.words(best))
    scores = [h["score"] for h in view["beam"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 4
    for h in view["beam"]:           # log p: the sum of the model's log-probabilities
        ids = x.vocab.tokenizers["es"].ids([h["text"]])[0] + [1]      # EOS ends it
        tgt = torch.tensor([[SOS_INDEX] + ids])
        logp = torch.log_softmax(model(src, tgt[:, :-1])[0].double(), -1)
        expected = logp.gather(1, tgt[0, 1:, None]).sum().item()
        assert abs(h["logp"] - expected) < 1e-3, (h, expected)


def test_an_untrained_lecture_model_gives_a_small_page():
    """256, 4+4 layers, 4 heads, untrained: its outputs run to the maximum length."""
    dls = DLStudio(use_gpu=False, seed=0)
    x = TransformerFG(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=256,
                      max_seq_length=10)
    enc = x.MasterEncoder(dls, x, num_basic_encoders=4, num_atten_heads=4)
    dec = x.MasterDecoderWithMasking(dls, x, num_basic_decoders=4, num_atten_heads=4)
    model = x.model_from(enc, dec).eval()
    sentences = ["did her writer see your bottle yesterday", "do they play the guitars",
                 "you will not be sick next week", "she will bring the shoes",
                 "they walked in your farm last night"]
    views = [translation_view(model, x.vocab, s) for s in sentences]
    assert max(len(v["steps"]) for v in views) == x.vocab.max_seq_length - 1   # no EOS
    size = len(render_page({"title": "untrained"}, views).encode("utf-8"))
    assert size < 3_000_000, size


class NoWeightsFG(TransformerFG):
    """A student's head whose forward never hands its weights to keep_weights."""

    class AttentionHead(TransformerFG.AttentionHead):
        def forward(self, x, mask=None, memory=None):
            kv = x if memory is None else memory
            scores = self.WQ(x) @ self.WK(kv).transpose(1, 2) / self.qkv_size ** 0.5
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            return torch.softmax(scores, -1) @ self.WV(kv)


def test_a_head_that_keeps_no_weights_is_named_not_drawn():
    dls = DLStudio(use_gpu=False, seed=0)
    x = NoWeightsFG(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=16)
    model = x.model_from(x.MasterEncoder(dls, x, 1, 2),
                         x.MasterDecoderWithMasking(dls, x, 1, 2)).eval()
    view = translation_view(model, x.vocab, "you run")
    assert "NoWeightsFG.AttentionHead" in view["maps"]["encoder"]["missing"]
    assert "keep_weights" in view["maps"]["encoder"]["missing"]
    assert view["output"] == translate_sentences(model, x.vocab, ["you run"])[0]


def test_gpt_view_is_its_greedy_continuation_and_causal_weights():
    dls = DLStudio(use_gpu=False, seed=0)
    gpt = TransformerGPT(dl_studio=dls, sentences=["la casa es roja", "el perro come"] * 10,
                         tokenizer="word", embedding_size=16, num_basic_decoders=2,
                         num_atten_heads=2)
    gpt.eval()
    view = gpt_view(gpt, "la casa", prompt_ids(gpt, "la casa"))
    assert view["output"] == generate_text(gpt, "la casa")[0]
    ids = generate(gpt, prompt_ids(gpt, "la casa"))[0].tolist()
    text = torch.tensor([ids[:ids.index(1)] if 1 in ids else ids])     # up to EOS
    assert view["tokens"]["text"] == gpt.vocab.readable(text[0].tolist())
    layers = gpt.master_decoder.basic_decoder_arr
    from DLStudio.model.recorder import record_attention
    weights = record_attention([d.self_attention for d in layers], lambda: gpt(text))
    assert_same_weights(view["maps"]["self"]["layers"], [w[0] for w in weights])
    assert all((torch.tensor(h).triu(1) == 0).all() for layer in view["maps"]["self"]["layers"]
               for h in layer)                                          # causal


def test_bert_view_fills_each_mask_and_its_attention_looks_both_ways(tmp_path):
    dls = DLStudio(use_gpu=False, seed=0, epochs=1, batch_size=8)
    bert = TransformerBERT(dl_studio=dls, sentences=["la casa es roja", "el perro come"] * 10,
                           tokenizer="word", embedding_size=16, num_basic_encoders=2,
                           num_atten_heads=2)
    bert.run_code_for_pretraining(str(tmp_path / "bert"), max_steps=2)
    ids, segments = bert.vocab.layout(["la [MASK] es [MASK]"])
    view = bert_view(bert, "la [MASK] es [MASK]", ids, segments)
    filled = [[t for t, _ in options][0] for options in bert.fill_mask("la [MASK] es [MASK]",
                                                                        top=1)]
    assert view["output"].split()[1::2] == filled and len(view["steps"]) == 2
    weights = bert.attention_maps(ids, segments)
    assert_same_weights(view["maps"]["bidirectional"]["layers"], [w[0] for w in weights])
    upper = sum(float(torch.tensor(h).triu(1).sum()) for layer in
                view["maps"]["bidirectional"]["layers"] for h in layer)
    assert upper > 0                                     # a token sees the ones after it
    out = tmp_path / "bert.html"
    assert explore_main([str(tmp_path / "bert"), "la [MASK] es roja", "--out", str(out)]) == 0
    assert "TransformerBERT" in out.read_text()


def test_vision_view_is_the_class_tokens_row():
    dls = DLStudio(use_gpu=False, seed=0)
    vit = visTransformer(dl_studio=dls, patch_size=(8, 8), embedding_size=16,
                         num_basic_encoders=2, num_atten_heads=2, classes=SHAPE_CLASSES)
    vit.load_shapes_dataset(8, 4)
    vit.eval()
    image = vit.test_set.images[0]
    view = vision_view(vit, image, int(vit.test_set.labels[0]), vit.classes, (4, 4))
    maps = vit.attention_maps(image[None].float().div(255))
    assert_same_weights(view["maps"]["class"]["layers"], [m[0, :, 0] for m in maps])
    assert view["output"] == vit.classes[int(vit.predict(image[None])[0])]
    assert view["image"].startswith("data:image/png;base64,")


@pytest.fixture(scope="module")
def server(trained):
    from argparse import Namespace

    from DLStudio.cli.explore import explorer
    args = Namespace(model_class=None, beam=1, hypotheses=2, images=4, dataroot=None,
                     weights="raw", length_penalty=0.6)
    from DLStudio.checkpoints import find_checkpoint
    header, make_view, _ = explorer(find_checkpoint(str(trained[0] / "ck"), "1"), args)
    server = ExplorerServer(render_page(header, [], live=True), make_view)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def ask(server, method, path, body=None, host=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    sent = {"Host": host or f"127.0.0.1:{server.port}", **(headers or {})}
    connection.request(method, path, body=body, headers=sent)
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    return answer.status, data


def test_the_live_server_translates_what_the_page_sends(trained, server):
    status, page = ask(server, "GET", "/")
    assert status == 200 and page_data(page.decode("utf-8"))["live"] is True
    body = json.dumps({"text": SENTENCES[0]})
    status, data = ask(server, "POST", "/explore", body,
                       headers={"Content-Type": "application/json"})
    assert status == 200
    model = trained[4].model.eval()
    assert json.loads(data)["view"]["output"] == translate_sentences(
        model, trained[1].vocab, SENTENCES[:1])[0]
    status, data = ask(server, "POST", "/explore", json.dumps({"text": "zyzzyva"}),
                       headers={"Content-Type": "application/json"})
    assert status == 400 and "zyzzyva" in json.loads(data)["error"]       # the message


def test_the_live_server_answers_only_this_machine_and_small_bodies(server):
    assert ask(server, "GET", "/", host="attacker.example")[0] == 403    # DNS rebinding
    assert ask(server, "GET", "/", host=f"127.0.0.1:{server.port + 1}")[0] == 403
    status, _ = ask(server, "POST", "/explore", "x" * (BODY_LIMIT + 1),
                    headers={"Content-Type": "application/json"})
    assert status == 413
    status, _ = ask(server, "POST", "/explore", "text=hello",
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415                          # a form from another site is not JSON
    assert ask(server, "GET", "/../../etc/passwd")[0] == 404
    assert ask(server, "POST", "/explore", "{}", headers={"Content-Type":
                                                          "application/json"})[0] == 400


def test_explore_says_what_is_wrong_with_its_input(trained, tmp_path, capsys):
    ck = str(trained[0] / "ck")
    assert explore_main([ck, "1", "the zyzzyva sleeps", "--out", str(tmp_path / "p.html")]) == 1
    assert "zyzzyva" in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists()
    with pytest.raises(SystemExit):                  # argparse: no sentence and no --serve
        explore_main([ck, "1"])
    assert "give at least one input" in capsys.readouterr().err


@pytest.mark.slow
def test_serve_prints_its_address_answers_there_and_stops_on_ctrl_c(trained):
    """Started as a shell starts a job in the background, with SIGINT ignored: the server
    sets its own handler, so Ctrl-C (a SIGINT) still stops it."""
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    from .conftest import ROOT
    server = subprocess.Popen(
        [sys.executable, "-m", "DLStudio", "explore", str(trained[0] / "ck"), "1", "--serve"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        line = server.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line + server.stderr.read()
        with urllib.request.urlopen(url[0], timeout=30) as answer:
            assert page_data(answer.read().decode("utf-8"))["live"] is True
        server.send_signal(signal.SIGINT)
        out, _ = server.communicate(timeout=30)
        assert server.returncode == 0 and "stopped" in out
    finally:
        server.kill()


def _live(make_view):
    server = ExplorerServer(render_page({"title": "t", "facts": {}, "ask": "a sentence"}, [],
                                        live=True), make_view)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_client_that_stops_sending_does_not_stall_the_server():
    import socket
    server = _live(lambda text: {"output": text})
    try:
        stalled = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        stalled.sendall(f"POST /explore HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode())
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        connection.request("GET", "/", headers={"Host": f"127.0.0.1:{server.port}"})
        assert connection.getresponse().status == 200      # answered while the other waits
        stalled.close()
    finally:
        server.shutdown()
        server.server_close()


def test_an_unexpected_error_is_answered_500_in_one_line_and_the_server_goes_on(capsys):
    def make_view(text):
        if text == "boom":
            raise RuntimeError("the model broke\nin two lines")
        return {"output": text}
    server = _live(make_view)
    json_type = {"Content-Type": "application/json"}
    try:
        status, data = ask(server, "POST", "/explore", json.dumps({"text": "boom"}),
                           headers=json_type)
        error = json.loads(data)["error"]
        assert status == 500 and "RuntimeError: the model broke" in error and "\n" not in error
        status, data = ask(server, "POST", "/explore", json.dumps({"text": "hi"}),
                           headers=json_type)
        assert status == 200 and json.loads(data)["view"]["output"] == "hi"
    finally:
        server.shutdown()
        server.server_close()
    said = capsys.readouterr().err
    assert "RuntimeError: the model broke" in said and "Traceback" not in said


def test_a_request_that_fails_outside_its_answer_is_one_line_and_a_hang_up_none(capsys):
    """A client that hangs up before its answer is written (BrokenPipeError in the handler:
    seen once under load) prints nothing; any other failure one line, never a traceback."""
    server = ExplorerServer("<html></html>", lambda text: {"output": text})
    try:
        for error in (BrokenPipeError(32, "Broken pipe"), RuntimeError("odd\nfailure")):
            try:
                raise error
            except Exception:
                server.handle_error(None, ("127.0.0.1", 5))
    finally:
        server.server_close()
    said = capsys.readouterr().err
    assert said == "a request from 127.0.0.1 failed: RuntimeError: odd failure\n"
