"""Small random translation-model folders made by transformers itself (save_pretrained):
Marian (OPUS-MT's layout) with SentencePiece models trained here by the sentencepiece
library, what tests/test_hub_seq2seq.py reads into TransformerFG and compares with
transformers; no download needed."""

import io
import json
import os

from tests.hub_folders import CORPUS

SPANISH = ["la casa es roja y el perro come", "¿dónde está el café?", "Ella canta muy bien",
           "los niños juegan en el parque", "no sé nada de eso", "tengo 23 años y dos gatos",
           "el tren sale a las 8.30", "¡qué día tan bonito!", "mañana lloverá mucho"] * 20

#: Texts the ids must match on: accents, digits, punctuation runs, double and trailing
#: spaces, characters no piece holds, a literal <unk> and </s> inside the text.
VARIED_EN = ["Hello world", "the quick brown fox.", "", "  leading and trailing  ",
             "double  spaces  here", "numbers 12345 67 8.9", "what?!... no way!!!",
             "naïve café résumé — déjà vu", "日本語 and Ελληνικά", "an <unk> inside",
             "ends </s> early", "tabs\tand\nnewlines", "don't won't shouldn't",
             "supercalifragilisticexpialidocious " * 3]


def sentencepiece_model(sentences, vocab_size, model_type="unigram"):
    """A SentencePiece model (its serialized bytes) trained on ``sentences``, as Marian's
    source.spm and target.spm are: pieces only, <unk> at id 0 and no <s> or </s> of its own
    (the ids the model reads are vocab.json's)."""
    import sentencepiece as spm
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=out, vocab_size=vocab_size,
        model_type=model_type, character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1,
        pad_id=-1, hard_vocab_limit=False, minloglevel=2)
    return out.getvalue()


