"""A real model's folder on its own terms: start and end tokens where its files put them
(never the lecture's SOS and EOS at ids 0 and 1), no end token at all, perplexity and loss as
transformers computes them, a SentencePiece-style Llama tokenizer, truncation and padding
blocks, rotary frequencies and llama3 scaling as transformers computes them, and
generation's defaults. The folders are made unlike our own defaults on purpose
(tests/hub_folders.py); the comparisons with transformers need the ``parity`` extra."""

import json
import math
import os
import warnings

import pytest
import torch

from DLStudio.containers import hub
from DLStudio.data.hub_tokenizer import HubTokenizer
from DLStudio.evaluation.generation import FOLDER_NEW_TOKENS, folder_perplexity, generate
from DLStudio.model.since_2017 import RotaryEmbedding
from DLStudio.Transformers import TransformerGPT
from tests.hub_folders import VARIED, gpt2_folder, sentencepiece_llama_folder, unusual_llama_folder
from tests.test_real_models import LLAMA3_SCALING, llama_shaped_gpt, transformers_or_skip

from .close import assert_close

TEXTS = ["the quick brown fox jumps over the lazy dog", "la casa es roja",
         "  tabs\tand  spaces \n kept as written", "numbers 12345 67 8.9"]


def rewrite(folder, name, **fields):
    """Set (value None: remove) fields of a folder's JSON file."""
    file = os.path.join(folder, name)
    data = json.load(open(file)) if os.path.exists(file) else {}
    for key, value in fields.items():
        data.pop(key, None) if value is None else data.__setitem__(key, value)
    with open(file, "w") as f:
        json.dump(data, f)


# Without transformers: a folder written by our own writer, then changed. ---------------------

@pytest.fixture(scope="module")
def own_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("own")
    return hub.write_folder(llama_shaped_gpt(tmp, steps=1), str(tmp / "folder"))


def copy_of(folder, tmp_path, **generation):
    """A copy of ``folder`` of 256 positions (rotary: no table to grow), its start and end
    tokens set in both config files as ``generation`` says."""
    import shutil
    copy = str(tmp_path / "copy")
    shutil.copytree(folder, copy)
    rewrite(copy, "config.json", max_position_embeddings=256)
    for name in ("config.json", "generation_config.json"):
        rewrite(copy, name, **generation)
    return copy


def test_a_folder_without_an_end_token_generates_to_max_new_tokens(own_folder, tmp_path):
    gpt = TransformerGPT.from_huggingface(copy_of(own_folder, tmp_path, eos_token_id=None))
    assert gpt.vocab.end_ids == ()
    prompt = torch.tensor([gpt.encode("la casa")])
    ids = generate(gpt, prompt, 30, end_ids=gpt.vocab.end_ids)
    assert ids.size(1) == prompt.size(1) + 30              # id 1 is an ordinary piece here
    with torch.no_grad():                                   # and the model's own choice
        forced = gpt.master_decoder.out.weight
        forced[1] = forced[int(ids[0, -1])] * 1.05 + 1.0
    ids = generate(gpt, prompt, 30, end_ids=gpt.vocab.end_ids)
    assert 1 in ids[0, prompt.size(1):].tolist() and ids.size(1) == prompt.size(1) + 30
    text = gpt.generate("la casa", temperature=0, max_new_tokens=30)[0]
    assert text == gpt.vocab.decode(ids[0, prompt.size(1):])


def test_start_and_end_tokens_outside_the_vocabulary_are_not_used(own_folder, tmp_path):
    size = json.load(open(os.path.join(own_folder, "config.json")))["vocab_size"]
    folder = copy_of(own_folder, tmp_path, bos_token_id=size + 50, eos_token_id=[size + 3, 2])
    rewrite(folder, "tokenizer.json", post_processor=None)       # no start token added
    rewrite(folder, "tokenizer.json", post_processor={"type": "ByteLevel", "add_prefix_space":
                                                      False, "trim_offsets": False})
    gpt = TransformerGPT.from_huggingface(folder)
    assert gpt.encode("") == []
    assert gpt.vocab.start_id is None and gpt.vocab.end_ids == (2,)
    with pytest.raises(ValueError, match="names no start token"):
        gpt.generate("")
    rewrite(folder, "generation_config.json", bos_token_id=7, eos_token_id=None)
    gpt = TransformerGPT.from_huggingface(folder)            # generation_config.json first,
    assert gpt.vocab.start_id == 7 and gpt.vocab.end_ids == (2,)   # else config.json's
    out = generate(gpt, torch.tensor([[7]]), 3, end_ids=(-1,))
    assert gpt.generate("", temperature=0, max_new_tokens=3)[0] == gpt.vocab.decode(out[0, 1:])


