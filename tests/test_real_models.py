"""Real language models in our classes (issue 50): Hugging Face folders of GPT-2, Llama and
Qwen2, made by transformers itself with random small weights (tests/hub_folders.py), read
into TransformerGPT and compared with transformers token for token; our GPT written back as
a LlamaForCausalLM folder. The comparisons need transformers (the ``parity`` extra, never a
runtime need): they skip without it, and run in make test-all (CI)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from DLStudio import DLStudio
from DLStudio.containers import hub
from DLStudio.data.hub_tokenizer import FolderError
from DLStudio.evaluation.generation import generate, next_token, penalised
from DLStudio.Transformers import TransformerGPT
from tests.hub_folders import VARIED, gpt2_folder, llama_folder

from .close import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
FOLDERS = {
    "gpt2 (vocab.json, merges.txt)": lambda p: gpt2_folder(p),
    "gpt2 (tokenizer.json)": lambda p: gpt2_folder(p, slow_tokenizer=False),
    "llama (grouped-query, tied)": lambda p: llama_folder(p),
    "llama (llama3 rope, untied, head_dim 24)": lambda p: llama_folder(
        p, tie_word_embeddings=False, head_dim=24, rope_scaling=LLAMA3_SCALING,
        rope_theta=500000.0),
    "qwen2": lambda p: llama_folder(p, kind="qwen2"),
    "qwen3 (head_dim 24, tied)": lambda p: llama_folder(p, kind="qwen3"),
    "qwen3 (untied)": lambda p: llama_folder(p, kind="qwen3", tie_word_embeddings=False),
    "mistral (a window of 6)": lambda p: llama_folder(p, kind="mistral"),
    "smollm3 (a layer without rotary positions)": lambda p: llama_folder(p, kind="smollm3"),
    "gemma3 (8 layers, 5:1 windows)": lambda p: llama_folder(p, kind="gemma3", std=0.1),
    "olmo2": lambda p: llama_folder(p, kind="olmo2"),
    "qwen2 (a window from layer 1)": lambda p: llama_folder(
        p, kind="qwen2", use_sliding_window=True, sliding_window=5, max_window_layers=1),
}
slow_parity = [pytest.mark.slow]


def transformers_or_skip():
    return pytest.importorskip("transformers", reason="the parity tests need transformers "
                               "(pip install -e '.[parity]'; make test-all installs it)")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    transformers_or_skip()
    made = {}
    for name, make in FOLDERS.items():
        path = tmp_path_factory.mktemp("hub")
        make(str(path))
        made[name] = str(path)
    return made


def reference(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    return (AutoModelForCausalLM.from_pretrained(path).eval(),
            AutoTokenizer.from_pretrained(path))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FOLDERS))
def test_a_folder_read_into_our_classes_is_transformers_token_for_token(folders, name):
    """Ids on a varied corpus, logits over 100 positions within 1e-4, 40 greedy tokens."""
    model, tokenizer = reference(folders[name])
    gpt = TransformerGPT.from_huggingface(folders[name])
    assert isinstance(gpt, TransformerGPT) and not gpt.training
    for text in VARIED:
        assert gpt.encode(text) == tokenizer(text).input_ids, text
    ids = torch.tensor([gpt.encode(" ".join(VARIED[:9]))[:100]])
    assert ids.size(1) >= 60
    with torch.no_grad():
        theirs, ours = model(ids).logits, gpt(ids)
        assert ours.shape == theirs.shape
        assert_close(ours, theirs)
        prompt = ids[:, :8]
        expected = model.generate(prompt, max_new_tokens=40, min_new_tokens=40,
                                  do_sample=False, eos_token_id=None, pad_token_id=0,
                                  attention_mask=torch.ones_like(prompt))
    got = generate(gpt, prompt, max_new_tokens=40, end_ids=(-1,))
    assert torch.equal(got, expected)
    assert len(set(got[0, 8:].tolist())) >= 4          # not one token repeated
    assert torch.equal(generate(gpt, prompt, max_new_tokens=40, end_ids=(-1,),
                                use_cache=False), expected)


SINCE_2023 = ["qwen3 (head_dim 24, tied)", "mistral (a window of 6)",
              "smollm3 (a layer without rotary positions)", "gemma3 (8 layers, 5:1 windows)",
              "olmo2", "qwen2 (a window from layer 1)"]


@pytest.mark.slow
@pytest.mark.parametrize("name", SINCE_2023)
def test_in_bf16_the_families_since_2023_choose_transformers_tokens(folders, name):
    """Both models in bf16: the likeliest token at each of 60 positions equal to
    transformers'; then 24 greedy tokens through our cache, each transformers' choice for
    that prefix or, where bf16 rounding decides, within a rounding of its best: a 64th of
    it, or twice as far as transformers' own cache moves its logits at that step (on a CPU
    with native bf16 products, AVX512-BF16, a one-token step and the whole prefix round
    apart by up to 6% of the scale in both libraries alike); a wrong cache or window gives
    tokens far from its choice."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folders[name], dtype=torch.bfloat16).eval()
    gpt = TransformerGPT.from_huggingface(folders[name], dtype=torch.bfloat16)
    ids = torch.tensor([gpt.encode(" ".join(VARIED[:9]))[:60]])
    with torch.no_grad():
        assert torch.equal(gpt(ids).argmax(-1), model(ids).logits.argmax(-1))
        got = generate(gpt, ids[:, :8], max_new_tokens=24, end_ids=(-1,))
        theirs = model(got).logits[0, 7:-1].float()                     # (24, V)
        moved = (cached_logits(model, got, 8) - theirs).abs().amax(-1)  # (24,)
    chosen = theirs.gather(1, got[0, 8:, None])[:, 0]
    best = theirs.max(-1).values
    assert got.size(1) == 32
    assert ((best - chosen) <= torch.maximum(best.abs() / 64, 2 * moved)).all(), \
        (best - chosen).tolist()
    assert (chosen == best).float().mean() >= 0.75