def _pieces(proto):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_proto=proto)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def marian_folder(path, separate_vocabs=False, std=0.3, generation=None, end_bias=0.0,
                  **changes):
    """A MarianMTModel folder of small random weights (2 + 2 layers, 32 wide, 4 heads, SiLU
    as OPUS-MT), its final_logits_bias random too (``end_bias`` more for </s>, so that
    translations end at many lengths), with source.spm, target.spm and vocab.json
    (``separate_vocabs``: target_vocab.json too, and two embedding matrices), and a
    generation_config.json as OPUS-MT's (``generation``: other fields)."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

    from tests.hub_folders import _weights_large
    os.makedirs(path, exist_ok=True)
    source, target = sentencepiece_model(CORPUS, 120), sentencepiece_model(SPANISH, 110)
    for name, proto in (("source.spm", source), ("target.spm", target)):
        with open(os.path.join(path, name), "wb") as f:
            f.write(proto)

    def vocab_of(pieces, size=0):     # </s> 0, <unk> 1, the pieces, <pad> last (OPUS-MT's
        words = ["</s>", "<unk>"] + [p for p in dict.fromkeys(pieces) if p != "<unk>"]
        words += [f"<extra_{i}>" for i in range(size - len(words) - 1)]    # order), at id
        return {w: i for i, w in enumerate(words + ["<pad>"])}    # size - 1 on both sides

    if separate_vocabs:
        size = 2 + max(len(_pieces(source)), len(_pieces(target)))
        vocab, target_vocab = vocab_of(_pieces(source), size), vocab_of(_pieces(target), size)
    else:
        vocab = target_vocab = vocab_of(_pieces(source) + _pieces(target))
    files = {"vocab.json": vocab, **({"target_vocab.json": target_vocab}
                                     if separate_vocabs else {})}
    for name, table in files.items():
        with open(os.path.join(path, name), "w") as f:
            json.dump(table, f, ensure_ascii=False)
    pad = vocab["<pad>"]
    settings = dict(vocab_size=len(vocab), decoder_vocab_size=len(target_vocab), d_model=32,
                    encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                    activation_function="swish", max_position_embeddings=128,
                    scale_embedding=True, pad_token_id=pad, decoder_start_token_id=pad,
                    eos_token_id=0, forced_eos_token_id=0,
                    share_encoder_decoder_embeddings=not separate_vocabs,
                    architectures=["MarianMTModel"])
    settings.update(changes)
    torch.manual_seed(0)
    model = _weights_large(MarianMTModel(MarianConfig(**settings)), std).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 1.0)
        model.final_logits_bias[0, 0] += end_bias
    model.save_pretrained(path)
    tokenizer = MarianTokenizer(os.path.join(path, "source.spm"),
                                os.path.join(path, "target.spm"),
                                os.path.join(path, "vocab.json"),
                                target_vocab_file=(os.path.join(path, "target_vocab.json")
                                                   if separate_vocabs else None),
                                separate_vocabs=separate_vocabs, source_lang="en",
                                target_lang="es")
    tokenizer.save_pretrained(path)
    GenerationConfig(**dict(dict(bad_words_ids=[[pad]], decoder_start_token_id=pad,
                                 eos_token_id=0, forced_eos_token_id=0, max_length=64,
                                 num_beams=4, pad_token_id=pad),
                            **(generation or {}))).save_pretrained(path)
    return path


def t5_tokenizer(path, extra_ids=10, hub_style=False):
    """A T5 tokenizer in ``path``: a SentencePiece unigram model trained here (<pad> 0, </s>
    1, <unk> 2, as T5's spiece.model), converted by transformers' T5Tokenizer and saved as
    its tokenizer.json; ``hub_style``: that file's normaliser and pre-tokenizer as the hub's
    T5 folders have them (written by transformers 4's converter: runs of spaces replaced by
    one, a Metaspace alone), which transformers 5 rebuilds."""
    import sentencepiece as spm
    from transformers import T5Tokenizer
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS + SPANISH), model_writer=out, vocab_size=150,
        model_type="unigram", character_coverage=1.0, pad_id=0, eos_id=1, unk_id=2,
        bos_id=-1, hard_vocab_limit=False, minloglevel=2)
    spiece = os.path.join(path, "spiece.model")
    with open(spiece, "wb") as f:
        f.write(out.getvalue())
    T5Tokenizer.from_pretrained(path, extra_ids=extra_ids).save_pretrained(path)
    os.remove(spiece)                     # the folder's tokenizer is its tokenizer.json
    if hub_style:
        file = os.path.join(path, "tokenizer.json")
        with open(file) as f:
            saved = json.load(f)
        saved["normalizer"] = {"type": "Sequence", "normalizers": [
            saved["normalizer"], {"type": "Replace", "pattern": {"Regex": " {2,}"},
                                  "content": " "}]}
        saved["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                                  "prepend_scheme": "always", "split": True}
        with open(file, "w") as f:
            json.dump(saved, f, ensure_ascii=False)


def t5_folder(path, version="1.0", std=0.3, end_bias=0.0, generation=None, **changes):
    """A T5ForConditionalGeneration folder of small random weights (2 + 2 layers, 32 wide,
    6 heads of 8: d_kv x heads is not d_model) with its tokenizer (`t5_tokenizer`):
    ``version`` "1.0" (ReLU, the output tied and scaled), "1.1" (GELU-gated, written by
    transformers 5: tied, not scaled) or "flan" (GELU-gated, an lm_head of its own, the
    config as the hub's Flan-T5 has it: tie_word_embeddings false); ``end_bias``: added
    to </s>'s output row, so that translations end at many lengths."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration

    from tests.hub_folders import _weights_large
    os.makedirs(path, exist_ok=True)
    t5_tokenizer(path, hub_style=changes.pop("hub_style", False))
    settings = dict(vocab_size=168, d_model=32, d_kv=8, d_ff=48, num_layers=2,
                    num_decoder_layers=2, num_heads=6, decoder_start_token_id=0,
                    feed_forward_proj="relu" if version == "1.0" else "gated-gelu",
                    architectures=["T5ForConditionalGeneration"])
    settings.update(changes)
    torch.manual_seed(0)
    model = _weights_large(T5ForConditionalGeneration(T5Config(**settings)), std).eval()
    with torch.no_grad():
        model.shared.weight[1] += end_bias
    if version == "1.1":
        model.config.scale_decoder_outputs = False
    model.save_pretrained(path)
    if version == "flan":                 # as the hub's: the lm_head stored, the config untied
        weights = load_file(os.path.join(path, "model.safetensors"))
        torch.manual_seed(1)
        head = torch.randn_like(weights["shared.weight"]) * std
        head[1] += end_bias
        weights["lm_head.weight"] = head
        save_file(weights, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
        config.pop("scale_decoder_outputs", None)
        config["tie_word_embeddings"] = False
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(config, f)
    if generation:
        GenerationConfig(**dict(dict(decoder_start_token_id=0, eos_token_id=1,
                                     pad_token_id=0), **generation)).save_pretrained(path)
    return path


def bart_folder(path, std=0.3, end_bias=0.0, generation=None, files="tokenizer.json",
                **changes):
    """A BartForConditionalGeneration folder of small random weights (2 + 2 layers, 32 wide,
    4 heads, learned positions, embedding norms, GELU) with a byte-level BPE trained here
    (<s> 0, <pad> 1, </s> 2, <unk> 3, <mask> last, as BART's), saved by transformers'
    BartTokenizer (``files`` "vocab.json": its vocab.json and merges.txt alone, as older
    folders hold it); ``end_bias``: more final_logits_bias for </s>."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizer

    from tests.hub_folders import _weights_large, byte_level_bpe
    os.makedirs(path, exist_ok=True)
    bpe = byte_level_bpe(300, specials=("<s>", "<pad>", "</s>", "<unk>"))
    vocab = bpe.get_vocab()
    vocab["<mask>"] = len(vocab)
    merges = json.loads(bpe.to_str())["model"]["merges"]
    tokenizer = BartTokenizer(vocab=vocab, merges=[tuple(m) if isinstance(m, list) else
                                                   tuple(m.split(" ")) for m in merges])
    tokenizer.save_pretrained(path)
    if files == "vocab.json":
        with open(os.path.join(path, "vocab.json"), "w") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(path, "merges.txt"), "w") as f:
            f.write("#version: 0.2\n" + "".join(
                (" ".join(m) if isinstance(m, list) else m) + "\n" for m in merges))
        os.remove(os.path.join(path, "tokenizer.json"))
    settings = dict(vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=2,
                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                    decoder_ffn_dim=64, max_position_embeddings=128,
                    architectures=["BartForConditionalGeneration"])
    settings.update(changes)
    torch.manual_seed(0)
    model = _weights_large(BartForConditionalGeneration(BartConfig(**settings)), std).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 1.0)
        model.final_logits_bias[0, 2] += end_bias
    model.save_pretrained(path)
    if generation:
        from transformers import GenerationConfig
        GenerationConfig(**dict(dict(decoder_start_token_id=2, eos_token_id=2,
                                     forced_eos_token_id=2, pad_token_id=1, bos_token_id=0),
                                **generation)).save_pretrained(path)
    return path


def mbart_folder(path, std=0.3, end_bias=0.0, generation=None, **changes):
    """An MBartForConditionalGeneration folder of small random weights (2 + 2 layers, 32
    wide, 4 heads, pre-LN with final norms, words scaled by sqrt(M) as mbart-large's) with
    its tokenizer: a SentencePiece BPE trained here, converted by transformers'
    MBartTokenizer (fairseq's order: <s> 0, <pad> 1, </s> 2, <unk> 3, the pieces, then the
    25 language codes and <mask>), source en_XX and target es_XX; the decoder starts from
    es_XX (as mbart-large-en-ro's from ro_RO). ``end_bias``: more final_logits_bias for
    </s>."""
    import sentencepiece as spm
    import torch
    from transformers import MBartConfig, MBartForConditionalGeneration, MBartTokenizer

    from tests.hub_folders import _weights_large
    os.makedirs(path, exist_ok=True)
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS + SPANISH), model_writer=out, vocab_size=150,
        model_type="bpe", character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
    spiece = os.path.join(path, "sentencepiece.bpe.model")
    with open(spiece, "wb") as f:
        f.write(out.getvalue())
    tokenizer = MBartTokenizer.from_pretrained(path, src_lang="en_XX", tgt_lang="es_XX")
    tokenizer.save_pretrained(path)
    os.remove(spiece)
    start = tokenizer.convert_tokens_to_ids("es_XX")
    settings = dict(vocab_size=len(tokenizer), d_model=32, encoder_layers=2, decoder_layers=2,
                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                    decoder_ffn_dim=64, max_position_embeddings=128, scale_embedding=True,
                    decoder_start_token_id=start,
                    architectures=["MBartForConditionalGeneration"])
    settings.update(changes)
    torch.manual_seed(0)
    model = _weights_large(MBartForConditionalGeneration(MBartConfig(**settings)), std).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 1.0)
        model.final_logits_bias[0, 2] += end_bias
    model.save_pretrained(path)
    if generation:
        from transformers import GenerationConfig
        GenerationConfig(**dict(dict(decoder_start_token_id=start, eos_token_id=2,
                                     forced_eos_token_id=2, pad_token_id=1, bos_token_id=0),
                                **generation)).save_pretrained(path)
    return path
