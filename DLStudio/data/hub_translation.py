"""A real translation model's tokenizer, read from its Hugging Face folder: Marian's (OPUS-MT)
two SentencePiece models, ``source.spm`` for English and ``target.spm`` for Spanish, and the
table of ids the model reads (``vocab.json``; ``target_vocab.json`` too where the two sides
have vocabularies of their own). The .spm files are read by the sentencepiece library, the
one they are written for (a dependency of this package: setup.py). Ids and text are
transformers' ``MarianTokenizer``'s:

    English text ──> its special tokens split out (</s>, <unk>, <pad> typed in the text are
    those tokens) ──> a leading ">>es<<" language code kept whole ──> source.spm's pieces
    ──> vocab.json's ids (a piece it lacks: <unk>) ──> </s> appended

Decoding drops the special tokens, joins the pieces (by source.spm where the vocabulary is
shared, as transformers does, else target.spm) and turns each "▁" into a space. Moses'
punctuation normalisation, which transformers applies only where the sacremoses package is
installed, is not applied.

Scored on a DLStudio archive, the English it reads is the archive's (lower case, no
punctuation: its "SOS ... EOS" wrapper dropped), and `words` gives its Spanish as the archive
writes its references (lower case, no punctuation), so that BLEU compares it with a model
trained on the archive on the same footing; `text` is the translation as the model wrote it.
"""

import hashlib
import json
import os

import torch

from ..model.tokens import SPECIAL_WORDS
from .anki import normalize
from .hub_tokenizer import FolderError, read_json

__all__ = ["FolderPair", "SentencePiecePair", "HubPair", "FOLDER_TOKENIZERS", "FOLDER_KINDS",
           "MAX_SPM_BYTES"]

MAX_SPM_BYTES = 64 << 20           # no SentencePiece model is that large
SPACE = "\u2581"


def _spm(proto):
    import sentencepiece
    return sentencepiece.SentencePieceProcessor(model_proto=proto)


def _read_spm(path, name):
    file = os.path.join(path, name)
    if not os.path.isfile(file):
        raise FolderError(f"{path} has no {name}: a Marian folder holds source.spm, "
                          "target.spm and vocab.json beside its config.json")
    if os.path.getsize(file) > MAX_SPM_BYTES:
        raise FolderError(f"{file} is over {MAX_SPM_BYTES >> 20} MB: no SentencePiece model "
                          "is that large")
    with open(file, "rb") as f:
        proto = f.read()
    try:
        _spm(proto)
    except (RuntimeError, OSError) as e:
        raise FolderError(f"{file} is not a SentencePiece model ({e})") from None
    return proto


