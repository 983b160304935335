"""Fine-tuning a language model (training/rows.py, training/finetune.py, finetune_lm.py): the
loss learns the assistant's turns and completions only (as transformers' loss with the
prompt's labels masked), DPO's loss is TRL's on the same batch, the adapter and merged
folder written after training give PEFT and transformers our logits, the base folder's
files stay as they were, a run resumes, and bad rows are refused by line."""

import hashlib
import json
import math

import pytest
import torch

from DLStudio import DLStudio
from DLStudio.cli.finetune import finetune_main
from DLStudio.cli.gpt import prompts_main
from DLStudio.containers import hub
from DLStudio.training.finetune import CompletionTrainer, completion_logps, dpo_loss, padded
from DLStudio.training.rows import RowError, encode_rows, read_rows
from DLStudio.Transformers import TransformerGPT

from .close import assert_close
from .hub_folders import llama_folder
from .test_lora import llama_gpt as short_llama_gpt

#: A chat template of plain words (our BPE folder has no special tokens to mark turns).
PLAIN_CHAT = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
              "{% if add_generation_prompt %}assistant:{% endif %}")
CHATS = [{"messages": [{"role": "system", "content": "answer in spanish"},
                       {"role": "user", "content": "the house"},
                       {"role": "assistant", "content": "la casa"},
                       {"role": "user", "content": "the dog"},
                       {"role": "assistant", "content": "el perro"}]}] * 12


def llama_gpt():
    """test_lora's Llama-shaped GPT, reading 256 tokens."""
    gpt = short_llama_gpt()
    return type(gpt)(dl_studio=gpt.dl_studio, sentences=gpt.training_sentences,
                     **dict(gpt.settings_class.record(gpt), max_seq_length=256)).eval()


def our_folder(tmp_path, chat=PLAIN_CHAT):
    """Our Llama-shaped GPT written as a folder, with a chat template."""
    folder = hub.write_folder(llama_gpt(), str(tmp_path / "folder"))
    config = tmp_path / "folder" / "tokenizer_config.json"
    if chat:
        config.write_text(json.dumps(dict(json.loads(config.read_text()), chat_template=chat)))
    return folder


