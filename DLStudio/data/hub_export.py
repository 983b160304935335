"""Our tokenizers as a Hugging Face folder's tokenizer files (save_to_huggingface.py), so
that transformers' AutoTokenizer gives the ids ours give: our byte-level BPE with our start
token added in front (and, for a translation side, our end token after), and the
normalisation a tokenizer.json can carry (blank space collapsed; NFC and lower case for a
model trained on an archive). What only ours does (punctuation to spaces, expanding
English contractions) is said in docs/real_models.md: normalise such a text before
tokenizing it."""

from .vocabulary import BPE_SPECIALS

__all__ = ["tokenizer_files", "translation_tokenizer_files"]


def _as_hf(bpe, archive_text, ends):
    """``bpe`` (a BPETokenizer) as a tokenizers.Tokenizer adding our start token, and our
    end token too when ``ends``."""
    from tokenizers import Regex, Tokenizer, normalizers, processors
    hf = Tokenizer.from_str(bpe.hf.to_str())
    steps = [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    if archive_text:
        steps = [normalizers.NFC(), normalizers.Lowercase()] + steps
    hf.normalizer = normalizers.Sequence(steps)
    start, end = BPE_SPECIALS
    if ends:
        hf.post_processor = processors.TemplateProcessing(
            single=f"{start} $A {end}", pair=f"{start} $A {end} $B {end}",
            special_tokens=[(start, 0), (end, 1)])
    else:
        hf.post_processor = processors.TemplateProcessing(
            single=f"{start} $A", pair=f"{start} $A $B", special_tokens=[(start, 0)])
    return hf


def _config(max_length, **names):
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
            "clean_up_tokenization_spaces": False, **names}


def tokenizer_files(gpt):
    """{"tokenizer.json": text, "tokenizer_config.json": dict} for ``gpt``'s tokenizer."""
    from tokenizers import Tokenizer
    vocab = gpt.vocab
    if vocab.kind == "hub":                     # a folder's own, as it came
        hf, names = Tokenizer.from_str(vocab.hf.to_str()), vocab.special
    else:
        hf = _as_hf(vocab, gpt.archive_text, ends=False)
        names = {"bos_token": BPE_SPECIALS[0], "eos_token": BPE_SPECIALS[1]}
    config = _config(gpt.max_seq_length, **names)
    if getattr(vocab, "chat_template", None):
        config["chat_template"] = vocab.chat_template
    return {"tokenizer.json": hf.to_str(), "tokenizer_config.json": config}


def translation_tokenizer_files(vocab):
    """A translator's BPE tokenizers (a ``Vocabulary`` of two BPE sides) as
    {subfolder: {"tokenizer.json": text, "tokenizer_config.json": dict}}: the English side
    at "" (the folder itself), the Spanish at "target" unless both languages share one
    tokenizer. Each adds SOS in front and EOS after, and pads with EOS as our sentences
    are padded (the attention mask then covers the words up to the end). None when a side
    is word-level: no tokenizer.json holds a list of words that refuses the others."""
    en, es = vocab.tokenizers["en"], vocab.tokenizers["es"]
    if en.kind != "bpe" or es.kind != "bpe":
        return None
    start, end = BPE_SPECIALS
    config = _config(vocab.max_seq_length, bos_token=start, eos_token=end, pad_token=end)
    sides = {"": en} if en.fingerprint == es.fingerprint else {"": en, "target": es}
    return {where: {"tokenizer.json": _as_hf(side, True, ends=True).to_str(),
                    "tokenizer_config.json": config} for where, side in sides.items()}