class FolderPair:
    """What both kinds of a folder's tokenizer share: the translation containers' use of a
    Vocabulary (``encode``, ``prepare``, ``words``, sizes and special ids) over a subclass's
    ``ids(text, lang)`` (transformers' ids of one text, its end token last) and
    ``decode(ids)`` (its text, special tokens left out)."""

    unit = "pieces"

    @staticmethod
    def unwrapped(sentence):
        """A text without the archive's "SOS ... EOS" wrapper, where it has one."""
        words = sentence.split()
        if len(words) >= 2 and (words[0], words[-1]) == SPECIAL_WORDS:
            return " ".join(words[1:-1])
        return sentence

    def token_ids(self, sentences, lang):
        """Each text's ids (an id list stays as it is), </s> last."""
        return [s if isinstance(s, list) else self.ids(self.unwrapped(s), lang)
                for s in sentences]

    def encode(self, sentences, lang):
        """Token ids of texts (or id lists), </s> after each, <pad> after that (to the
        longest); Spanish as the decoder reads it, its start id first (as a Vocabulary puts
        SOS). Shape: list of B texts -> LongTensor (B, T). Raises ValueError for a text too
        long."""
        rows = [([self.start_id] if lang == "es" else []) + row
                for row in self.token_ids(sentences, lang)]
        for text, row in zip(sentences, rows):
            if len(row) > self.max_seq_length:
                raise ValueError(f"{str(text)[:60]!r}... is {len(row)} pieces; this model "
                                 f"reads at most {self.max_seq_length}")
        out = torch.full((len(rows), max(map(len, rows))), self.pad_id, dtype=torch.long)
        for i, row in enumerate(rows):
            out[i, :len(row)] = torch.tensor(row)
        return out

    def prepare(self, sentence):
        """A text's ids (what `encode` pads); ValueError for an empty or too long one."""
        if not isinstance(sentence, str):
            sentence = " ".join(sentence)
        if not sentence.strip():
            raise ValueError("nothing to translate: give an English sentence")
        ids = self.ids(self.unwrapped(sentence), "en")
        if len(ids) > self.max_seq_length:
            raise ValueError(f"{sentence[:60]!r}... is {len(ids)} pieces; this model reads "
                             f"at most {self.max_seq_length}")
        return ids

    def fits(self, sentence, lang="en"):
        return len(self.ids(self.unwrapped(sentence), lang)) <= self.max_seq_length

    def text(self, ids):
        """The Spanish text of one output id sequence, up to its first </s>."""
        ids = [int(i) for i in ids]
        return self.decode(ids[:ids.index(self.end_id)] if self.end_id in ids else ids)

    @property
    def tokenizers(self):
        """Each side's `readable` (the explorer's tokens), as a Vocabulary's tokenizers."""
        return {lang: _Readable(self.pieces[lang]) for lang in ("en", "es")}

    def words(self, ids):
        """The translation's words as the archive writes its Spanish (for BLEU on it)."""
        return normalize(self.text(ids)).split()


