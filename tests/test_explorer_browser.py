"""The attention explorer in a real browser: Debian's headless Chromium, driven by Selenium
through chromedriver. The file page opens with every outside host unresolvable and makes no
request; pointing at a word shows the model's attention row (to 1e-4); layer, head, kind and
"all heads" switch the view; the live page translates what is typed as translate_sentence.py
does; GPT and visTransformer pages show their weights. Each test saves a screenshot in its
folder (and in $DLSTUDIO_SCREENSHOTS, when set: the README's picture comes from here).

Without a browser these tests skip; under DLSTUDIO_BROWSER_TESTS=required (.ci/run sets it)
they fail instead."""

import json
import os
import shutil
import subprocess
import sys
import threading
from argparse import Namespace

import pytest
import torch

from DLStudio.checkpoints import find_checkpoint
from DLStudio.cli.explore import ExplorerServer, explore_main, explorer
from DLStudio.evaluation.explorer_page import render_page
from DLStudio.model.recorder import record_attention
from DLStudio.model.tokens import SOS_INDEX

from .close import assert_close
from .conftest import ROOT

pytestmark = pytest.mark.slow
SENTENCES = ["she is not tired today", "we will not eat the red apples"]
REQUIRED = os.environ.get("DLSTUDIO_BROWSER_TESTS") == "required"

#: The page carries weights to 4 decimals (explorer_page.SCALE): equal to that, of 1.
ON_THE_PAGE = dict(scale=1.0, rel=1e-4)


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        webdriver = None
    missing = [name for name, found in (("chromium", chromium), ("chromedriver", driver_path),
                                        ("selenium", webdriver)) if not found]
    if missing:
        message = (f"no {', '.join(missing)}: apt-get install chromium chromium-driver; "
                   "pip install selenium")
        pytest.fail(message) if REQUIRED else pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # every host name unresolvable: a page that reached for the network would fail to load
    unresolvable = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                 "--disable-dev-shm-usage", unresolvable):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def open_page(driver, url):
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get_log("performance")                   # forget earlier requests and messages
    driver.get_log("browser")
    driver.get(url)
    WebDriverWait(driver, 20).until(lambda d: d.find_element(
        "tag name", "body").get_attribute("data-ready") == "true")
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def requests_made(driver):
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def fits_the_window(driver):
    """Long outputs scroll inside their panel; the page itself never gets wider."""
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth")


def screenshot(driver, folder, name):
    path = folder / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    if os.environ.get("DLSTUDIO_SCREENSHOTS"):
        shutil.copy(path, os.path.join(os.environ["DLSTUDIO_SCREENSHOTS"], name))
    return path


def point(driver, css, index):
    from selenium.webdriver.common.action_chains import ActionChains
    target = driver.find_elements("css selector", css)[index]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", target)
    ActionChains(driver).move_to_element(target).perform()


def shown(driver, css):
    return torch.tensor([float(e.get_attribute("data-w"))
                         for e in driver.find_elements("css selector", css)],
                        dtype=torch.float64)


def choose(driver, select_id, value):
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element("id", select_id)).select_by_value(str(value))


