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


def byte_level_bpe(vocab_size=400, specials=("<|endoftext|>",)):
    """A byte-level BPE trained on CORPUS (GPT-2's pipeline)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
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


def llama_folder(path, kind="llama", std=0.3, **changes):
    """A LlamaForCausalLM (or ``kind="qwen2"``: Qwen2ForCausalLM) of small random weights;
    ``changes``: config fields (num_key_value_heads, head_dim, rope_scaling, ...)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    tok = qwen_tokenizer(path) if kind == "qwen2" else llama_tokenizer(path, chat=CHAT)
    Config, Model = (Qwen2Config, Qwen2ForCausalLM) if kind == "qwen2" else \
        (LlamaConfig, LlamaForCausalLM)
    settings = dict(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    max_position_embeddings=256, rms_norm_eps=1e-6,
                    bos_token_id=tok.token_to_id("<|begin_of_text|>"),
                    eos_token_id=tok.token_to_id("<|end_of_text|>"), tie_word_embeddings=True)
    if kind == "qwen2":
        settings.update(bos_token_id=None, eos_token_id=tok.token_to_id("<|im_end|>"))
    settings.update(changes)
    torch.manual_seed(0)
    model = _weights_large(Model(Config(**settings)), std).eval()
    model.save_pretrained(path)
    eot = tok.token_to_id("<|endoftext|>" if kind == "qwen2" else "<|eot_id|>")
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": settings["bos_token_id"],
                   "eos_token_id": [settings["eos_token_id"], eot]}, f)
    return path