class SentencePiecePair(FolderPair):
    """Both sides' tokenizers of a Marian folder, as the translation containers use a
    Vocabulary (``encode``, ``prepare``, ``words``, sizes and special ids).

    Args: source, target: the .spm files' bytes; vocab (piece -> id: the English side's, and
        the Spanish side's too unless ``target_vocab``); specials: the token names
        (eos_token, unk_token, pad_token); max_seq_length: the most tokens the model reads.
    """

    kind = "sentencepiece"

    def __init__(self, source, target, vocab, target_vocab=None, specials=None,
                 max_seq_length=512):
        self.protos = {"en": source, "es": target}
        self.spm = {"en": _spm(source), "es": _spm(target)}
        self.tables = {"en": dict(vocab), "es": dict(target_vocab or vocab)}
        self.separate = target_vocab is not None
        names = dict({"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"},
                     **(specials or {}))
        self.specials = names
        for lang, table in self.tables.items():
            missing = [t for t in names.values() if t not in table]
            if missing:
                raise FolderError(f"the {'target' if lang == 'es' else ''} vocabulary has no "
                                  f"{', '.join(missing)}: a Marian vocabulary holds its "
                                  "special tokens")
        en = self.tables["en"]
        self.end_id, self.unk_id, self.pad_id = (en[names[k]] for k in
                                                 ("eos_token", "unk_token", "pad_token"))
        self.start_id = self.pad_id       # Marian's decoder starts from <pad> (config says)
        self.max_seq_length = max_seq_length
        self.pieces = {lang: [None] * (max(t.values()) + 1) for lang, t in self.tables.items()}
        for lang, table in self.tables.items():
            for piece, i in table.items():
                self.pieces[lang][i] = piece
        self.vocab_en, self.vocab_es = self.pieces["en"], self.pieces["es"]
        self.vocab_en_size, self.vocab_es_size = len(self.vocab_en), len(self.vocab_es)
        self.special_ids = {lang: {t[n] for n in names.values()}
                            for lang, t in self.tables.items()}
        self.fingerprint = hashlib.sha256(json.dumps(
            [sorted(en.items()), sorted(self.tables["es"].items())]).encode()
            + source + target).hexdigest()[:16]

    @classmethod
    def from_folder(cls, path, config):
        """The tokenizer of a Marian folder (FolderError naming what is missing)."""
        settings = read_json(path, "tokenizer_config.json", required=False)
        separate = bool(settings.get("separate_vocabs", False))
        target_vocab = read_json(path, "target_vocab.json") if separate else None
        specials = {k: settings[k] if isinstance(settings.get(k), str)
                    else settings.get(k, {}).get("content")
                    for k in ("eos_token", "unk_token", "pad_token") if settings.get(k)}
        return cls(_read_spm(path, "source.spm"), _read_spm(path, "target.spm"),
                   read_json(path, "vocab.json"), target_vocab, specials,
                   config.get("max_position_embeddings", 512))

    def state(self):
        """What a checkpoint keeps to rebuild it: both models and both tables."""
        return {"kind": self.kind, "source": self.protos["en"], "target": self.protos["es"],
                "vocab": self.tables["en"],
                "target_vocab": self.tables["es"] if self.separate else None,
                "specials": self.specials, "max_seq_length": self.max_seq_length,
                "start_id": self.start_id,
                "sizes": [self.vocab_en_size, self.vocab_es_size]}   # the model's, >= ours

    @classmethod
    def from_state(cls, state):
        tokenizer = cls(state["source"], state["target"], state["vocab"],
                        state["target_vocab"], state["specials"], state["max_seq_length"])
        tokenizer.start_id = state["start_id"]
        tokenizer.vocab_en_size, tokenizer.vocab_es_size = state["sizes"]
        return tokenizer

    def ids(self, text, lang="en"):
        """transformers' ids of one text (``lang`` "es": as ``text_target=``), </s> last."""
        table, spm = self.tables[lang], self.spm[lang]
        unk, out = table[self.specials["unk_token"]], []
        for chunk, special in self._split(text):
            if special:
                out.append(table[chunk])
                continue
            if chunk.startswith(">>") and chunk.find("<<") != -1:   # a language code
                end = chunk.find("<<") + 2
                out.append(table.get(chunk[:end], unk))
                chunk = chunk[end:]
            out.extend(table.get(p, unk) for p in spm.encode(chunk, out_type=str))
        return out + [self.end_id]

    def _split(self, text):
        """The text's pieces between its special tokens, each (text, is_special)."""
        names = sorted(set(self.specials.values()), key=len, reverse=True)
        start = at = 0
        while at < len(text):
            name = next((n for n in names if text.startswith(n, at)), None)
            if name is None:
                at += 1
                continue
            if at > start:
                yield text[start:at], False
            yield name, True
            start = at = at + len(name)
        if start < len(text):
            yield text[start:], False

    def decode(self, ids, lang="es"):
        """transformers' ``decode(ids, skip_special_tokens=True)``."""
        pieces = [self.pieces[lang][i] for i in map(int, ids)
                  if i not in self.special_ids[lang] and 0 <= i < len(self.pieces[lang])]
        spm = self.spm["es" if self.separate else "en"]
        return spm.decode_pieces([p for p in pieces if p is not None]) \
            .replace(SPACE, " ").strip()

