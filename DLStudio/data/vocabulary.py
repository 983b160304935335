"""Text <-> token ids: one tokenizer per language, and both languages as one object.

    vocab = Vocabulary(corpus.vocab_en, corpus.vocab_es, max_seq_length=10)   # DLStudio's words
    vocab.encode(["i am hungry"], "en")    # LongTensor (1, 10): SOS, the tokens, EOS, EOS ...
    vocab.words([0, 57, 33, 1, 1])         # Spanish words up to EOS, without SOS/EOS
    vocab.prepare("I'm hungry!")           # English as the corpus writes it, checked

Two kinds of tokenizer, with the same methods:
    WordTokenizer   a token per word of a fixed list (DLStudio's vocabularies); a word
                    outside the list cannot be read
    BPETokenizer    byte-level byte-pair encoding (Sennrich et al. 2016; GPT-2's byte
                    alphabet), trained with Hugging Face ``tokenizers``: frequent words are
                    one piece, rare ones several, and any text at all is some sequence of
                    the 256 bytes, so no input is unknown
Both reserve ids 0 and 1 for "SOS" and "EOS". The model never sees text; the trainer and
the decoder read and write it through a Vocabulary. With BPE, ``max_seq_length`` counts
pieces, not words.
"""

import hashlib
import os
import random
import unicodedata

import torch

from ..model.tokens import EOS_INDEX, SOS_INDEX, SPECIAL_WORDS
from . import (
    PAIRS_DEFAULTS,
    is_pairs_file,
    load_corpus,
    normalize,
    split_pairs,
    vocab_fingerprint,
)

__all__ = ["WordTokenizer", "BPETokenizer", "tokenizer_from_state", "Vocabulary",
           "build_vocabulary", "read_corpus", "TranslationData", "DataView", "archive_path",
           "plain_words", "split_sentences", "TextData", "read_text"]

SPECIALS = SPECIAL_WORDS         # ids 0 and 1 in every tokenizer
#: Their names inside a BPE tokenizer: characters that no byte-level piece holds, so that no
#: merge of a text's bytes spells one (with plain "SOS", the merge "S" + "OS" would be id 0).
BPE_SPECIALS = ("\u27e8SOS\u27e9", "\u27e8EOS\u27e9")


def plain_words(sentence):
    """A sentence's words without the archive's wrapper (a string or a word list): a leading
    "SOS" and a trailing "EOS" are dropped when both are there, as the archive writes every
    sentence; any other word stays, "SOS" and "EOS" included (raw text keeps its words)."""
    words = sentence.split() if isinstance(sentence, str) else list(sentence)
    if len(words) >= 2 and words[0] == SPECIALS[0] and words[-1] == SPECIALS[1]:
        return words[1:-1]
    return words


class WordTokenizer:
    """A token per word: ``words`` lists them, starting with "SOS", "EOS". Those two are ids
    0 and 1 and no word of a text: the words "SOS" and "EOS" in a text are unknown."""

    kind = "word"

    def __init__(self, words):
        self.pieces = list(words)
        if self.pieces[:2] != list(SPECIALS):
            raise ValueError("a word list must start with 'SOS', 'EOS'")
        self.index = {w: i for i, w in enumerate(self.pieces) if i >= len(SPECIALS)}
        self.size = len(self.pieces)
        self.fingerprint = vocab_fingerprint(self.pieces, [])

    @classmethod
    def train(cls, sentences, vocab_size=None):
        """Every word of ``sentences`` (a word-level tokenizer learns no more than that)."""
        return cls(list(SPECIALS) + sorted({w for s in sentences for w in plain_words(s)
                                            if w not in SPECIALS}))

    def unknown(self, words):
        return [w for w in words if w not in self.index]

    def ids(self, texts):
        """Token ids of each text (words separated by spaces); KeyError on an unknown word."""
        return [[self.index[w] for w in text.split()] for text in texts]

    def text(self, ids):
        return " ".join(self.pieces[i] for i in ids)

    def readable(self, ids):
        """Each token as a reader sees it (for pictures of attention): here, its word."""
        return [self.pieces[int(i)] for i in ids]

    def state(self):
        return {"kind": self.kind, "words": self.pieces}