def cached_logits(model, ids, start):
    """transformers' logits for each next token after ``ids[:, :start]``, one token a step
    through its own cache. Shape: (1, T) -> (T - start, V)"""
    out = model(ids[:, :start], use_cache=True)
    rows = [out.logits[0, -1]]
    for t in range(start, ids.size(1) - 1):
        out = model(ids[:, t:t + 1], past_key_values=out.past_key_values, use_cache=True)
        rows.append(out.logits[0, -1])
    return torch.stack(rows).float()


@pytest.mark.slow
def test_shards_pytorch_bin_and_both_config_layouts_give_the_same_model(folders, tmp_path):
    from transformers import AutoModelForCausalLM
    source = folders["llama (llama3 rope, untied, head_dim 24)"]
    model = AutoModelForCausalLM.from_pretrained(source)
    ids = torch.arange(3, 90).view(1, -1)
    expected = model(ids).logits.detach()
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="40KB")
    assert (sharded / "model.safetensors.index.json").exists()
    old = tmp_path / "bin"
    old.mkdir()
    torch.save(model.state_dict(), old / "pytorch_model.bin")
    hub_layout = tmp_path / "hub_layout"
    shutil.copytree(source, hub_layout)
    config = json.loads((hub_layout / "config.json").read_text())
    rope = config.pop("rope_parameters", None) or {}
    if rope:           # transformers 5 wrote rope_parameters: write the hub's layout instead
        config["rope_theta"] = rope.pop("rope_theta")
        config["rope_scaling"] = rope
    else:
        config["rope_parameters"] = dict(config.pop("rope_scaling"),
                                         rope_theta=config.pop("rope_theta"))
    (hub_layout / "config.json").write_text(json.dumps(config))
    for folder in (sharded, old, hub_layout):
        for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
            if not (folder / name).exists():
                shutil.copy(os.path.join(source, name), folder / name)
        gpt = TransformerGPT.from_huggingface(str(folder))
        assert_close(gpt(ids), expected, what=folder.name)


def config_of(**fields):
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
            "num_hidden_layers": 2, "intermediate_size": 96, "max_position_embeddings": 64,
            "vocab_size": 300}
    base.update(fields)
    return base