def write_rows(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return str(path)


def learnt_text(gpt, example):
    return gpt.vocab.decode([i for i, learn in zip(example.ids, example.learn) if learn])


def test_chat_rows_learn_the_assistant_turns_and_nothing_else(tmp_path):
    gpt = TransformerGPT.from_huggingface(our_folder(tmp_path))
    kind, rows = read_rows(write_rows(tmp_path / "chat.jsonl", CHATS[:1]))
    (example,), _ = encode_rows(gpt, kind, rows)
    assert kind == "messages"
    assert learnt_text(gpt, example).split() == ["la", "casa", "el", "perro"]
    prompt = gpt.vocab.decode([i for i, learn in zip(example.ids, example.learn) if not learn])
    assert "answer in spanish" in prompt and "la" not in prompt.split()


def test_a_completion_is_learnt_with_its_end_token_and_the_prompt_is_not(tmp_path):
    gpt = TransformerGPT.from_huggingface(our_folder(tmp_path))
    rows = [{"prompt": "english: the house\nspanish:", "completion": " la casa"}]
    kind, rows = read_rows(write_rows(tmp_path / "rows.jsonl", rows))
    (example,), _ = encode_rows(gpt, kind, rows)
    assert example.ids[-1] == gpt.vocab.end_ids[0] and example.learn[-1]
    assert learnt_text(gpt, example).split() == ["la", "casa"]
    assert not any(example.learn[:len(gpt.vocab.encode("english: the house\nspanish:")) - 1])


def test_the_loss_is_the_cross_entropy_of_the_learnt_tokens_alone(tmp_path):
    """The batch's loss is the mean of -log p over the tokens learnt (computed here from the
    whole logits); giving a prompt's tokens other targets changes nothing."""
    gpt = TransformerGPT.from_huggingface(our_folder(tmp_path))
    kind, rows = read_rows(write_rows(tmp_path / "chat.jsonl", CHATS[:3]))
    examples, _ = encode_rows(gpt, kind, rows)
    ids, keep = padded(examples, torch.device("cpu"))
    total, count = gpt.loss(ids, keep=keep)
    logp = torch.log_softmax(gpt(ids[:, :-1]), -1)
    targets = ids[:, 1:].clone()
    targets[~keep] = 7                      # other targets where nothing is learnt
    picked = logp.gather(-1, targets[..., None])[..., 0]
    assert count == int(keep.sum()) > 0
    assert_close(total, -picked[keep].sum())


def test_lora_off_is_the_base_model_and_remove_lora_leaves_a_plain_one():
    gpt = llama_gpt()
    ids = torch.randint(3, 60, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        base = gpt(ids)
        gpt.add_lora(rank=2, targets=("WQ", "WV", "W2"))
        for _, _, lora, _ in gpt.lora_places():
            lora.B.normal_()
        adapted = gpt(ids)
        with gpt.lora_off():
            assert torch.equal(gpt(ids), base)
        assert (adapted - base).abs().max() > 1e-3
        gpt.remove_lora()
        assert_close(gpt(ids), adapted)
    assert not any("lora" in name or "parametrizations" in name for name in gpt.state_dict())
    assert all(p.requires_grad for p in gpt.parameters())


def test_dpo_loss_is_log_2_at_the_reference_and_falls_as_the_chosen_gains():
    zero = torch.zeros(3)
    assert_close(dpo_loss(zero, zero, zero, zero), torch.full((3,), 0.6931472))
    gained = dpo_loss(torch.tensor([1.0]), zero[:1], zero[:1], zero[:1], beta=0.5)
    assert gained.item() < 0.6931472


def run(argv, capsys):
    status = finetune_main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out + out.err


def test_finetune_lm_trains_resumes_and_writes_an_adapter_read_back(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = our_folder(tmp_path)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
              for p in (tmp_path / "folder").iterdir()}
    data = write_rows(tmp_path / "chat.jsonl", CHATS)
    common = [folder, "--data", data, "--lora-rank", 4, "--batch-size", 4,
              "--learning-rate", 1e-2, "--checkpoints-dir", "ck", "--lora-dropout", 0.1]
    status, out = run(common + ["--max-steps", 2], capsys)
    assert status == 0, out
    status, out = run(common + ["--resume", "--epochs", 3, "--out", "tuned", "--merge"],
                      capsys)
    assert status == 0, out
    from DLStudio.checkpoints import load_checkpoint
    assert load_checkpoint("ck/checkpoint_2.pt")["step"] == 3 * 3     # 11 rows, 4 a step
    ppl = out.split("held-out perplexity of the completions: ")[1]
    after, first = float(ppl.split()[0]), float(ppl.split("(before: ")[1].split(")")[0])
    assert after < first                             # learnt on held-out rows too
    adapted = TransformerGPT.from_huggingface(folder, adapter="tuned/adapter")
    assert json.loads((tmp_path / "tuned/adapter/adapter_config.json").read_text())[
        "lora_dropout"] == 0.1
    merged = TransformerGPT.from_huggingface("tuned/merged")
    base = TransformerGPT.from_huggingface(folder)
    ids = torch.tensor([adapted.encode("user: the house\nassistant:")])
    with torch.no_grad():
        assert_close(adapted(ids), merged(ids))
        assert (adapted(ids) - base(ids)).abs().max() > 1e-2
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in (tmp_path / "folder").iterdir()} == before
    said = []
    for model, more in ((folder, ["--adapter", "tuned/adapter"]), ("tuned/merged", [])):
        assert prompts_main([model, "user: the house\nassistant:", "--temperature", "0",
                             "--max-new-tokens", "6", *more]) == 0
        said.append(capsys.readouterr().out)
    assert said[0] == said[1] and len(said[0]) > len("user: the house\nassistant:")
    status, out = run(common + ["--resume", "--epochs", 4, "--lora-rank", 2], capsys)
    assert status == 1 and "finetuning" in out


def test_our_gpt_checkpoint_fine_tunes_on_pairs_and_is_read_again(tmp_path, capsys,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    gpt = llama_gpt()
    trainer = gpt.trainer(str(tmp_path / "gpt"), max_steps=1)
    trainer.run()
    trainer.save(0)
    (tmp_path / "pairs.tsv").write_text("the house\tla casa\nthe dog\tel perro\n" * 6)
    status, out = run([tmp_path / "gpt", "--data", "pairs.tsv", "--template",
                       "english: {} spanish:", "--out", "tuned", "--lora-rank", 2,
                       "--epochs", 2], capsys)
    assert status == 0, out
    tuned = TransformerGPT.from_checkpoint(str(tmp_path / "tuned" / "merged"
                                               / "checkpoint_1.pt"))[0]
    assert tuned.perplexity(["la casa es roja"])["per_piece"] > 0


@pytest.mark.parametrize("rows, message", [
    ('{"messages": [{"role": "user", "content": "hi"}]}', "line 1: no assistant turn"),
    ('{"prompt": "a", "completion": "  "}', "line 1: an empty completion"),
    ('{"prompt": "a", "completion": "b"}\n\n{"prompt": "a"}', "line 3: a row has"),
    ('{"prompt": "a", "completion": "b"}\n{"prompt": "a", "chosen": "b", "rejected": "c"}',
     "line 2: a preference row among completion rows"),
    ('{"prompt": "a", "completion": "b"}\n{"prompt": "a", "completion": ', "line 2: not JSON"),
    ("a\tb\tc\td", "line 1: 4 tab-separated"),
])
def test_bad_rows_are_refused_by_line(tmp_path, rows, message):
    (tmp_path / "rows").write_text(rows)
    with pytest.raises(RowError, match=message):
        read_rows(str(tmp_path / "rows"))


def test_the_script_refuses_chat_rows_without_a_template_and_a_used_out(tmp_path, capsys,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = our_folder(tmp_path, chat=None)
    data = write_rows(tmp_path / "chat.jsonl", CHATS)
    status, out = run([folder, "--data", data], capsys)
    assert status == 1 and "line 1: this folder has no chat template" in out
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("keep me")
    status, out = run([folder, "--data", data, "--out", "used"], capsys)
    assert status == 1 and "used exists and is not empty" in out
    assert (tmp_path / "used" / "x").read_text() == "keep me"
    with pytest.raises(SystemExit) as usage:
        run([folder, "--data", data, "--lora-dropout", 1], capsys)
    assert usage.value.code == 2
    assert "--lora-dropout is a probability below 1" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# Parity with transformers, PEFT and TRL (the parity extra).

LLAMA_CHAT = [{"messages": [{"role": "user", "content": f"what is {i} plus one"},
                            {"role": "assistant", "content": f"it is {i + 1}"}]}
              for i in range(20)]


@pytest.mark.slow
def test_finetune_lm_on_a_transformers_folder_gives_peft_and_transformers_our_logits(
        tmp_path, capsys, monkeypatch):
    """finetune_lm.py FOLDER --data chat.jsonl --lora-rank 4 --merge --out DIR on a random
    Llama folder written by transformers: PEFT reads DIR/adapter onto transformers' model,
    transformers reads DIR/merged, both with our adapted model's logits within 1e-4; the
    loss at the first step is transformers' with the prompt's labels masked; the folder's
    files are unchanged."""
    pytest.importorskip("peft", reason="the PEFT parity test needs peft (the parity extra)")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    monkeypatch.chdir(tmp_path)
    folder = llama_folder(str(tmp_path / "llama"))
    before = {p.name: p.read_bytes() for p in (tmp_path / "llama").iterdir()}
    data = write_rows(tmp_path / "chat.jsonl", LLAMA_CHAT)
    gpt = TransformerGPT.from_huggingface(folder)
    examples, _ = encode_rows(gpt, *read_rows(data))
    ids, keep = padded(examples[:4], torch.device("cpu"))
    labels = ids.clone()
    labels[:, 1:][~keep] = -100
    labels[:, 0] = -100
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        theirs = model(ids, labels=labels).loss
        total, count = gpt.loss(ids, keep=keep)
    assert abs(float(total / count) - float(theirs)) < 1e-5
    status, out = run([folder, "--data", data, "--lora-rank", 4, "--merge", "--out", "tuned",
                       "--learning-rate", 1e-2, "--epochs", 2], capsys)
    assert status == 0, out
    ours = TransformerGPT.from_huggingface(folder, adapter="tuned/adapter")
    peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder),
                                     "tuned/adapter").eval()
    merged = AutoModelForCausalLM.from_pretrained("tuned/merged").eval()
    ids = torch.tensor([ours.encode("what is 3 plus one")])
    with torch.no_grad():
        logits = ours(ids)
        assert_close(logits, peft(ids).logits)
        assert_close(logits, merged(ids).logits)
        assert (logits - model(ids).logits).abs().max() > 1e-2          # it learnt
    assert {p.name: p.read_bytes() for p in (tmp_path / "llama").iterdir()} == before


@pytest.mark.slow
def test_our_dpo_loss_is_trls_on_the_same_batch(tmp_path):
    """TRL's DPOTrainer (sigmoid loss, beta 0.1) with a new LoRA (random B), its reference
    the adapter switched off; ours on our model of the same folder with the
    same adapter, reference under lora_off: the same loss within 1e-5."""
    pytest.importorskip("trl", reason="the DPO parity test needs trl (the parity extra)")
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from datasets import Dataset
    folder = llama_folder(str(tmp_path / "llama"))
    pairs = [{"prompt": "the cat", "chosen": " sat on the mat", "rejected": " ran"},
             {"prompt": "one two", "chosen": " three four", "rejected": " five six seven"}]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token = tokenizer.eos_token
    trainer = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(folder), args=DPOConfig(
        output_dir=str(tmp_path / "trl"), per_device_train_batch_size=2, beta=0.1,
        report_to=[], use_cpu=True, max_length=None), train_dataset=Dataset.from_list(pairs),
        processing_class=tokenizer, peft_config=LoraConfig(r=4, lora_alpha=8,
                                                           target_modules=["q_proj", "v_proj"]))
    model = trainer.model
    with torch.no_grad():                 # a new adapter (its reference: switched off), moved
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    model.save_pretrained(str(tmp_path / "adapter"))
    batch = next(iter(trainer.get_train_dataloader()))
    model.eval()
    with torch.no_grad():
        theirs = trainer.compute_loss(model, batch)
    gpt = TransformerGPT.from_huggingface(folder, adapter=str(tmp_path / "adapter"))
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(p) for p in pairs))
    examples, _ = encode_rows(gpt, *read_rows(str(tmp_path / "pairs.jsonl")))
    ids, keep = padded([e for pair in examples for e in pair], torch.device("cpu"))
    with torch.no_grad():
        logps = completion_logps(gpt, ids, keep).view(-1, 2)
        with gpt.lora_off():
            reference = completion_logps(gpt, ids, keep).view(-1, 2)
    ours = dpo_loss(logps[:, 0], logps[:, 1], reference[:, 0], reference[:, 1], 0.1).mean()
    assert abs(float(ours) - float(theirs)) < 1e-5
    assert abs(float(ours) - 0.6931472) > 1e-4              # not the loss at the reference