class BPETokenizer:
    """Byte-level BPE (a Hugging Face ``tokenizers.Tokenizer``): ``pieces[i]`` is token i as
    GPT-2 writes bytes ("Ġ" is a space before a word), "SOS" and "EOS" are 0 and 1. No text
    encodes to 0 or 1: "SOS" or "EOSINA" in a text is read as bytes like any other word."""

    kind = "bpe"

    def __init__(self, hf_tokenizer):
        self.hf = hf_tokenizer
        self.size = hf_tokenizer.get_vocab_size()
        self.pieces = [hf_tokenizer.id_to_token(i) for i in range(self.size)]
        self.pieces[:2] = SPECIALS                  # shown as SOS, EOS whatever their names
        self.fingerprint = hashlib.sha256(hf_tokenizer.to_str().encode()).hexdigest()[:16]
        hf_tokenizer.encode_special_tokens = True   # text never matches SOS/EOS (not saved)

    @classmethod
    def train(cls, sentences, vocab_size=8000):
        """Learn ``vocab_size`` pieces (the 256 bytes, SOS, EOS and the merges) from
        ``sentences`` (strings; the archive's SOS/EOS markers are left out)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        if vocab_size < 258 + 1:
            raise ValueError(f"vocab_size {vocab_size} is too small for byte-level BPE: it "
                             "needs the 256 bytes, SOS, EOS and some merges (try 2000 to 8000)")
        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(BPE_SPECIALS),
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        hf.train_from_iterator((" ".join(plain_words(s)) for s in sentences), trainer)
        return cls(hf)

    @classmethod
    def from_state(cls, state):
        from tokenizers import Tokenizer
        return cls(Tokenizer.from_str(state["json"]))

    def unknown(self, words):
        return []                 # any text is a sequence of bytes

    def ids(self, texts):
        return [e.ids for e in self.hf.encode_batch(list(texts))]

    def text(self, ids):
        """The text of pieces. An early model may emit bytes that are no UTF-8 character,
        or control bytes (a newline): both come out as U+FFFD, so one output stays one
        line of text."""
        text = self.hf.decode(list(ids))
        return "".join("\ufffd" if unicodedata.category(c) == "Cc" else c for c in text)

    def readable(self, ids):
        """Each piece as a reader sees it: its text, "##" before a piece that continues a
        word (as BERT writes them); a byte that is part of a character alone, as GPT-2
        writes it. SOS and EOS by name."""
        shown = []
        for i in map(int, ids):
            if i < len(SPECIALS):
                shown.append(self.pieces[i])
                continue
            text = self.hf.decode([i])
            if "\ufffd" in text:
                text = self.pieces[i]                  # part of a character: its byte
            starts = text.startswith(" ") or not shown or shown[-1] in SPECIALS
            shown.append(text.strip() if starts else "##" + text)
        return shown

    def state(self):
        return {"kind": self.kind, "json": self.hf.to_str()}


def tokenizer_from_state(state):
    """The tokenizer a checkpoint keeps (``state()`` of either kind)."""
    if state["kind"] == "bpe":
        return BPETokenizer.from_state(state)
    if state["kind"] == "hub":                # a real model's folder (data/hub_tokenizer.py)
        from .hub_tokenizer import HubTokenizer
        return HubTokenizer.from_state(state)
    return WordTokenizer(state["words"])


def _tokenizer(t):
    return WordTokenizer(t) if isinstance(t, (list, tuple)) else t


class Vocabulary:
    """Both languages' tokenizers and the sequence length they are padded to.

    Args: en, es: tokenizers, or word lists (DLStudio's vocabularies); max_seq_length.
    Attributes (DLStudio's names): ``en_vocab_dict``, ``es_vocab_dict`` (token -> id),
    ``en_index_2_word``, ``es_index_2_word`` (id -> token), ``vocab_en_size``,
    ``vocab_es_size``; ``kind`` ("word" | "bpe") and ``fingerprint`` (a checkpoint stores
    it to recognise them).
    """

    def __init__(self, en, es, max_seq_length):
        self.tokenizers = {"en": _tokenizer(en), "es": _tokenizer(es)}
        en, es = self.tokenizers["en"], self.tokenizers["es"]
        self.kind = "bpe" if "bpe" in (en.kind, es.kind) else "word"
        self.max_seq_length = max_seq_length
        self.vocab_en, self.vocab_es = en.pieces, es.pieces
        self.en_vocab_dict = {w: i for i, w in enumerate(self.vocab_en)}
        self.es_vocab_dict = {w: i for i, w in enumerate(self.vocab_es)}
        self.en_index_2_word = dict(enumerate(self.vocab_en))
        self.es_index_2_word = dict(enumerate(self.vocab_es))
        self.vocab_en_size, self.vocab_es_size = en.size, es.size
        self.fingerprint = (vocab_fingerprint(self.vocab_en, self.vocab_es)
                            if self.kind == "word" else
                            vocab_fingerprint([en.fingerprint], [es.fingerprint]))

    def state(self):
        """What a checkpoint keeps to rebuild the tokenizers (BPE: their merges)."""
        return {lang: t.state() for lang, t in self.tokenizers.items()}

    @classmethod
    def from_payload(cls, payload):
        """The vocabulary a translation checkpoint was trained with."""
        states = payload.get("tokenizers")
        from .hub_translation import FOLDER_TOKENIZERS
        if states and states.get("kind") in FOLDER_TOKENIZERS:      # a real model's folder's
            return FOLDER_TOKENIZERS[states["kind"]].from_state(states)
        en, es = ((tokenizer_from_state(states["en"]), tokenizer_from_state(states["es"]))
                  if states else (payload["vocab_en"], payload["vocab_es"]))
        return cls(en, es, payload["container_args"]["max_seq_length"])

    def token_ids(self, sentences, lang):
        """Each sentence's ids, SOS and EOS added (no length limit). Raises ValueError
        naming unknown words."""
        tokenizer = self.tokenizers[lang]
        words = [plain_words(s) for s in sentences]
        unknown = sorted({w for ws in words for w in tokenizer.unknown(ws)})
        if unknown:
            raise ValueError(f"unknown {'English' if lang == 'en' else 'Spanish'} word(s) "
                             f"{', '.join(map(repr, unknown[:10]))}: the model only knows "
                             "the words of its training vocabulary")
        return [[SOS_INDEX, *ids, EOS_INDEX]
                for ids in tokenizer.ids([" ".join(ws) for ws in words])]

    def encode(self, sentences, lang):
        """Token ids of sentences (strings or word lists, SOS/EOS optional), EOS-padded.

        Shape: list of B sentences -> LongTensor (B, max_seq_length)
        Raises ValueError naming unknown words or a sentence that is too long.
        """
        out = torch.full((len(sentences), self.max_seq_length), EOS_INDEX, dtype=torch.long)
        for row, ids in enumerate(self.token_ids(sentences, lang)):
            if len(ids) > self.max_seq_length:
                raise ValueError(f"{' '.join(plain_words(sentences[row]))!r} is "
                                 f"{len(ids) - 2} {self.unit}; this model takes at most "
                                 f"{self.max_seq_length - 2}")
            out[row, :len(ids)] = torch.tensor(ids)
        return out

    @property
    def unit(self):
        return "words" if self.kind == "word" else "pieces"

    def fits(self, sentence, lang="en"):
        """Whether a sentence can be encoded at all: every word known, short enough."""
        try:
            self.encode([sentence], lang)
            return True
        except ValueError:
            return False

    def words(self, ids):
        """Spanish words of one id sequence, stopping at EOS, without SOS/EOS (BPE pieces
        are joined back into words)."""
        kept = []
        for i in ids:
            i = int(i)
            if i == EOS_INDEX:
                break
            if i != SOS_INDEX:
                kept.append(i)
        return self.tokenizers["es"].text(kept).split()

    def prepare(self, sentence):
        """Normalise raw English like the corpus (lower case, contractions expanded,
        punctuation removed; an archive sentence's SOS ... EOS wrapper dropped) and check
        it; return its words.

        Raises ValueError naming unknown words (word-level only: BPE reads any word), or
        saying what is wrong with an empty or over-long sentence.
        """
        if not isinstance(sentence, str):
            return list(sentence)
        words = normalize(" ".join(plain_words(sentence)), expand=True).split()
        if not words:
            raise ValueError(f"nothing to translate in {sentence!r}: give an English "
                             f"sentence of 1 to {self.max_seq_length - 2} {self.unit}")
        unknown = self.tokenizers["en"].unknown(words)
        if unknown:
            raise ValueError(f"{sentence!r}: the model has never seen the word(s) "
                             f"{', '.join(map(repr, unknown))}; rephrase with words of its "
                             "training vocabulary (or train with --tokenizer bpe)")
        n = len(self.token_ids([words], "en")[0]) - 2
        if n > self.max_seq_length - 2:
            raise ValueError(f"{sentence!r} has {n} {self.unit}; this model translates "
                             f"at most {self.max_seq_length - 2}")
        return words


def build_vocabulary(corpus, training_pairs, tokenizer="word", vocab_size=None,
                     vocab_from="archive", max_seq_length=10, given=None, shared=False):
    """The vocabulary a container trains with.

    Args:
        tokenizer: "word" (DLStudio's) or "bpe" (``vocab_size`` pieces per language).
        vocab_from: word-level only: "archive" (the archive's own lists, DLStudio's
            behaviour: they include the held-out words) or "training" (the words of the
            training split only, so that held-out sentences may hold unknown words, as
            real input does). BPE is always learnt from the training split.
        max_seq_length: with BPE, it grows to twice the pieces of the longest training
            sentence (SOS and EOS aside): room for sentences of words never seen, each
            several pieces. (The sine/cosine positions cost nothing for the room left, and
            batches are cut to their longest sentence.)
        given: ready tokenizers by language (a pre-trained GPT's), used as they are.
        shared: BPE only: one tokenizer of ``vocab_size`` pieces learnt from the English
            and the Spanish of the training split, for both languages (so that one matrix
            can embed both; a piece both languages spell, "no" or "hotel", is one token).
    """
    if tokenizer not in ("word", "bpe"):
        raise ValueError(f"tokenizer must be 'word' or 'bpe', not {tokenizer!r}")
    if vocab_from not in ("archive", "training"):
        raise ValueError(f"vocab_from must be 'archive' or 'training', not {vocab_from!r}")
    given = given or {}
    if shared and (tokenizer != "bpe" or given):
        raise ValueError("a shared vocabulary is one BPE tokenizer learnt from both "
                         "languages: it takes tokenizer='bpe' and no ready tokenizer")
    if tokenizer == "word" and vocab_from == "archive" and not given:
        return Vocabulary(corpus.vocab_en, corpus.vocab_es, max_seq_length)
    if not training_pairs:
        raise ValueError("a vocabulary learnt from the training split needs training pairs")
    tokenizers = {}
    if shared:
        both = BPETokenizer.train([s for pair in training_pairs for s in pair], vocab_size or 8000)
        given = {"en": both, "es": both}
    for lang, side, archive_words in (("en", 0, corpus.vocab_en), ("es", 1, corpus.vocab_es)):
        if lang in given:
            tokenizers[lang] = given[lang]
        elif tokenizer == "word" and vocab_from == "archive":
            tokenizers[lang] = WordTokenizer(archive_words)
        else:
            kind = BPETokenizer if tokenizer == "bpe" else WordTokenizer
            tokenizers[lang] = kind.train([p[side] for p in training_pairs], vocab_size or 8000)
    vocab = Vocabulary(tokenizers["en"], tokenizers["es"], max_seq_length)
    longest = max(len(ids) for lang, side in (("en", 0), ("es", 1))
                  for ids in vocab.token_ids([p[side] for p in training_pairs], lang))
    vocab.longest_training_sentence = longest - 2
    vocab.max_seq_length = max(max_seq_length, with_room(longest, vocab.kind))
    return vocab


def with_room(longest, kind):
    """The sequence length for a longest sentence of ``longest`` tokens (SOS and EOS
    included): with BPE, room for twice its pieces, since a word never seen is several."""
    return 2 * (longest - 2) + 2 if kind == "bpe" else longest


def archive_path(dataroot, data_archive):
    """Where a DLStudio archive is: as given if that file exists, else under dataroot."""
    if os.path.isfile(data_archive):
        return data_archive
    return os.path.join(dataroot, data_archive)


def read_corpus(path, max_seq_length, tokenizer="word", pairs_options=None):
    """The Corpus a translation container trains on, read from an archive or a pairs file,
    and the pairs file's settings as they are recorded (None for an archive). The one
    reading of the data: the container's, and the vocabulary's when a GPT starts a stack.

    A pairs file keeps sentences of up to ``max_seq_length - 2`` words unless
    ``pairs_options`` says otherwise; word-level tokens must fit ``max_seq_length``."""
    word_limit = max_seq_length if tokenizer == "word" else None
    if pairs_options is None and is_pairs_file(path):
        pairs_options = {}                  # a pairs file: its settings are recorded
    if pairs_options is not None:
        pairs_options = {**PAIRS_DEFAULTS, "max_words": max_seq_length - 2, **pairs_options}
        words = pairs_options["max_words"]
        if word_limit is not None and words + 2 > word_limit:
            raise ValueError(f"sentences of up to {words} words need max_seq_length "
                             f"{words + 2} (SOS and EOS), not {word_limit}: raise "
                             "--max-seq-length or lower --max-words")
    return load_corpus(path, word_limit, pairs_options), pairs_options


class TranslationData:
    """What a translation model trains and is scored on, read once and kept by its
    container: the corpus (its pairs and the archive's word lists), the training and
    held-out pairs (split by English sentence, `split_pairs`) and the vocabulary.

    Args:
        corpus: a Corpus; or ``reader``, a function that reads it when it is first needed
            (a model rebuilt from a checkpoint reads its archive only to be scored on it).
        vocab: a ready Vocabulary (a checkpoint's); else built as ``build_vocabulary``
            says from ``tokenizer``, ``vocab_size``, ``vocab_from``, ``max_seq_length``,
            ``shared_vocab``.
        held_out_fraction, split_seed: the split. ``split``: a ready (training, held-out).

    The split is made when it is first asked for (DLStudio's word lists need none).
    DLStudio's names for all this (``training_corpus``, ``en_vocab_dict``, ...) are
    read-only views of it on the container.
    """

    def __init__(self, corpus=None, vocab=None, *, reader=None, held_out_fraction=0.05,
                 split_seed=0, split=None, tokenizer="word", vocab_size=None,
                 vocab_from="archive", max_seq_length=10, shared_vocab=False):
        if corpus is None and reader is None:
            raise ValueError("give data_archive= (a DLStudio archive) or corpus=")
        self._corpus, self._reader, self._split = corpus, reader, split
        self.held_out_fraction, self.split_seed = held_out_fraction, split_seed
        if vocab is None:
            from_split = tokenizer != "word" or vocab_from != "archive"
            vocab = build_vocabulary(self.corpus, self.training_pairs if from_split else None,
                                     tokenizer, vocab_size, vocab_from, max_seq_length,
                                     shared=shared_vocab)
        self.vocab = vocab

    @classmethod
    def read(cls, path, *, max_seq_length=10, tokenizer="word", pairs_options=None,
             **options):
        """The data of an archive or a pairs file (`read_corpus`), and the pairs file's
        settings as recorded (None for an archive)."""
        corpus, pairs_options = read_corpus(path, max_seq_length, tokenizer, pairs_options)
        return cls(corpus, max_seq_length=max_seq_length, tokenizer=tokenizer,
                   **options), pairs_options

    @property
    def corpus(self):
        if self._corpus is None:
            self._corpus = self._reader()
        return self._corpus

    @property
    def split(self):
        """(training pairs, held-out pairs), made when first asked for."""
        if self._split is None:
            pairs = self.corpus.pairs
            self._split = (split_pairs(pairs, self.held_out_fraction, self.split_seed)
                           if pairs else ([], []))
        return self._split

    @property
    def training_pairs(self):
        return self.split[0]

    @property
    def held_out_pairs(self):
        return self.split[1]

    def with_split(self, training, held_out):
        """The same corpus and vocabulary with another split (an experiment's own)."""
        return TranslationData(self._corpus, self.vocab, reader=self._reader,
                               held_out_fraction=self.held_out_fraction,
                               split_seed=self.split_seed, split=(training, held_out))


class DataView:
    """A read-only attribute of a container that shows part of its data under DLStudio's
    name: ``vocab_en = DataView("vocab", "vocab_en")`` reads ``self.data.vocab.vocab_en``."""

    def __init__(self, *path):
        self.path = path

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.data
        for step in self.path:
            value = getattr(value, step)
        return value

    def __set__(self, obj, value):
        raise AttributeError(
            f"{self.name} is a view of the data the container read ({'.'.join(self.path)} of "
            f"its .data); to train or score on other data, give the container data= "
            "(a TranslationData, e.g. data.with_split(training, held_out)) or corpus=")


def split_sentences(sentences, held_out_fraction=0.05, seed=0):
    """Training and held-out sentences, split by distinct sentence as `split_pairs` splits
    pairs by English sentence: every copy of a held-out sentence is held out, so none is also
    a training sentence. At least one distinct sentence is held out; each list keeps the
    order of ``sentences``, and the same sentences and seed always give the same split."""
    distinct = sorted(set(sentences))
    random.Random(seed).shuffle(distinct)
    n_held = min(len(distinct) - 1, max(1, round(held_out_fraction * len(distinct))))
    held = set(distinct[:n_held])
    return ([s for s in sentences if s not in held], [s for s in sentences if s in held])


class TextData:
    """What a language model trains and is scored on: its training and held-out sentences
    (split by distinct sentence, `split_sentences`), the tokenizer and the sequence length
    fitted to the training sentences. Built by `read_text`."""

    def __init__(self, training_sentences, held_out_sentences, vocab, max_seq_length):
        self.training_sentences, self.held_out_sentences = training_sentences, held_out_sentences
        self.vocab, self.max_seq_length = vocab, max_seq_length


def read_text(sentences, *, held_out_fraction=0.05, split_seed=0, tokenizer="bpe",
              vocab_size=None, vocab=None, max_seq_length=None):
    """A TransformerGPT's TextData: normalise blank space and drop the archive's SOS/EOS
    markers, split the sentences into training and held-out, learn the tokenizer from the
    training ones (or take ``vocab``) and fit ``max_seq_length`` to the longest training
    sentence (with BPE's room: `with_room`): a longer held-out sentence is left out of
    perplexity and counted as skipped."""
    sentences = [" ".join(plain_words(s)) for s in sentences]
    sentences = [s for s in sentences if s]
    training, held_out = list(sentences), []
    if len(set(sentences)) >= 2:         # (one distinct sentence: nothing can be held out)
        training, held_out = split_sentences(sentences, held_out_fraction, split_seed)
    if vocab is None:
        if not training:
            raise ValueError("a language model needs text to learn its tokenizer from: give "
                             "sentences= (at least two), or vocab= (a tokenizer)")
        kind = {"bpe": BPETokenizer, "word": WordTokenizer}.get(tokenizer)
        if kind is None:
            raise ValueError(f"tokenizer must be 'bpe' or 'word', not {tokenizer!r}")
        vocab = kind.train(training, vocab_size)
    unknown = sorted({w for s in training for w in vocab.unknown(s.split())})
    if unknown:                          # (held-out ones are left out of perplexity)
        raise ValueError(f"the training text holds words the word-level tokenizer lacks "
                         f"({', '.join(map(repr, unknown[:10]))}): use tokenizer='bpe'")
    fitted_to = [s for s in training or sentences     # never the held-out ones
                 if not vocab.unknown(s.split())]
    longest = max((len(ids) + 2 for ids in vocab.ids(fitted_to)), default=2)  # SOS, EOS
    return TextData(training, held_out, vocab,
                    max(max_seq_length or 0, with_room(longest, vocab.kind)))