def test_the_writer_keeps_a_folders_own_start_and_end_tokens(own_folder, tmp_path):
    folder = copy_of(own_folder, tmp_path, eos_token_id=None, bos_token_id=5)
    again = hub.write_folder(TransformerGPT.from_huggingface(folder), str(tmp_path / "again"))
    config = json.load(open(os.path.join(again, "config.json")))
    assert config["bos_token_id"] == 5 and config["eos_token_id"] is None
    ours = json.load(open(os.path.join(own_folder, "config.json")))
    assert (ours["bos_token_id"], ours["eos_token_id"]) == (0, 1)     # our SOS and EOS


def test_generation_defaults_of_a_folder(own_folder, tmp_path):
    folder = copy_of(own_folder, tmp_path, eos_token_id=None)
    rewrite(folder, "config.json", max_position_embeddings=4096)
    gpt = TransformerGPT.from_huggingface(folder)
    assert gpt.max_seq_length == 4096
    counted = []
    gpt.generate("la", temperature=0, on_token=counted.append)
    assert len(counted) == FOLDER_NEW_TOKENS                 # not 4,096 - 2
    rewrite(folder, "generation_config.json", max_length=9, no_repeat_ngram_size=3)
    gpt = TransformerGPT.from_huggingface(folder)
    counted.clear()
    gpt.generate("la", temperature=0, on_token=counted.append)
    assert len(counted) == 9 - len(gpt.encode("la"))
    from DLStudio.evaluation.generation import not_applied
    assert not_applied(gpt) == ["no_repeat_ngram_size 3"]
    with pytest.warns(UserWarning, match="top_k 5 ignored"):
        gpt.generate("la", temperature=0, top_k=5, max_new_tokens=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpt.generate("la", temperature=0, max_new_tokens=2)
        gpt.generate("la", temperature=0.5, top_k=5, max_new_tokens=2, seed=0)


def test_a_folders_perplexity_scores_its_own_ids_as_written(own_folder):
    gpt = TransformerGPT.from_huggingface(own_folder)
    one = folder_perplexity(gpt, ["la casa  es\troja"])
    ids = torch.tensor([gpt.encode("la casa  es\troja")])
    with torch.no_grad():
        logp = gpt(ids[:, :-1]).log_softmax(-1)[0, torch.arange(ids.size(1) - 1), ids[0, 1:]]
    assert one["pieces"] == ids.size(1) - 1
    assert math.isclose(one["per_piece"], math.exp(-logp.mean().item()), rel_tol=1e-5)
    both = folder_perplexity(gpt, ["la casa  es\troja", "el perro"], batch_size=2)
    alone = folder_perplexity(gpt, ["el perro"])
    total = math.log(one["per_piece"]) * one["pieces"] + \
        math.log(alone["per_piece"]) * alone["pieces"]
    assert math.isclose(both["per_piece"], math.exp(total / both["pieces"]), rel_tol=1e-5)
    assert gpt.perplexity(["la casa  es\troja"])["per_piece"] == one["per_piece"]


def test_a_sentencepiece_llama_tokenizer_is_read_as_transformers_llama_tokenizer(tmp_path):
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer
    transformers_or_skip()
    folder = sentencepiece_llama_folder(str(tmp_path / "sp"))
    from transformers import AutoTokenizer
    for changes in ({}, {"legacy": True}, {"add_prefix_space": False}):
        rewrite(folder, "tokenizer_config.json", **changes)
        theirs = AutoTokenizer.from_pretrained(folder)
        ours = HubTokenizer.from_folder(folder)
        for text in VARIED + [" Hello", "a  b", "\n x"]:
            assert ours.encode(text) == theirs(text).input_ids, (changes, text)
            assert ours.decode(ours.encode(text)) == theirs.decode(theirs(text).input_ids,
                                                                   skip_special_tokens=True)
    raw = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    assert raw.encode(" Hello").ids != ours.encode(" Hello")       # the file alone differs


# With transformers: the same figures as transformers. ---------------------------------------

@pytest.fixture(scope="module")
def unusual(tmp_path_factory):
    transformers_or_skip()
    return unusual_llama_folder(str(tmp_path_factory.mktemp("unusual")))


def reference(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    return (AutoModelForCausalLM.from_pretrained(path).eval(),
            AutoTokenizer.from_pretrained(path))


@pytest.mark.slow
def test_special_tokens_at_the_end_no_end_token_and_blocks_read_as_transformers(unusual):
    model, tokenizer = reference(unusual)
    gpt = TransformerGPT.from_huggingface(unusual)
    assert gpt.vocab.end_ids == () and gpt.vocab.start_id == gpt.vocab.size - 2
    for text in VARIED:                          # truncation (8) and padding (48) not applied
        assert gpt.encode(text) == tokenizer(text).input_ids, text
    prompt = torch.tensor([gpt.encode("the quick brown")])
    expected = model.generate(prompt, max_new_tokens=40, do_sample=False,
                              attention_mask=torch.ones_like(prompt))
    assert expected.size(1) == prompt.size(1) + 40 and 1 in expected[0, prompt.size(1):]
    got = gpt.generate("the quick brown", temperature=0, max_new_tokens=40)[0]
    assert got == tokenizer.decode(expected[0, prompt.size(1):], skip_special_tokens=True)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["unusual llama", "gpt2", "sentencepiece llama"])
def test_a_folders_perplexity_is_transformers_exp_loss(unusual, tmp_path, kind):
    folder = {"unusual llama": lambda: unusual,
              "gpt2": lambda: gpt2_folder(str(tmp_path / "g"), slow_tokenizer=False),
              "sentencepiece llama": lambda: sentencepiece_llama_folder(str(tmp_path / "s"))
              }[kind]()
    model, tokenizer = reference(folder)
    gpt = TransformerGPT.from_huggingface(folder)
    losses = []
    with torch.no_grad():
        for text in TEXTS:
            ids = torch.tensor([tokenizer(text).input_ids])
            losses.append((model(ids, labels=ids).loss.item(), ids.size(1) - 1))
    one = folder_perplexity(gpt, TEXTS[:1])
    assert math.isclose(one["per_piece"], math.exp(losses[0][0]), rel_tol=1e-4)
    several = folder_perplexity(gpt, TEXTS, batch_size=3)            # padded, two batches
    weighted = sum(loss * n for loss, n in losses) / sum(n for _, n in losses)
    assert math.isclose(several["per_piece"], math.exp(weighted), rel_tol=1e-4)
    assert several["pieces"] == sum(n for _, n in losses)


@pytest.mark.slow
def test_a_sentencepiece_llama_folder_is_transformers_token_for_token(tmp_path):
    transformers_or_skip()
    folder = sentencepiece_llama_folder(str(tmp_path / "sp"))
    model, tokenizer = reference(folder)
    gpt = TransformerGPT.from_huggingface(folder)
    ids = torch.tensor([gpt.encode(" ".join(VARIED[:9]))[:100]])
    with torch.no_grad():
        assert_close(gpt(ids), model(ids).logits)
    prompt = torch.tensor([gpt.encode("the quick")])
    expected = model.generate(prompt, max_new_tokens=30, do_sample=False,
                              attention_mask=torch.ones_like(prompt))
    got = gpt.generate("the quick", temperature=0, max_new_tokens=30)[0]
    # the prompt and its continuation read as transformers decodes the whole: "the quick
    # brown", never "the quickbrown" (a continuation decoded alone loses its first space)
    assert "the quick" + got == tokenizer.decode(expected[0], skip_special_tokens=True)


def test_a_continuation_keeps_the_space_before_its_first_word(tmp_path):
    """SentencePiece's decoder strips the space in front of a text: "▁brown ▁fox" decoded
    alone is "brown fox". A continuation is what it adds to its prompt's text."""
    from DLStudio.evaluation.generation import continuation
    from tests.hub_folders import sentencepiece_tokenizer
    path = str(tmp_path / "sp")
    sentencepiece_tokenizer(path)
    vocab = HubTokenizer.from_folder(path, {"vocab_size": 600})
    prompt = vocab.encode("numbers 12345")
    new = [i for i in vocab.encode("the quick brown fox")
           if vocab.hf.id_to_token(i).startswith("\u2581")][:1]     # a piece: "▁the..."
    whole = prompt + new
    assert not vocab.decode(new).startswith(" ")          # decoded alone: its space is gone
    added = continuation(vocab, prompt, new)
    assert added.startswith(" ") and vocab.decode(prompt) + added == vocab.decode(whole)


def byte_level_folder_named_llama(path):
    """A byte-level tokenizer.json (Llama 3's layout) whose tokenizer_config.json names
    LlamaTokenizerFast, as many hub folders do: written with the tokenizers library alone."""
    from tests.hub_folders import byte_level_bpe
    os.makedirs(path, exist_ok=True)
    tok = byte_level_bpe(specials=("<|begin_of_text|>", "<|end_of_text|>"))
    tok.save(os.path.join(path, "tokenizer.json"))
    rewrite(path, "tokenizer_config.json", tokenizer_class="LlamaTokenizerFast",
            bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>")
    return path, tok


def test_a_byte_level_tokenizer_named_llama_keeps_its_byte_level_steps(tmp_path):
    """transformers 5 reads a byte-level tokenizer.json as it is, whatever class the folder
    names: the same ids as the tokenizers library's, and text without "Ġ"."""
    path, tok = byte_level_folder_named_llama(str(tmp_path / "b"))
    ours = HubTokenizer.from_folder(path, {"vocab_size": tok.get_vocab_size()})
    for text in VARIED:
        assert ours.encode(text) == tok.encode(text).ids, text
        assert "\u0120" not in ours.decode(ours.encode(text))
    assert ours.decode(ours.encode("the quick brown fox")) == "the quick brown fox"


@pytest.mark.slow
def test_a_byte_level_tokenizer_named_llama_is_transformers(tmp_path):
    transformers_or_skip()
    from transformers import AutoTokenizer
    path, _ = byte_level_folder_named_llama(str(tmp_path / "b"))
    theirs = AutoTokenizer.from_pretrained(path)
    ours = HubTokenizer.from_folder(path, {"vocab_size": theirs.vocab_size})
    for text in VARIED:
        assert ours.encode(text) == theirs(text).input_ids, text
        assert ours.decode(ours.encode(text)) == theirs.decode(theirs(text).input_ids,
                                                               skip_special_tokens=True)


@pytest.mark.slow
@pytest.mark.parametrize("scaling", [None, "llama3", "llama3 without its original length"])
def test_rotary_frequencies_are_transformers_to_the_bit(scaling, tmp_path):
    transformers_or_skip()
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    rope = None if scaling is None else dict(LLAMA3_SCALING)
    if scaling and "without" in scaling:
        del rope["original_max_position_embeddings"]
    for base, head in ((10000.0, 64), (500000.0, 24), (1e6, 128)):
        fields = dict(hidden_size=4 * head, num_attention_heads=4, head_dim=head,
                      max_position_embeddings=48, rope_theta=base)
        if rope:
            fields["rope_scaling"] = dict(rope)
        theirs = LlamaRotaryEmbedding(LlamaConfig(**fields)).inv_freq
        config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1,
                  "intermediate_size": 8, "vocab_size": 10, **fields}
        settings = hub.settings_of(config)
        ours = RotaryEmbedding(head, settings["rope_base"], settings["rope_scaling"]).theta
        assert torch.equal(ours, theirs), (base, head)


#: A chat template that uses what real ones use: the date, tools and documents as JSON,
#: special tokens other than bos/eos, {% generation %} blocks, reasoning.
RICH_CHAT = (
    "{{ bos_token }}Today is {{ strftime_now('%d %B %Y') }}.\n"
    "{% if tools %}Tools: {% for t in tools %}{{ t | tojson }}\n{% endfor %}{% endif %}"
    "{% if documents %}{% for d in documents %}[{{ d.title }}] {{ d | tojson(indent=2) }}\n"
    "{% endfor %}{% endif %}"
    "{% for m in messages %}<|start|>{{ m['role'] }}\n"
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
    "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}{% endgeneration %}"
    "{% else %}{{ m['content'] }}{% endif %}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start|>assistant\n{% endif %}"
    "{{ pad_token }}{{ unk_token or '' }}")
TOOLS = [{"type": "function", "function": {"name": "météo", "description": "<b>weather</b> & more",
                                           "parameters": {"z": 1, "a": [1, 2]}}}]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["tools and documents", "continue", "reasoning"])
