"""Small random model folders made by transformers itself (save_pretrained), with byte-level
BPE tokenizers trained by the tokenizers library: what tests/test_real_models.py reads into
our classes and compares with transformers, no download needed."""

import json
import os

CORPUS = ["the quick brown fox jumps over the lazy dog", "la casa es roja y el perro come",
          "I can't believe it's 2026!", "naïve café résumé — déjà vu", "emoji 🙂🚀 and more",
          "numbers 12345 67 8.9", "tabs\tand\nnewlines   and    spaces",
          "don't won't shouldn't they're", "supercalifragilisticexpialidocious"] * 20

#: Texts the ids must match on: Unicode, emoji, runs of spaces and newlines, numbers,
#: contractions, an empty string, a very long word.
VARIED = ["Hello world", "", " ", "  leading and trailing  ", "a\n\nb\n", "tabs\tand\t\ttabs",
          "I'm sure they'd've done it", "1234567890 3.14159 -42", "naïve café, déjà vu — ok?",
          "emoji 🙂🚀👩‍👩‍👧", "日本語のテキスト", "Ελληνικά κείμενα", "x" * 300,
          "supercalifragilisticexpialidocious" * 3, "<|endoftext|> inside", "MiXeD CaSe"]


def byte_level_bpe(vocab_size=400, specials=("<|endoftext|>",), specials_last=False):
    """A byte-level BPE trained on CORPUS (GPT-2's pipeline); its special tokens first (ids
    0, 1, ...), or after every piece (``specials_last``, as Llama 3 and Qwen2 lay them)."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size,
                                  special_tokens=[] if specials_last else list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    if specials_last:
        tok.add_special_tokens([AddedToken(t, special=True) for t in specials])
    return tok


def _weights_large(model, std):
    import torch
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, std)
            elif ("norm" in name or "ln_" in name) and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0, std)
    return model


def gpt2_folder(path, slow_tokenizer=True, std=0.3):
    """A GPT2LMHeadModel (learned positions, LayerNorm, gelu_new, tied output) with GPT-2's
    vocab.json + merges.txt (``slow_tokenizer``) or a tokenizer.json."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
    tok = byte_level_bpe()
    eos = tok.token_to_id("<|endoftext|>")
    config = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=128, n_embd=64, n_layer=2,
                        n_head=4, bos_token_id=eos, eos_token_id=eos)
    torch.manual_seed(0)
    _weights_large(GPT2LMHeadModel(config), std).eval().save_pretrained(path)
    if slow_tokenizer:
        tok.model.save(path)                           # vocab.json, merges.txt
        with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>",
                       "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
                       "add_bos_token": False, "model_max_length": 128}, f)
    else:
        PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                eos_token="<|endoftext|>").save_pretrained(path)
    return path