def test_a_completion_trainer_batches_accumulate_into_one_step():
    """Two batches of two rows summed into a step give the gradient of one batch of four."""
    gpt = llama_gpt()
    gpt.add_lora(rank=2)
    for _, _, lora, _ in gpt.lora_places():
        torch.nn.init.normal_(lora.B)
    from DLStudio.training.rows import Example
    examples = [Example(list(range(3, 3 + n)), [False] * 3 + [True] * (n - 3), i)
                for i, n in enumerate((6, 9, 7, 8))]
    grads = []
    for micro, accumulate in ((4, 1), (2, 2)):
        gpt.zero_grad()
        dls = DLStudio(use_gpu=False, batch_size=micro, epochs=1, seed=0)
        trainer = CompletionTrainer(gpt, examples, [], torch.optim.SGD(
            [p for p in gpt.parameters() if p.requires_grad], lr=0.0), dls,
            accumulate=accumulate, save_checkpoints=False)
        parts = [trainer.tensors(examples[i:i + micro]) for i in range(0, 4, micro)]
        loss, _ = trainer.batch_loss(*parts)
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in gpt.parameters()
                                if p.grad is not None]))
    assert_close(grads[0], grads[1])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gemma3", "olmo2", "qwen3"])
def test_a_merged_folder_keeps_its_own_architecture(tmp_path, kind):
    """A LoRA on all seven projections of a random Gemma 3, OLMo 2 or Qwen3 folder written
    by transformers, folded into the folder's own weights (hub.write_merged): transformers
    reads the merged folder with our adapted model's logits within 1e-4."""
    pytest.importorskip("transformers", reason="needs transformers (the parity extra)")
    from transformers import AutoModelForCausalLM
    folder = llama_folder(str(tmp_path / kind), kind=kind)
    gpt = TransformerGPT.from_huggingface(folder)
    gpt.add_lora(rank=4, alpha=8, targets=("q_proj", "k_proj", "v_proj", "o_proj",
                                          "gate_proj", "up_proj", "down_proj"))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, _, lora, _ in gpt.lora_places():
            lora.B.copy_(torch.randn(lora.B.shape, generator=g) * 0.3)
    hub.write_merged(gpt, str(tmp_path / "merged"))
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged")).eval()
    base = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.tensor([gpt.encode("the quick brown fox jumps over the lazy dog")])
    with torch.no_grad():
        ours = gpt(ids)
        assert_close(ours, merged(ids).logits)
        assert (ours - base(ids).logits).abs().max() > 1e-2