@pytest.mark.parametrize("fields, named", [
    ({"architectures": ["Gemma2ForCausalLM"]}, "soft-capping"),
    ({"architectures": ["Gemma3ForCausalLM"], "final_logit_softcapping": 30.0},
     "final_logit_softcapping 30.0"),
    ({"architectures": ["Gemma3ForCausalLM"], "hidden_activation": "silu"},
     "hidden_activation 'silu'"),
    ({"architectures": ["Olmo2ForCausalLM"], "clip_qkv": 8.0}, "clip_qkv 8.0"),
    ({"architectures": ["MixtralForCausalLM"]}, "mixture of experts"),
    ({"layer_types": ["sliding_attention", "full_attention"]}, "without a sliding_window"),
    ({"layer_types": ["full_attention", "chunked_attention"]}, "chunked_attention"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "'yarn'"),
    ({"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e4}}, "'dynamic'"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
])
def test_what_we_cannot_reproduce_exactly_is_refused_by_name(fields, named):
    with pytest.raises(FolderError, match=named):
        hub.settings_of(config_of(**fields))


def test_every_setting_in_the_way_is_named_at_once():
    with pytest.raises(FolderError) as e:
        hub.settings_of(config_of(hidden_act="relu", layer_types=["full_attention",
                                                                 "chunked_attention"],
                                  sliding_window=4, rope_scaling={"type": "yarn"}))
    assert all(n in str(e.value) for n in ("hidden_act", "chunked_attention", "yarn"))


def test_settings_map_to_ours_and_a_rotary_model_builds_no_position_table():
    settings = hub.settings_of(config_of(num_key_value_heads=2, head_dim=24,
                                         rope_theta=500000.0, rope_scaling=LLAMA3_SCALING))
    assert settings["kv_heads"] == 2 and settings["head_size"] == 24
    assert settings["rope_scaling"]["rope_type"] == "llama3" and settings["rope_base"] == 5e5
    gpt = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0),
                         sentences=["la casa es roja", "el perro come"] * 5, tokenizer="word",
                         **{k: v for k, v in settings.items() if k != "max_seq_length"},
                         max_seq_length=100_000)
    assert gpt.embeddings_generator.positional_encoding is None       # no 1 GB for nothing
    assert gpt.master_decoder.out.bias is None
    assert gpt(torch.tensor([[0, 3, 4]])).shape == (1, 3, gpt.vocab.size)


def test_the_rotary_layouts_are_one_reordering_of_rows():
    """Hugging Face's halves (x_i, x_i+d/2) turned by rotate_half equal our pairs after
    `pairs_from_halves` reorders the rows: the classic bug is to skip it."""
    from DLStudio.model.since_2017 import RotaryEmbedding
    d, T = 8, 6
    x = torch.randn(2, T, d)                                 # rows in Hugging Face's layout
    rope = RotaryEmbedding(d)
    angle = rope.angles(T, 0, x.device)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
    halves = x * cos + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * sin
    ours = rope(hub.pairs_from_halves(x.transpose(0, -1), 1).transpose(0, -1))
    assert_close(hub.pairs_from_halves(halves.transpose(0, -1), 1).transpose(0, -1), ours)
    W = torch.randn(3 * d, 5)
    assert torch.equal(hub.halves_from_pairs(hub.pairs_from_halves(W, 3), 3), W)


def test_nucleus_sampling_keeps_the_fewest_tokens_that_reach_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    g = torch.Generator().manual_seed(0)
    drawn = {int(next_token(logits, 1.0, None, g, top_p=0.7)) for _ in range(300)}
    assert drawn == {0, 1}                        # 0.5 < 0.7, 0.5 + 0.3 reaches it
    assert {int(next_token(logits, 1.0, None, g, top_p=0.0)) for _ in range(50)} == {0}
    a = [int(next_token(logits, 1.0, None, torch.Generator().manual_seed(5), 0.9))
         for _ in range(1)]
    b = [int(next_token(logits, 1.0, None, torch.Generator().manual_seed(5), 0.9))
         for _ in range(1)]
    assert a == b


