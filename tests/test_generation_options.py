"""What a student expects of generation, beyond its length: stop strings (the continuation
ends where it writes one, which is cut off), the repetition penalty and a chat's system
message from the command line. A small GPT trained a few steps, written as a Llama folder
by our own writer: no download, no transformers."""

import pytest
import torch

from DLStudio.cli.gpt import prompts_main
from DLStudio.containers import hub
from DLStudio.evaluation.generation import cut_at, generate
from DLStudio.Transformers import TransformerGPT

from .close import assert_close
from .test_real_models import llama_shaped_gpt


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("stop")
    return hub.write_folder(llama_shaped_gpt(path, steps=2), str(path / "folder"))


def test_a_stop_string_ends_the_continuation_and_is_cut_off(folder):
    gpt = TransformerGPT.from_huggingface(folder)
    whole = gpt.generate("la casa", max_new_tokens=30)[0]
    assert len(whole) > 6
    stop = whole[3:5]                                  # a piece of what it would write
    steps = []
    cut = gpt.generate("la casa", max_new_tokens=30, stop=[stop],
                       on_token=lambda token: steps.append(1))[0]
    assert cut == whole[:whole.find(stop)] and stop not in cut
    assert len(steps) < 30                              # it ended there, not at 30 tokens
    assert gpt.generate("la casa", max_new_tokens=30, stop=["\u2603 never"])[0] == whole


def test_cut_at_takes_the_first_stop_string_after_start():
    assert cut_at("a. b\n\nc", ["\n\n", "."]) == "a"
    assert cut_at("a. b\n\nc", ["\n\n", "."], start=2) == "a. b"
    assert cut_at("abc", []) == "abc"


