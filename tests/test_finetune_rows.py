"""Fine-tuning rows as TRL reads them: a completion ends with the tokenizer's own end token,
every row error names its file, a conversational preference row is refused as one, and DPO
trains with every dropout off (its step-0 loss, in training mode, is ln 2)."""

import json
import math
import os
import types

import pytest
import torch

from DLStudio import DLStudio
from DLStudio.data.hub_tokenizer import HubTokenizer
from DLStudio.training.finetune import PreferenceTrainer
from DLStudio.training.rows import Example, RowError, encode_rows, read_rows
from DLStudio.Transformers import TransformerGPT

from .hub_folders import sentencepiece_tokenizer
from .test_lora import llama_gpt


def llama2c_vocab(tmp_path):
    """A SentencePiece folder whose generation_config.json names <s> (id 1) before </s>
    (id 2) among its end ids, as llama2.c's exports do; its tokenizer's eos_token is </s>."""
    path = str(tmp_path / "sp")
    sentencepiece_tokenizer(path)
    (tmp_path / "sp" / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 2]}))
    return HubTokenizer.from_folder(path, {"vocab_size": 600})


def test_a_completion_ends_with_the_tokenizers_end_token_as_trl_appends_it(tmp_path):
    vocab = llama2c_vocab(tmp_path)
    assert vocab.end_ids[0] == 1 and vocab.eos_id == 2
    gpt = types.SimpleNamespace(vocab=vocab, max_seq_length=256)
    (example,), _ = encode_rows(gpt, "completion", [(1, {"prompt": "the quick",
                                                          "completion": " brown fox"})])
    assert example.ids[-1] == 2 and example.learn[-1] and 1 not in example.ids[1:]


def test_every_row_error_names_its_file(tmp_path):
    gpt = types.SimpleNamespace(vocab=llama2c_vocab(tmp_path), max_seq_length=256)
    rows = tmp_path / "chat.jsonl"
    rows.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "hola"}]}) + "\n")
    kind, read = read_rows(str(rows))
    with pytest.raises(RowError, match=f"^{rows}, line 1: this folder has no chat template"):
        encode_rows(gpt, kind, read, path=str(rows))


@pytest.mark.parametrize("row", [
    {"prompt": [{"role": "user", "content": "hi"}],
     "chosen": [{"role": "assistant", "content": "hola"}],
     "rejected": [{"role": "assistant", "content": "adios"}]},
    {"chosen": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hola"}],
     "rejected": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}])
def test_a_conversational_preference_row_is_refused_as_one(tmp_path, row):
    rows = tmp_path / "pairs.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    with pytest.raises(RowError, match="line 1: a conversational preference row"):
        read_rows(str(rows))


def test_dpo_trains_with_every_dropout_off_so_step_0_is_its_reference():
    gpt = llama_gpt(dropout=0.3)
    gpt.add_lora(rank=2, dropout=0.2)
    assert any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in gpt.modules())
    pairs = [(Example(list(range(3, 3 + n)), [False] * 3 + [True] * (n - 3), i),
              Example(list(range(9, 9 + n)), [False] * 3 + [True] * (n - 3), i))
             for i, n in enumerate((6, 9, 7, 8))]
    trainer = PreferenceTrainer(gpt, pairs, [], torch.optim.SGD(
        [p for p in gpt.parameters() if p.requires_grad], lr=0.0),
        DLStudio(use_gpu=False, batch_size=4, epochs=1, seed=0), save_checkpoints=False)
    assert all(m.p == 0 for m in gpt.modules() if isinstance(m, torch.nn.Dropout))
    gpt.train()
    part = trainer.tensors(pairs)
    with torch.no_grad():
        loss = trainer.part_loss(part) / trainer.count(part)
    assert float(loss) == pytest.approx(math.log(2), abs=1e-6)