def test_chat_templates_render_as_transformers_renders_them(tmp_path, case):
    transformers_or_skip()
    from transformers import AutoTokenizer

    from tests.hub_folders import llama_folder
    folder = llama_folder(str(tmp_path / "chat"))
    rewrite(folder, "tokenizer_config.json", chat_template="{{ 'not read' }}",
            pad_token="<|eot_id|>", unk_token="<|end_of_text|>")
    with open(os.path.join(folder, "chat_template.jinja"), "w") as f:       # read first
        f.write(RICH_CHAT)
    theirs = AutoTokenizer.from_pretrained(folder)
    ours = TransformerGPT.from_huggingface(folder).vocab
    messages = [{"role": "user", "content": "¿Qué tiempo hace? <i>ahora</i>", "name": None},
                {"role": "assistant", "content": "Hace sol"}]
    options = {"tools and documents": dict(tools=TOOLS, documents=[
                   {"title": "Nota", "text": "«sol» & \"luz\""}], add_generation_prompt=True),
               "continue": dict(continue_final_message=True, add_generation_prompt=False),
               "reasoning": dict(add_generation_prompt=True)}[case]
    if case == "reasoning":
        messages[1]["thinking"] = "the user asks about the weather"
    text, ids = ours.chat(messages, **options)
    assert text == theirs.apply_chat_template(messages, tokenize=False, **options)
    assert ids == theirs(text, add_special_tokens=False).input_ids
    if case == "continue":
        assert text.endswith("Hace sol")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3", "mistral", "smollm3", "olmo2",
                                  "gemma3"])