def test_the_command_line_takes_stop_and_the_repetition_penalty(folder, capsys):
    gpt = TransformerGPT.from_huggingface(folder)
    whole = gpt.generate("la casa", max_new_tokens=20)[0]
    stop = whole[2:4]
    assert prompts_main([folder, "la casa", "--temperature", "0", "--max-new-tokens", "20",
                         "--stop", stop]) == 0
    assert capsys.readouterr().out.rstrip("\n") == "la casa" + whole[:whole.find(stop)]
    penalised = gpt.generate("la casa", max_new_tokens=20, repetition_penalty=5.0)[0]
    assert prompts_main([folder, "la casa", "--temperature", "0", "--max-new-tokens", "20",
                         "--repetition-penalty", "5"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == "la casa" + penalised


def test_system_is_refused_without_chat(folder, capsys):
    with pytest.raises(SystemExit):
        prompts_main([folder, "la casa", "--system", "Be brief."])
    assert "--system is the system message of a --chat conversation" in \
        capsys.readouterr().err



def test_streamed_pieces_are_whole_characters_that_join_into_the_text(folder, tmp_path):
    """The pieces of gpt.stream joined are gpt.generate's text, with and without a stop
    string; none ends inside a character of several bytes (a byte-level model's early
    tokens split them), and none shows the start of a stop string it then cuts. Our own
    GPT streams its sentence the same way."""
    gpt = TransformerGPT.from_huggingface(folder)
    for prompt in ("la casa", "¿dónde está el café?"):
        whole = gpt.generate(prompt, max_new_tokens=30)[0]
        pieces = list(gpt.stream(prompt, max_new_tokens=30))
        assert "".join(pieces) == whole and len(pieces) > 1
        if "\ufffd" not in whole:
            assert not any("\ufffd" in piece for piece in pieces)
        stop = whole[4:7]
        assert "".join(gpt.stream(prompt, max_new_tokens=30, stop=[stop])) == \
            whole[:whole.find(stop)]
    ours = llama_shaped_gpt(tmp_path, steps=2)
    assert "".join(ours.stream("la casa")) == ours.generate("la casa")[0]


def test_log_probabilities_are_the_models_own_for_the_tokens_chosen(folder):
    """With logprobs=True each new token comes with log softmax(logits)[token] of the model
    itself, whatever the temperature: recomputed here from one pass over the whole text;
    gpt.generate gives them beside each token's piece of the text."""
    gpt = TransformerGPT.from_huggingface(folder)
    prompt = torch.tensor([gpt.encode("la casa")])
    P = prompt.size(1)
    for options in ({}, {"temperature": 0.9, "seed": 3, "top_k": 20}):
        kept = []
        seed = options.get("seed")
        out = generate(gpt, prompt, 12, options.get("temperature", 0.0), options.get("top_k"),
                       None if seed is None else torch.Generator().manual_seed(seed),
                       end_ids=(), logprobs=kept)
        with torch.no_grad():
            expected = gpt(out).log_softmax(-1)[0, P - 1:-1].gather(1, out[0, P:, None])[:, 0]
        got = torch.stack(kept, 1)[0]
        assert got.shape == expected.shape == (12,)
        assert_close(got, expected)
        assert (got <= 0).all()
        (text, scored), = gpt.generate("la casa", max_new_tokens=12, logprobs=True, **options)
        assert text == gpt.generate("la casa", max_new_tokens=12, **options)[0]
        if not any("\ufffd" in piece for piece, _ in scored):   # (a byte of a character)
            assert "".join(piece for piece, _ in scored) == text
        ends = [i for i, t in enumerate(out[0, P:].tolist()) if t in gpt.vocab.end_ids]
        assert len(scored) == (ends[0] if ends else 12)
        assert [score for _, score in scored] == pytest.approx(got[:len(scored)].tolist(),
                                                               abs=1e-6)


PROMPTS = ["la casa", "el perro come la manzana y", "yo", "¿dónde está el café? Ella canta"]


def test_a_batch_of_prompts_gives_what_each_gives_alone(folder):
    """Prompts of different lengths continued together (padded on the left, their pads
    masked, their rotary positions their own): each row's text is its prompt's alone, with
    the cache and without, in batches of any size, with a stop string."""
    gpt = TransformerGPT.from_huggingface(folder)
    alone = [gpt.generate(p, max_new_tokens=15)[0] for p in PROMPTS]
    assert len(set(alone)) == len(alone)
    assert gpt.generate(PROMPTS, max_new_tokens=15) == alone
    assert gpt.generate(PROMPTS, max_new_tokens=15, use_cache=False) == alone
    assert gpt.generate(PROMPTS, max_new_tokens=15, batch_size=3) == alone
    stop = alone[1][2:4]
    assert gpt.generate(PROMPTS, max_new_tokens=15, stop=[stop]) == \
        [gpt.generate(p, max_new_tokens=15, stop=[stop])[0] for p in PROMPTS]


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_our_own_gpts_positions_count_from_each_rows_first_token(positions):
    """A GPT with learned or sinusoidal position codes: a left-padded row's codes are those
    of the row alone (greedy sentences equal)."""
    from DLStudio import DLStudio
    text = ["la casa es roja", "el perro come la manzana", "yo no sé nada",
            "ella canta muy bien"] * 8
    gpt = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0), sentences=text,
                         tokenizer="word", embedding_size=32, num_basic_decoders=2,
                         num_atten_heads=4, positions=positions, held_out_fraction=0.0)
    prompts = ["ella canta", "el perro come la", "yo"]
    alone = [gpt.generate(p, temperature=0)[0] for p in prompts]
    assert gpt.generate(prompts, temperature=0) == alone