# ------------------------------------------------------------------------------------------
# A classifier on a decoder (model/decoder_head.py).

def test_the_classifier_reads_the_state_the_output_layer_reads_at_the_last_token():
    gpt = llama_gpt()
    gpt.add_classifier(("a", "b", "c"))
    ids = torch.randint(3, 60, (3, 9), generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([9, 4, 6])
    keep = torch.arange(9)[None, :] == (lengths - 1)[:, None]            # each last token
    with torch.no_grad():
        states = gpt.last_states(ids, lengths)
        assert_close(gpt.master_decoder.out(states), gpt(ids, keep))
        padded_more = torch.cat([ids, torch.full((3, 5), 7)], 1)         # padding never read
        assert_close(gpt.class_logits(padded_more, lengths), gpt.class_logits(ids, lengths))


def test_a_folder_learns_a_classifier_that_classify_text_reads(tmp_path, capsys,
                                                               monkeypatch):
    from DLStudio.cli.bert import classify_main
    monkeypatch.chdir(tmp_path)
    folder = our_folder(tmp_path)
    spanish = ["la casa es roja", "el perro come", "yo no sé nada", "la niña lee",
               "ellos comen pan", "tú tienes un gato", "el libro es azul", "nosotros vamos"]
    english = ["the house is red", "the dog eats", "i know nothing", "the girl reads",
               "they eat bread", "you have a cat", "the book is blue", "we go"]
    rows = [f"es\t{t}" for t in spanish] + [f"en\t{t}" for t in english]
    (tmp_path / "train.tsv").write_text("\n".join(rows * 3) + "\n")
    (tmp_path / "test.tsv").write_text("es\tel gato come pan\nen\tthe cat eats bread\n"
                                       "es\tla casa azul\nen\tthe blue house\n")
    status, out = run([folder, "--classify", "--data", "train.tsv", "--test", "test.tsv",
                       "--lora-rank", 4, "--learning-rate", 1e-2, "--epochs", 4, "--out",
                       "classifier", "--checkpoints-dir", "ck"], capsys)
    assert status == 0, out
    accuracy = float(out.split("held-out accuracy: ")[1].split("%")[0])
    assert accuracy >= 75
    assert classify_main(["classifier", "el perro come pan"]) == 0
    said = capsys.readouterr().out
    assert said.split("\t")[0] in ("es", "en") and "es " in said and "en " in said
    gpt = TransformerGPT.from_checkpoint(
        str(next((tmp_path / "classifier").glob("checkpoint_*.pt"))))[0]
    probs = gpt.classify(["el perro come pan", "the dog eats bread"])
    assert probs.shape == (2, 2)
    assert_close(probs.sum(1), torch.ones(2))


def test_dpo_under_bf16_starts_at_ln_2_its_reference_under_the_policys_autocast():
    """At step 0 the policy is its reference: the loss is ln 2 exactly, under --precision
    bf16 too (the reference's log-probabilities computed under the same autocast)."""
    from DLStudio.training.finetune import PreferenceTrainer
    from DLStudio.training.rows import Example
    gpt = llama_gpt()
    gpt.add_lora(rank=2)
    pairs = [(Example(list(range(3, 3 + n)), [False] * 3 + [True] * (n - 3), i),
              Example(list(range(9, 9 + n)), [False] * 3 + [True] * (n - 3), i))
             for i, n in enumerate((6, 9, 7, 8))]
    dls = DLStudio(use_gpu=False, batch_size=4, epochs=1, seed=0)
    trainer = PreferenceTrainer(gpt, pairs, [], torch.optim.SGD(
        [p for p in gpt.parameters() if p.requires_grad], lr=0.0), dls, precision="bf16",
        save_checkpoints=False)
    part = trainer.tensors(pairs)
    with torch.no_grad(), trainer.precision.autocast():
        loss = trainer.part_loss(part) / trainer.count(part)
    assert float(loss) == pytest.approx(math.log(2), abs=1e-6)


def test_with_out_the_checkpoints_go_inside_it_and_two_runs_never_share_them(tmp_path, capsys,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = our_folder(tmp_path)
    data = write_rows(tmp_path / "chat.jsonl", CHATS)
    common = [folder, "--data", data, "--lora-rank", 2, "--batch-size", 4, "--max-steps", 1]
    for out in ("one", "two"):
        status, said = run(common + ["--out", out], capsys)
        assert status == 0, said
        assert (tmp_path / out / "checkpoints").is_dir() and (tmp_path / out / "adapter").is_dir()
    assert not (tmp_path / "checkpoints_finetune").exists()
    status, said = run(common + ["--out", "one"], capsys)             # it holds an adapter
    assert status != 0 and "one exists and is not empty" in said


def test_targets_an_adapter_cannot_name_are_refused_before_step_1(tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = our_folder(tmp_path)
    data = write_rows(tmp_path / "chat.jsonl", CHATS)
    for targets in ("QKV", "c_attn"):
        status, said = run([folder, "--data", data, "--lora-targets", targets, "--max-steps",
                            1, "--out", f"out_{targets}"], capsys)
        assert status != 0 and "q_proj, k_proj, v_proj apart" in said, said
        assert not (tmp_path / f"out_{targets}").exists()         # nothing trained