def test_a_lora_runs_checkpoints_keep_the_adapter_not_the_frozen_model(tmp_path, capsys,
                                                                       monkeypatch):
    """Each checkpoint of a LoRA run holds the weights that learn (A and B) and the
    trainer's state; --resume reads the frozen rest from the model again; a checkpoint
    read as a whole model says what it is."""
    from DLStudio.checkpoints import CheckpointError, load_checkpoint, load_into

    from .test_finetune import CHATS, our_folder, run, write_rows
    monkeypatch.chdir(tmp_path)
    folder = our_folder(tmp_path)
    data = write_rows(tmp_path / "chat.jsonl", CHATS)
    common = [folder, "--data", data, "--lora-rank", 2, "--batch-size", 4,
              "--checkpoints-dir", "ck"]
    status, said = run(common + ["--max-steps", 2], capsys)
    assert status == 0, said
    ck = load_checkpoint("ck/checkpoint_0_partial.pt" if os.path.exists(
        "ck/checkpoint_0_partial.pt") else "ck/checkpoint_0.pt")
    assert ck["weights_kept"] == "learnt" and ck["model"]
    assert all(".loras." in name for name in ck["model"])
    full = sum(p.numel() for p in TransformerGPT.from_huggingface(folder).parameters())
    assert sum(t.numel() for t in ck["model"].values()) < full / 10
    status, said = run(common + ["--resume", "--epochs", 2], capsys)
    assert status == 0, said
    with pytest.raises(CheckpointError, match="keeps a LoRA fine-tuning's learnt weights"):
        load_into(TransformerGPT.from_huggingface(folder), ck)


QWEN_LIKE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
             "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
MARKED = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' %}"
          "{% generation %}{{ m['content'] }}{% endgeneration %}<|im_end|>\n{% else %}"
          "{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TURNS = [{"role": "user", "content": "the house"}, {"role": "assistant", "content": "la casa"},
         {"role": "user", "content": "the dog"}, {"role": "assistant", "content": "el perro"}]


def chat_folder(path, template):
    """A byte-level folder with <|im_start|> and <|im_end|> (its eos_token) and ``template``,
    written with the tokenizers library alone."""
    from .hub_folders import byte_level_bpe
    os.makedirs(path, exist_ok=True)
    tok = byte_level_bpe(specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>"))
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>",
                   "chat_template": template}, f)
    return path


@pytest.mark.parametrize("template, expected", [
    (QWEN_LIKE, "la casa<|im_end|>el perro<|im_end|>"), (MARKED, "la casael perro")])
def test_an_assistant_turn_is_learnt_to_its_end_of_turn_token_and_no_further(tmp_path,
                                                                            template, expected):
    """The newline the template writes after <|im_end|> is the next turn's, never learnt;
    with {% generation %} markers, exactly what they hold is (here the text alone)."""
    vocab = HubTokenizer.from_folder(chat_folder(str(tmp_path / "c"), template),
                                     {"vocab_size": 500})
    gpt = types.SimpleNamespace(vocab=vocab, max_seq_length=256)
    (example,), _ = encode_rows(gpt, "messages", [(1, {"messages": TURNS})])
    learnt = [vocab.hf.decode([i], skip_special_tokens=False)
              for i, learn in zip(example.ids, example.learn) if learn]
    assert "".join(learnt) == expected


@pytest.mark.slow
def test_generation_blocks_are_transformers_assistant_mask(tmp_path):
    pytest.importorskip("transformers", reason="needs transformers (the parity extra)")
    from transformers import AutoTokenizer
    path = chat_folder(str(tmp_path / "c"), MARKED)
    theirs = AutoTokenizer.from_pretrained(path).apply_chat_template(
        TURNS, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    vocab = HubTokenizer.from_folder(path, {"vocab_size": 500})
    (example,), _ = encode_rows(types.SimpleNamespace(vocab=vocab, max_seq_length=256),
                                "messages", [(1, {"messages": TURNS})])
    assert example.ids == list(theirs["input_ids"])
    assert [int(x) for x in example.learn] == list(theirs["assistant_masks"])