def test_the_command_line_continues_a_file_of_prompts_one_line_each(folder, capsys,
                                                                    monkeypatch):
    """interact_with_prompts.py FOLDER --prompts - --template ... --stop ...: one line per
    prompt, in order, each what generate gives its wrapped prompt alone."""
    import io
    gpt = TransformerGPT.from_huggingface(folder)
    template = "Q: {}\\nA:"
    wrapped = [f"Q: {p}\nA:" for p in PROMPTS]
    whole = gpt.generate(wrapped[0], max_new_tokens=12)[0]
    stop = whole[3:5]
    expected = [gpt.generate(w, max_new_tokens=12, stop=[stop])[0].replace("\n", "\\n")
                for w in wrapped]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(PROMPTS) + "\n"))
    assert prompts_main([folder, "--prompts", "-", "--template", template, "--temperature",
                         "0", "--max-new-tokens", "12", "--stop", stop,
                         "--batch-size", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == expected
    with pytest.raises(SystemExit):
        prompts_main([folder, "--template", "Q: {}"])
    assert "needs --prompts" in capsys.readouterr().err


CHAT = ("{% for m in messages %}<|start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|eot_id|>"
        "{% endfor %}{% if add_generation_prompt %}<|start|>assistant\n{% endif %}")


def chat_folder(folder, tmp_path, context=512):
    """The folder with a chat template and a context of ``context`` tokens."""
    import json
    import shutil
    path = tmp_path / "chat"
    shutil.copytree(folder, path)
    config = json.loads((path / "tokenizer_config.json").read_text())
    (path / "tokenizer_config.json").write_text(json.dumps(dict(config, chat_template=CHAT)))
    model = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(dict(model, max_position_embeddings=context)))
    return str(path)


def test_a_chat_reads_only_what_its_caches_do_not_hold(folder, tmp_path):
    """Three turns with a PrefixCache: the same replies as reading each turn's whole
    conversation afresh, and each turn reads none of the previous turn's prompt again (its
    keys and values are in the caches; a reply that re-encodes otherwise is read again)."""
    from DLStudio.evaluation.generation import PrefixCache
    gpt = TransformerGPT.from_huggingface(chat_folder(folder, tmp_path))
    lines, options = ["hola", "la casa es roja", "el perro"], dict(max_new_tokens=8)
    replies, messages, lengths = [], [], []
    for line in lines:
        messages.append({"role": "user", "content": line})
        ids = gpt.vocab.chat(messages)[1]
        lengths.append(len(ids))
        replies.append(gpt.generate(None, ids=ids, **options)[0])
        messages.append({"role": "assistant", "content": replies[-1]})
    read, forward = [], gpt.master_decoder.forward

    def counted(x, *args, **kwargs):                  # the positions each pass reads
        read.append(x.size(1))
        return forward(x, *args, **kwargs)
    gpt.master_decoder.forward = counted
    messages, got, first_reads = [], [], []
    with PrefixCache(gpt) as session:
        for line in lines:
            messages.append({"role": "user", "content": line})
            before = len(read)
            got.append(gpt.generate(None, ids=gpt.vocab.chat(messages)[1], session=session,
                                    **options)[0])
            first_reads.append(read[before])
            messages.append({"role": "assistant", "content": got[-1]})
    assert got == replies
    assert first_reads[0] == lengths[0]
    assert all(first <= length - earlier for first, length, earlier in
               zip(first_reads[1:], lengths[1:], lengths))     # the last prompt is not re-read
    assert sum(first_reads) < sum(lengths) * 0.6


def test_a_chat_says_when_it_outgrows_the_context(folder, tmp_path, capsys, monkeypatch):
    import io
    path = chat_folder(folder, tmp_path, context=120)
    monkeypatch.setattr("sys.stdin", io.StringIO("hola\nla casa es roja\nel perro come la "
                                                 "manzana\nyo no sé nada\n" + "y " * 130 + "\n"))
    assert prompts_main([path, "--chat", "--temperature", "0", "--max-new-tokens", "6"]) == 0
    out = capsys.readouterr()
    assert out.out.count("assistant> ") == 4
    assert "outgrown this model's context of 120 tokens" in out.err
    assert "this model reads 120: say it in fewer words" in out.err


def test_ids_longer_than_the_context_are_refused_in_words(folder):
    gpt = TransformerGPT.from_huggingface(folder)
    with pytest.raises(ValueError, match="give a shorter one"):
        gpt.generate(None, ids=[5] * gpt.max_seq_length)
    with pytest.raises(ValueError, match="give one"):
        gpt.generate(None, ids=[])