def test_the_file_page_shows_the_models_weights_where_you_point(trained, browser, tmp_path,
                                                               monkeypatch):
    folder, x, _, _, trainer, _ = trained
    page = tmp_path / "explorer.html"
    monkeypatch.chdir(folder)                     # the page names the checkpoint as given
    assert explore_main(["ck", "1", *SENTENCES, "--out", str(page)]) == 0
    open_page(browser, page.as_uri())
    assert all(u.startswith(("file:", "data:")) for u in requests_made(browser)), \
        requests_made(browser)                                    # nothing from elsewhere
    model = trainer.model.eval()
    src = torch.tensor(x.vocab.token_ids([SENTENCES[0]], "en"))
    out = browser.find_element("id", "output").text.split(")", 1)[1].strip()
    tgt = torch.tensor([[SOS_INDEX] + x.vocab.tokenizers["es"].ids([out])[0]])
    maps = model.attention_maps(src, tgt)

    point(browser, "#large .tok.query", 2)        # "is": where it looks, layer 1, head 1
    assert_close(shown(browser, "#large .tok.key"), maps["encoder"][0][0, 0, 2], **ON_THE_PAGE)
    choose(browser, "layer", 1)
    choose(browser, "head", 2)
    panel = browser.find_element("css selector", "#large .panel")
    assert (panel.get_attribute("data-layer"), panel.get_attribute("data-head")) == ("1", "2")
    point(browser, "#large .tok.query", 4)
    assert_close(shown(browser, "#large .tok.key"), maps["encoder"][1][0, 2, 4], **ON_THE_PAGE)
    cells = shown(browser, '#large td.cell[data-q="4"]')         # its row in the matrix too
    assert_close(cells, maps["encoder"][1][0, 2, 4], **ON_THE_PAGE)

    choose(browser, "kind", "cross")              # an English word: who looks at it
    point(browser, "#large .tok.key", 1)
    column = maps["cross"][1][0, 2, :, 1]
    assert_close(shown(browser, "#large .tok.query"), column, **ON_THE_PAGE)
    browser.find_element("id", "all-heads").click()
    panels = browser.find_elements("css selector", "#large .panel")
    assert [p.get_attribute("data-head") for p in panels] == ["0", "1", "2", "3"]
    browser.find_elements("css selector", "#grid canvas")[0].click()   # layer 1 of the grid
    point(browser, '#large .panel[data-head="3"] .tok.query', 0)
    assert_close(shown(browser, '#large .panel[data-head="3"] .tok.key'),
                 maps["cross"][0][0, 3, 0], **ON_THE_PAGE)
    assert fits_the_window(browser)
    screenshot(browser, tmp_path, "explorer_all_heads.png")

    browser.find_element("id", "all-heads").click()
    choose(browser, "kind", "encoder")
    point(browser, "#large .tok.query", 1)
    screenshot(browser, tmp_path, "explorer.png")
    choose(browser, "example", 1)                  # the second sentence
    assert SENTENCES[1] in browser.find_element("id", "summary").text
    assert len(browser.find_elements("css selector", "#steps tr")) > 1
    assert len(browser.find_elements("css selector", "#beam tr")) == 5   # 4 and a header


