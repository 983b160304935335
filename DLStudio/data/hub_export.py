"""Our tokenizer as a Hugging Face folder's tokenizer files (save_to_huggingface.py), so
that transformers' AutoTokenizer gives the ids ``gpt.encode`` gives: our byte-level BPE with
our start token added in front, and the normalisation a tokenizer.json can carry (blank
space collapsed; NFC and lower case for a model trained on an archive). What only ours
does (punctuation to spaces, expanding English contractions) is said in
docs/real_models.md: normalise such a text before tokenizing it."""

from .vocabulary import BPE_SPECIALS

__all__ = ["tokenizer_files"]


def tokenizer_files(gpt):
    """{"tokenizer.json": text, "tokenizer_config.json": dict} for ``gpt``'s tokenizer."""
    from tokenizers import Regex, Tokenizer, normalizers, processors
    vocab = gpt.vocab
    if vocab.kind == "hub":                     # a folder's own, as it came
        hf, start, end = Tokenizer.from_str(vocab.hf.to_str()), None, None
        names = vocab.special
    else:
        hf = Tokenizer.from_str(vocab.hf.to_str())
        steps = [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
        if gpt.archive_text:
            steps = [normalizers.NFC(), normalizers.Lowercase()] + steps
        hf.normalizer = normalizers.Sequence(steps)
        start, end = BPE_SPECIALS
        hf.post_processor = processors.TemplateProcessing(
            single=f"{start} $A", pair=f"{start} $A $B", special_tokens=[(start, 0)])
        names = {"bos_token": start, "eos_token": end}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length":
              gpt.max_seq_length, "clean_up_tokenization_spaces": False, **names}
    if getattr(vocab, "chat_template", None):
        config["chat_template"] = vocab.chat_template
    return {"tokenizer.json": hf.to_str(), "tokenizer_config.json": config}