class HubPair(FolderPair):
    """One tokenizer for both sides (T5's, BART's: a folder's tokenizer.json, read by
    `HubTokenizer` as transformers 5 reads it), as the translation containers use a
    Vocabulary. Its ids are the post-processor's: T5 appends </s>, BART writes <s> ... </s>.

    Args: hub (a HubTokenizer), end_id, pad_id, start_id (the decoder's first id),
        size (the model's vocabulary: its embedding rows), max_seq_length, target (the
        target side's HubTokenizer where it adds other tokens: mBART's language code).
    """

    kind = "hub_pair"

    def __init__(self, hub, end_id, pad_id, start_id, size, max_seq_length=512, target=None):
        self.hub, self.target = hub, target
        self.sides = {"en": hub, "es": target or hub}
        self.end_id, self.pad_id, self.start_id = end_id, pad_id, start_id
        self.max_seq_length = max_seq_length
        pieces = [hub.hf.id_to_token(i) for i in range(hub.hf.get_vocab_size(True))]
        self.pieces = {"en": pieces, "es": pieces}
        self.vocab_en = self.vocab_es = pieces
        self.vocab_en_size = self.vocab_es_size = max(size, len(pieces))
        # (of the pieces, not the whole file: its scores' last digits change when it is read
        # back from a checkpoint)
        # (what each side adds to a text, too: mBART's language codes)
        self.fingerprint = hashlib.sha256(json.dumps(
            [pieces, end_id, pad_id, start_id, *(self.sides[lang].encode("")
                                                 for lang in ("en", "es"))]
        ).encode()).hexdigest()[:16]

    @classmethod
    def from_folder(cls, path, config, max_seq_length=512, languages=None):
        """The tokenizer of a folder with a tokenizer.json; its special ids from the config
        (``config``: as its transformers class reads it). ``languages``: an mBART folder's
        (source, target) codes over its tokenizer_config.json's (None: the folder's); the
        decoder then starts from the target's code, as transformers' mBART is trained and
        told to generate."""
        from .hub_tokenizer import MBART_LIKE, HubTokenizer
        settings = read_json(path, "tokenizer_config.json", required=False)
        coded = settings.get("tokenizer_class") in MBART_LIKE
        if languages and not coded:
            raise FolderError(f"{path}: its tokenizer has no language codes (mBART's have): "
                              "the source and target languages are the model's own")
        hub = HubTokenizer.from_folder(path, config, languages=languages)
        target = HubTokenizer.from_folder(path, config, target=True, languages=languages) \
            if coded else None
        ids = {name: config.get(f"{name}_token_id")
               for name in ("eos", "pad", "decoder_start", "bos")}
        missing = [f"{name}_token_id" for name in ("eos", "pad") if ids[name] is None]
        if missing:
            raise FolderError(f"{path}: its config names no {' and no '.join(missing)}")
        # the decoder's first id as transformers' generate takes it: the config's, else <s>
        start = next(ids[k] for k in ("decoder_start", "bos", "pad") if ids[k] is not None)
        if languages and languages[1]:
            start = target.hf.token_to_id(languages[1])
        return cls(hub, ids["eos"], ids["pad"], start, config["vocab_size"], max_seq_length,
                   target)

    def ids(self, text, lang="en"):
        """transformers' ids of one text (``lang`` "es": as ``text_target=``), special
        tokens added."""
        return self.sides[lang].encode(text)

    def decode(self, ids, lang="es"):
        """transformers' ``decode(ids, skip_special_tokens=True)``."""
        return self.hub.decode([i for i in map(int, ids) if 0 <= i < len(self.vocab_en)])

    @property
    def tokenizers(self):
        return dict(self.sides)                     # (HubTokenizer.readable)

    def state(self):
        return {"kind": self.kind, "hub": self.hub.state(), "end_id": self.end_id,
                "pad_id": self.pad_id, "start_id": self.start_id,
                "size": self.vocab_en_size, "max_seq_length": self.max_seq_length,
                "target": self.target.state() if self.target else None}

    @classmethod
    def from_state(cls, state):
        from .hub_tokenizer import HubTokenizer
        target = state.get("target")
        return cls(HubTokenizer.from_state(state["hub"]), state["end_id"], state["pad_id"],
                   state["start_id"], state["size"], state["max_seq_length"],
                   HubTokenizer.from_state(target) if target else None)


#: Each kind of a folder's translation tokenizer, by its checkpoint name.
FOLDER_TOKENIZERS = {"sentencepiece": SentencePiecePair, "hub_pair": HubPair}
FOLDER_KINDS = tuple(FOLDER_TOKENIZERS)


class _Readable:
    """One side's tokens as a reader sees them: a piece with its "▁" as a space."""

    def __init__(self, pieces):
        self.pieces = pieces

    def readable(self, ids):
        return [(self.pieces[i] or "?").replace(SPACE, " ") if 0 <= i < len(self.pieces)
                else "?" for i in map(int, ids)]