def test_bf16_logits_are_transformers_within_two_ulps(tmp_path, kind):
    """transformers' bf16: RMSNorm normalises in fp32 and rounds before its weight (OLMo 2's
    and Gemma's after it), rotary positions turn in bf16 (OLMo 2's in fp32), and the
    attention is the fused kernel, on a CPU too; ours reads a folder the same way."""
    transformers_or_skip()
    from transformers import AutoModelForCausalLM

    from tests.hub_folders import llama_folder
    folder = llama_folder(str(tmp_path / kind), kind=kind)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).eval()
    gpt = TransformerGPT.from_huggingface(folder, dtype=torch.bfloat16)
    ids = torch.tensor([gpt.encode(" ".join(VARIED[:9]))[:197]])
    with torch.no_grad():
        theirs, ours = model(ids).logits.float(), gpt(ids).float()
    # an ulp of each position's logits: bf16's spacing at its largest one
    ulp = torch.finfo(torch.bfloat16).eps * theirs.abs().amax(-1, keepdim=True)
    assert ((ours - theirs).abs() <= 2 * ulp).all()                 # NaN fails this
    top2 = theirs.topk(2, -1).values
    clear = (top2[..., 0] - top2[..., 1]) > 2 * torch.finfo(torch.bfloat16).eps * \
        top2[..., 0].abs()
    assert clear.sum() >= ids.size(1) // 2
    assert torch.equal(ours.argmax(-1)[clear], theirs.argmax(-1)[clear])


def test_a_rotation_turned_in_fp32_rounds_once_in_bf16_and_changes_nothing_in_fp32():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 40, 16) * 4
    plain, fp32 = RotaryEmbedding(16), RotaryEmbedding(16)
    fp32.turn_in_fp32 = True
    assert torch.equal(fp32(x, 5), plain(x, 5))                     # fp32: bit for bit
    xb = x.bfloat16()
    once = plain(xb.float(), 5).bfloat16()          # the exact turn of the bf16 numbers, rounded
    assert torch.equal(fp32(xb, 5), once) and fp32(xb, 5).dtype == torch.bfloat16
    assert not torch.equal(plain(xb, 5), once)      # bf16's three roundings: another number


def test_rmsnorm_in_bf16_normalises_in_fp32_and_changes_nothing_in_fp32():
    torch.manual_seed(0)
    norm = TransformerGPT.RMSNorm(64, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 64) * 4
    before = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    assert torch.equal(norm(x), before)                          # fp32: bit for bit
    half = norm.to(torch.bfloat16)
    xb = x.bfloat16()
    xf = xb.float()
    expected = half.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)) \
        .bfloat16()
    assert torch.equal(half(xb), expected) and half(xb).dtype == torch.bfloat16