def test_the_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    logits = torch.tensor([[2.0, -2.0, 1.0]])
    out = penalised(logits, torch.tensor([[0, 1, 1]]), 2.0)
    assert torch.equal(out, torch.tensor([[1.0, -4.0, 1.0]]))


@pytest.mark.slow
def test_sampling_processors_agree_with_transformers():
    transformers_or_skip()
    from transformers.generation.logits_process import (
        RepetitionPenaltyLogitsProcessor,
        TopPLogitsWarper,
    )
    torch.manual_seed(0)
    logits, ys = torch.randn(3, 50) * 3, torch.randint(0, 50, (3, 7))
    assert_close(penalised(logits, ys, 1.3),
                 RepetitionPenaltyLogitsProcessor(1.3)(ys, logits.clone()))
    theirs = TopPLogitsWarper(0.8)(ys, logits.clone()).isinf()
    for row in range(3):
        seen = {int(next_token(logits[row:row + 1], 1.0, None,
                               torch.Generator().manual_seed(s), 0.8)) for s in range(400)}
        assert seen <= set((~theirs[row]).nonzero().flatten().tolist())


@pytest.mark.slow
def test_generation_stops_at_the_folders_end_tokens_and_samples_reproducibly(folders):
    gpt = TransformerGPT.from_huggingface(folders["llama (grouped-query, tied)"])
    assert gpt.vocab.end_ids == (gpt.vocab.hf.token_to_id("<|end_of_text|>"),
                                 gpt.vocab.hf.token_to_id("<|eot_id|>"))
    end = gpt.vocab.end_ids[1]
    stops = []
    out = generate(gpt, torch.tensor([gpt.encode("the")]), 30, end_ids=(end,),
                   on_token=lambda t: stops.append(int(t)))
    assert stops and out.size(1) == 2 + len(stops)
    a = gpt.generate("the quick", temperature=0.9, top_p=0.9, seed=3, max_new_tokens=20)
    b = gpt.generate("the quick", temperature=0.9, top_p=0.9, seed=3, max_new_tokens=20)
    assert a == b and isinstance(a[0], str)


@pytest.mark.slow
def test_the_chat_template_is_rendered_as_transformers_renders_it(folders):
    for name in ("llama (grouped-query, tied)", "qwen2"):
        _, tokenizer = reference(folders[name])
        gpt = TransformerGPT.from_huggingface(folders[name])
        messages = [{"role": "system", "content": "be brief"},
                    {"role": "user", "content": "  the quick fox?  "}]
        text, ids = gpt.vocab.chat(messages)
        assert text == tokenizer.apply_chat_template(messages, tokenize=False,
                                                     add_generation_prompt=True)
        assert ids == tokenizer(text, add_special_tokens=False).input_ids


class Head(TransformerGPT.AttentionHead):
    """A student's head of her own code (no call to the parent's forward)."""

    def forward(self, x, mask=None, memory=None):
        Q, K, V = self.WQ(x), self.WK(x), self.WV(x)
        if self.rotary is not None:
            Q, K = self.rotary(Q), self.rotary(K)
        scores = Q @ K.transpose(-2, -1) / self.qkv_size ** 0.5 * self.scale
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        return scores.softmax(-1) @ V


class StudentGPT(TransformerGPT):
    class AttentionHead(Head):
        scale = 1.0


class WrongGPT(TransformerGPT):
    class AttentionHead(Head):
        scale = 2.0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2 (tokenizer.json)", "llama (grouped-query, tied)"])
def test_a_students_head_runs_inside_a_real_model(folders, name):
    model, _ = reference(folders[name])
    ids = torch.arange(5, 45).view(1, -1)
    expected = model(ids).logits.detach()
    right = StudentGPT.from_huggingface(folders[name])
    heads = right.master_decoder.basic_decoder_arr[0].self_attention.heads
    assert all(type(h) is StudentGPT.AttentionHead for h in heads)
    assert_close(right(ids), expected)
    wrong = WrongGPT.from_huggingface(folders[name])
    assert (wrong(ids) - expected).abs().max() > 1e-2