def test_the_live_page_translates_what_you_type(trained, browser, tmp_path):
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
    folder = trained[0]
    path = find_checkpoint(str(folder / "ck"), "1")
    args = Namespace(model_class=None, beam=1, hypotheses=4, images=4, dataroot=None,
                     weights="raw", length_penalty=0.6)
    header, make_view, _ = explorer(path, args)
    server = ExplorerServer(render_page(header, [], live=True), make_view)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        open_page(browser, server.url)
        sentence = "she will bring the shoes"
        box = browser.find_element("id", "sentence")
        assert "an English sentence" in box.get_attribute("placeholder")
        box.send_keys(sentence, Keys.ENTER)
        WebDriverWait(browser, 30).until(lambda d: d.find_element(
            "tag name", "body").get_attribute("data-answered") == "1")
        expected = subprocess.run(
            [sys.executable, os.path.join(ROOT, "ExamplesTransformers", "translate_sentence.py"),
             str(folder / "ck"), "1", sentence], capture_output=True, text=True,
            env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
        assert expected.returncode == 0, expected.stderr
        output = browser.find_element("id", "output").text
        assert output.endswith(expected.stdout.strip()), (output, expected.stdout)
        box.send_keys("the zyzzyva sleeps", Keys.ENTER)             # a word it never saw
        WebDriverWait(browser, 30).until(lambda d: "zyzzyva" in d.find_element(
            "id", "error").text)
        screenshot(browser, tmp_path, "explorer_live.png")
    finally:
        server.shutdown()
        server.server_close()


def test_gpt_and_vision_pages_show_their_weights(browser, tmp_path):
    from DLStudio.cli.dispatcher import main
    from DLStudio.Transformers import TransformerGPT, visTransformer
    tiny = ["--embedding-size", "32", "--num-layers", "2", "--num-atten-heads", "2",
            "--overwrite"]
    assert main(["train_gpt", *tiny, "--max-steps", "30", "--vocab-size", "400",
                 "--checkpoints-dir", str(tmp_path / "gpt")]) == 0
    assert main(["image_recog_with_visTransformer", "--dataset", "shapes", "--num-train",
                 "200", "--num-test", "20", *tiny, "--max-steps", "10",
                 "--checkpoints-dir", str(tmp_path / "vit")]) == 0
    assert main(["explore", str(tmp_path / "gpt"), "la casa", "--out",
                 str(tmp_path / "gpt.html")]) == 0
    assert main(["explore", str(tmp_path / "vit"), "last", "0", "3", "--out",
                 str(tmp_path / "vit.html")]) == 0

    gpt = TransformerGPT.from_checkpoint(find_checkpoint(str(tmp_path / "gpt"))).model
    open_page(browser, (tmp_path / "gpt.html").as_uri())
    queries = [t.text for t in browser.find_elements("css selector", "#large .tok.query")]
    ids = [SOS_INDEX] + gpt.vocab.ids(["la casa"])[0]
    assert queries[:len(ids)] == gpt.vocab.readable(ids)
    text = torch.tensor([ids])
    weights = record_attention([d.self_attention for d in gpt.master_decoder.basic_decoder_arr],
                               lambda: gpt(text))
    point(browser, "#large .tok.query", len(ids) - 1)      # the prompt's last piece
    row = shown(browser, "#large .tok.key")[:len(ids)]
    assert_close(row, weights[0][0, 0, -1], **ON_THE_PAGE)  # causal: the rest are 0
    assert shown(browser, "#large .tok.key")[len(ids):].abs().max() == 0
    assert fits_the_window(browser)
    # the logit lens: a row before each layer and one after the last, whose tokens from the
    # prompt's last piece on are the continuation the page shows, token by token
    lens = browser.find_elements("css selector", "#lens tr")
    assert [r.find_element("css selector", "th").text for r in lens[1:]] == [
        "before layer 1", "before layer 2", "after the last"]
    last = [c.text.split()[0] for c in lens[-1].find_elements("css selector", "td")]
    said = [r.find_elements("css selector", "td")[1].text
            for r in browser.find_elements("css selector", "#steps tr")[1:]]
    columns = lens[0].find_elements("css selector", "th")[1:]
    first = len(ids) - 1 - (len(queries) - len(columns))   # the prompt's last piece's column
    got = last[max(first, 0):]
    want = said[max(0, -first):][:len(got)]
    assert want and got[:len(want)] == want
    # each head switched off: a layer x head grid; a click shows that head's attention
    cells = browser.find_elements("css selector", "table.ablation td")
    assert len(cells) == 2 * 2 and all("(" in c.text for c in cells)
    cells[3].click()                                         # layer 2, head 2
    assert (browser.find_element("id", "layer").get_attribute("value"),
            browser.find_element("id", "head").get_attribute("value")) == ("1", "1")
    browser.find_element("id", "all-heads").click()
    assert fits_the_window(browser)
    screenshot(browser, tmp_path, "explorer_gpt.png")

    vit, _, payload = visTransformer.from_checkpoint(find_checkpoint(str(tmp_path / "vit")))
    vit.load_dataset_of(payload["dataset"])
    open_page(browser, (tmp_path / "vit.html").as_uri())
    assert all(u.startswith(("file:", "data:")) for u in requests_made(browser))
    choose(browser, "example", 1)                            # test image 3
    choose(browser, "layer", 1)
    choose(browser, "head", 1)
    maps = vit.attention_maps(vit.test_set.images[3:4].float().div(255))
    patches = shown(browser, "#large .patch")
    assert_close(patches, maps[1][0, 1, 0, 1:], **ON_THE_PAGE)
    screenshot(browser, tmp_path, "explorer_vision.png")


def test_a_students_class_whose_heads_keep_no_weights_is_said_on_the_page(browser, tmp_path):
    """--model-class: the student's container is rebuilt; its heads keep no weights, so the
    page says so where the grid would be, and still shows the translation."""
    from DLStudio import DLStudio
    from DLStudio.data import BUNDLED_ARCHIVE

    from .test_explorer import NoWeightsFG
    dls = DLStudio(use_gpu=False, batch_size=64, epochs=1, seed=0)
    x = NoWeightsFG(dl_studio=dls, data_archive=BUNDLED_ARCHIVE, embedding_size=16)
    enc, dec = x.MasterEncoder(dls, x, 1, 2), x.MasterDecoderWithMasking(dls, x, 1, 2)
    trainer = x.run_code_for_training(dls, enc, dec, checkpoints_dir=str(tmp_path / "ck"),
                                      max_steps=5)
    page = tmp_path / "student.html"
    assert explore_main([trainer.last_checkpoint, "you will not be sick next week", "--out",
                         str(page), "--model-class", "tests.test_explorer:NoWeightsFG"]) == 0
    open_page(browser, page.as_uri())
    missing = browser.find_element("id", "missing").text
    assert "NoWeightsFG.AttentionHead" in missing and "keep_weights" in missing
    assert not browser.find_elements("css selector", "#large .panel")
    assert browser.find_element("id", "output").text.startswith("translation (greedy)")
    assert fits_the_window(browser)
    screenshot(browser, tmp_path, "explorer_no_weights.png")