def llama_tokenizer(path, bos="<|begin_of_text|>", eos="<|end_of_text|>", chat=None):
    """A tokenizer.json whose post-processor puts the start token in front (Llama 3's)."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast
    tok = byte_level_bpe(specials=(bos, eos, "<|eot_id|>"))
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                      special_tokens=[(bos, tok.token_to_id(bos))])])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos)
    if chat:
        fast.chat_template = chat
    fast.save_pretrained(path)
    return tok


QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
              r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
             "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def qwen_tokenizer(path):
    """Qwen2's pipeline: NFC, its own split (each digit alone), byte-level BPE, no start
    token; <|endoftext|>, <|im_start|>, <|im_end|> special."""
    from tokenizers import Regex, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    tok = byte_level_bpe(specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = QWEN_CHAT
    fast.save_pretrained(path)
    return tok


CHAT = ("{% for m in messages %}<|start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|eot_id|>"
        "{% endfor %}{% if add_generation_prompt %}<|start|>assistant\n{% endif %}")


#: What each Llama-shaped family's folder sets beyond Llama's: Qwen3's head width of its own
#: (24, not 64 / 4) with QK-norm, Mistral's window (6: shorter than a prompt and its
#: continuation), SmolLM3's third layer without rotary positions; Gemma 3's eight layers
#: (past its five sliding layers to one full), a width of 48 (sqrt(48) is not exact, nor in
#: bf16), query_pre_attn_scalar 20 (not head_dim's 24), a window of 6.
FAMILY_CHANGES = {"qwen3": {"head_dim": 24},
                  "mistral": {"sliding_window": 6},
                  "smollm3": {"num_hidden_layers": 3, "no_rope_layers": [1, 1, 0],
                              "pad_token_id": None},
                  "gemma3": {"hidden_size": 48, "head_dim": 24, "num_hidden_layers": 8,
                             "query_pre_attn_scalar": 20, "sliding_window": 6,
                             "hidden_activation": "gelu_pytorch_tanh", "pad_token_id": None},
                  "olmo2": {"pad_token_id": None}}


def llama_folder(path, kind="llama", std=0.3, **changes):
    """A LlamaForCausalLM (or ``kind`` "qwen2", "qwen3", "mistral", "smollm3", "gemma3",
    "olmo2": that family's model) of small random weights; ``changes``: config fields
    (num_key_value_heads, head_dim, rope_scaling, ...)."""
    import torch
    import transformers
    qwen = kind in ("qwen2", "qwen3")
    tok = qwen_tokenizer(path) if qwen else llama_tokenizer(path, chat=CHAT)
    name = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3", "mistral": "Mistral",
            "smollm3": "SmolLM3", "gemma3": "Gemma3", "olmo2": "Olmo2"}[kind]
    Config, Model = (getattr(transformers, f"{name}TextConfig" if kind == "gemma3" else
                             f"{name}Config"), getattr(transformers, f"{name}ForCausalLM"))
    settings = dict(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    max_position_embeddings=256, rms_norm_eps=1e-6,
                    bos_token_id=tok.token_to_id("<|begin_of_text|>"),
                    eos_token_id=tok.token_to_id("<|end_of_text|>"), tie_word_embeddings=True)
    if qwen:
        settings.update(bos_token_id=None, eos_token_id=tok.token_to_id("<|im_end|>"))
    settings.update(FAMILY_CHANGES.get(kind, {}))
    settings.update(changes)
    torch.manual_seed(0)
    model = _weights_large(Model(Config(**settings)), std).eval()
    model.save_pretrained(path)
    eot = tok.token_to_id("<|endoftext|>" if qwen else "<|eot_id|>")
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": settings["bos_token_id"],
                   "eos_token_id": [settings["eos_token_id"], eot]}, f)
    return path


def unusual_llama_folder(path, std=0.3):
    """A Llama folder unlike our own defaults: its special tokens after every piece (ids
    0 and 1 are ordinary pieces), a start token but no end token anywhere (config.json nor
    generation_config.json), a tokenizer.json with truncation and padding blocks (which
    transformers does not apply unless asked), a context of 1,024 positions. The output
    row of id 1 is made the likeliest wherever the piece it copies would be, so that a
    greedy continuation meets id 1 (where the lecture's EOS would have stopped it)."""
    import torch
    from tokenizers import processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    bos = "<|begin_of_text|>"
    tok = byte_level_bpe(specials=(bos, "<|pad|>"), specials_last=True)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                      special_tokens=[(bos, tok.token_to_id(bos))])])
    tok.enable_truncation(max_length=8)
    tok.enable_padding(length=48, pad_id=tok.token_to_id("<|pad|>"), pad_token="<|pad|>")
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos).save_pretrained(path)
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=1024, bos_token_id=tok.token_to_id(bos),
                         eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = _weights_large(LlamaForCausalLM(config), std).eval()
    tok.no_truncation()
    tok.no_padding()
    prompt = torch.tensor([tok.encode("the quick brown").ids])
    with torch.no_grad():
        seen = model.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None,
                              pad_token_id=0)[0, prompt.size(1) + 3:].tolist()
        copied = next(i for i in seen if i > 1)
        head = model.lm_head.weight
        head[1] = head[copied] * 1.05
    model.generation_config.eos_token_id = None
    model.save_pretrained(path)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config.bos_token_id}, f)
    return path


def sentencepiece_llama_folder(path, std=0.3, **changes):
    """A Llama folder with SentencePiece's kind of tokenizer, as TinyLlama ships one
    (`sentencepiece_tokenizer`)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    tok = sentencepiece_tokenizer(path, **changes)
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    _weights_large(LlamaForCausalLM(config), std).eval().save_pretrained(path)
    return path


def sentencepiece_tokenizer(path, **changes):
    """SentencePiece's kind of tokenizer, written with the tokenizers library alone:
    <unk>, <s>, </s> at ids 0, 1, 2, the 256 byte pieces (<0x00> ...) as fallback for any
    character it lacks, "▁" for a space, and LlamaTokenizer as its class in
    tokenizer_config.json (``changes``: more of its settings, legacy, add_prefix_space)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, processors, trainers
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials, show_progress=False,
        initial_alphabet=list("\u2581abcdefghijklmnopqrstuvwxyz")))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True,
                   "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "legacy": False, "model_max_length": 2048,
                   "clean_up_tokenization_spaces": False, **changes}, f)
    return tok