@pytest.mark.slow
def test_bf16_on_request(folders):
    gpt = TransformerGPT.from_huggingface(folders["qwen2"], dtype=torch.bfloat16)
    assert {p.dtype for p in gpt.parameters()} == {torch.bfloat16}
    fp32 = TransformerGPT.from_huggingface(folders["qwen2"])
    ids = torch.tensor([fp32.encode("the quick brown fox")])
    assert_close(gpt(ids).float(), fp32(ids), rel=1 / 16)     # bf16's rounding through 2 layers


def llama_shaped_gpt(tmp_path, steps=3, **changes):
    """A GPT trained a few steps with the Llama switches."""
    settings = dict(norm="rmsnorm", positions="rope", feed_forward="swiglu",
                    full_width_heads=True, output_bias=False, kv_heads=2, num_atten_heads=4,
                    embedding_size=32, num_basic_decoders=2, vocab_size=300,
                    archive_text=True)
    settings.update(changes)
    dls = DLStudio(use_gpu=False, seed=0, epochs=1, batch_size=8)
    text = ["la casa es roja", "el perro come la manzana", "yo no sé nada",
            "¿dónde está el café?", "Ella canta muy bien"] * 8
    gpt = TransformerGPT(dl_studio=dls, sentences=text, checkpoint_freq=1, **settings)
    gpt.run_code_for_training(checkpoints_dir=str(tmp_path / "ck"), max_steps=steps)
    return gpt.eval()


def test_a_gpt_that_is_not_llama_shaped_is_refused_with_every_reason(tmp_path):
    gpt = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0),
                         sentences=["la casa es roja", "el perro come"] * 5, tokenizer="word",
                         embedding_size=16, num_basic_decoders=1, num_atten_heads=2,
                         layout="FG")
    out = tmp_path / "out"
    with pytest.raises(FolderError) as e:
        hub.write_folder(gpt, str(out))
    for name in ("post-LN", "norm 'layernorm'", "positions 'sinusoidal'",
                 "feed_forward 'relu'", "sliced heads", "output layer", "word-level"):
        assert name in str(e.value), name
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True])
def test_our_gpt_written_as_a_llama_folder_loads_in_transformers(tmp_path, tied):
    transformers_or_skip()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    gpt = llama_shaped_gpt(tmp_path, tie_embeddings=tied)
    out = hub.write_folder(gpt, str(tmp_path / "llama"))
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    for text in ("la casa es roja", "el   perro\ncome", "", "Dónde ESTÁ", "Dońde"):
        assert tokenizer(text).input_ids == gpt.encode(text), text
    ids = torch.tensor([gpt.encode("el perro come la casa roja y yo no sé nada")])
    assert_close(model(ids).logits, gpt(ids))
    back = TransformerGPT.from_huggingface(out)           # and read back into ours
    assert_close(back(ids), gpt(ids))


def test_loading_a_folder_that_is_not_one_says_what_is_missing(tmp_path):
    with pytest.raises(FolderError, match="no config.json"):
        TransformerGPT.from_huggingface(str(tmp_path))
    with pytest.raises(FolderError, match="is not a folder"):
        TransformerGPT.from_huggingface(str(tmp_path / "nothing"))


def test_encode_and_decode_on_a_trained_gpt():
    gpt = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0),
                         sentences=["la casa es roja", "el perro come"] * 5, tokenizer="bpe",
                         vocab_size=300, embedding_size=16, num_basic_decoders=1,
                         num_atten_heads=2)
    ids = gpt.encode("el perro   come")
    assert ids[0] == 0 and gpt.decode(ids + [1, 5, 6]) == "el perro come"


def run_script(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=os.path.join(ROOT, "ExamplesTransformers"))


