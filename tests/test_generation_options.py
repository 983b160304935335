"""What a student expects of generation, beyond its length: stop strings (the continuation
ends where it writes one, which is cut off), the repetition penalty and a chat's system
message from the command line. A small GPT trained a few steps, written as a Llama folder
by our own writer: no download, no transformers."""

import pytest

from DLStudio.cli.gpt import prompts_main
from DLStudio.containers import hub
from DLStudio.evaluation.generation import cut_at
from DLStudio.Transformers import TransformerGPT

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