@pytest.mark.slow
def test_interact_with_prompts_takes_a_folder(folders):
    folder = folders["qwen2"]
    r = run_script("interact_with_prompts.py", folder, "the quick", "--temperature", "0",
                   "--max-new-tokens", "12")
    assert r.returncode == 0, r.stderr
    gpt = TransformerGPT.from_huggingface(folder)
    assert gpt.generate("the quick", temperature=0, max_new_tokens=12)[0] in r.stdout
    r = subprocess.run([sys.executable, "interact_with_prompts.py", folder, "--chat",
                        "--max-new-tokens", "5", "--temperature", "0"], input="hello\nagain\n",
                       capture_output=True, text=True, timeout=300,
                       cwd=os.path.join(ROOT, "ExamplesTransformers"),
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0 and r.stdout.count("assistant>") == 2, r.stdout + r.stderr


def test_save_to_huggingface_refuses_by_name_without_a_traceback(tmp_path):
    gpt = TransformerGPT(dl_studio=DLStudio(use_gpu=False, seed=0, epochs=1, batch_size=8),
                         sentences=["la casa es roja", "el perro come"] * 5,
                         embedding_size=16, num_basic_decoders=1, num_atten_heads=2,
                         vocab_size=300, checkpoint_freq=1)
    gpt.run_code_for_training(checkpoints_dir=str(tmp_path / "ck"), max_steps=1)
    r = run_script("save_to_huggingface.py", str(tmp_path / "ck"), str(tmp_path / "out"))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "--no-output-bias" in r.stderr and "--norm rmsnorm" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_save_to_huggingface_writes_a_folder(tmp_path):
    transformers_or_skip()
    llama_shaped_gpt(tmp_path, steps=2)
    r = run_script("save_to_huggingface.py", str(tmp_path / "ck"), str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "model.safetensors").exists()


def test_the_explorer_reads_a_folder(tmp_path, capsys):
    from DLStudio.cli.explore import explore_main
    gpt = llama_shaped_gpt(tmp_path, steps=1)
    folder = hub.write_folder(gpt, str(tmp_path / "folder"))
    page = tmp_path / "page.html"
    assert explore_main([folder, "la casa", "el perro", "--out", str(page),
                         "--new-tokens", "4"]) == 0
    text = page.read_text(encoding="utf-8")
    assert "a real model" in text and '"kind": "gpt"' in text.replace('":"', '": "')
    assert page.stat().st_size < 2_000_000


def test_check_inside_runs_a_students_part_in_a_real_model(tmp_path, capsys):
    from DLStudio.cli.exercises import check_main
    folder = hub.write_folder(llama_shaped_gpt(tmp_path, steps=1), str(tmp_path / "folder"))
    solutions = os.path.join(ROOT, "tests", "exercise_solutions")
    assert check_main(["rope", os.path.join(solutions, "rope.py"), "--inside", folder]) == 0
    out = capsys.readouterr().out
    assert "inside" in out and "within 1e-4" in out and "the same" in out
    head = os.path.join(solutions, "attention_head.py")
    assert check_main(["attention_head", head, "--inside", folder]) == 1
    assert "rotary" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name, family", [("qk_norm", "qwen3 (head_dim 24, tied)"),
                                          ("sliding_window", "mistral (a window of 6)")])
def test_the_exercises_since_2023_run_inside_a_folder_of_their_family(folders, name, family,
                                                                       capsys):
    from DLStudio.cli.exercises import check_main
    path = os.path.join(ROOT, "tests", "exercise_solutions", f"{name}.py")
    assert check_main([name, path, "--inside", folders[family]]) == 0
    out = capsys.readouterr().out
    assert "within 1e-4" in out and "20 greedy tokens the same" in out


def test_a_folder_that_is_not_safetensors_is_refused_in_words(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(FolderError, match="not a safetensors file"):
        hub.hf_weights(str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2 (tokenizer.json)", "mistral (a window of 6)",
                                  "gemma3 (8 layers, 5:1 windows)", "olmo2",
                                  "smollm3 (a layer without rotary positions)"])
def test_a_batch_of_prompts_of_different_lengths_gives_each_prompts_tokens(folders, name):
    """Left padding with each row's own positions (learned, rotary, windows, NoPE layers):
    every row's 20 greedy tokens are those of its prompt alone."""
    gpt = TransformerGPT.from_huggingface(folders[name])
    prompts = ["the quick brown fox jumps", "la", "naïve café résumé — déjà vu and more",
               "numbers 12345"]
    alone = [gpt.generate(p, max_new_tokens=20, temperature=0) for p in prompts]
    assert gpt.generate(prompts, max_new_tokens=20, temperature=0) == [a[0] for a in alone]
