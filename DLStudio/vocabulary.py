"""Words <-> token ids: the vocabularies of an archive, as one object.

    vocab = Vocabulary(corpus.vocab_en, corpus.vocab_es, max_seq_length=10)
    vocab.encode(["i am hungry"], "en")    # LongTensor (1, 10): SOS, the words, EOS, EOS ...
    vocab.words([0, 57, 33, 1, 1])         # Spanish words up to EOS, without SOS/EOS
    vocab.prepare("I'm hungry!")           # English as the corpus writes it, checked

The model never sees words; the trainer and the decoder read and write them through this.
"""

import os

import torch

from .datasets import load_archive, normalize, split_pairs, vocab_fingerprint
from .tokens import EOS_INDEX, SOS_INDEX

__all__ = ["Vocabulary", "use_corpus", "archive_path"]


class Vocabulary:
    """Both languages' word lists (each starting with "SOS", "EOS") and their indices.

    Attributes (DLStudio's names): ``en_vocab_dict``, ``es_vocab_dict`` (word -> id),
    ``en_index_2_word``, ``es_index_2_word`` (id -> word), ``vocab_en_size``,
    ``vocab_es_size``, and ``fingerprint`` (a checkpoint stores it to recognise them).
    """

    def __init__(self, vocab_en, vocab_es, max_seq_length):
        self.vocab_en, self.vocab_es = list(vocab_en), list(vocab_es)
        self.max_seq_length = max_seq_length
        self.en_vocab_dict = {w: i for i, w in enumerate(self.vocab_en)}
        self.es_vocab_dict = {w: i for i, w in enumerate(self.vocab_es)}
        self.en_index_2_word = dict(enumerate(self.vocab_en))
        self.es_index_2_word = dict(enumerate(self.vocab_es))
        self.vocab_en_size, self.vocab_es_size = len(self.vocab_en), len(self.vocab_es)
        self.fingerprint = vocab_fingerprint(self.vocab_en, self.vocab_es)

    def encode(self, sentences, lang):
        """Token ids of sentences (strings or word lists, SOS/EOS optional), EOS-padded.

        Shape: list of B sentences -> LongTensor (B, max_seq_length)
        Raises ValueError naming unknown words or a sentence that is too long.
        """
        vocab = self.en_vocab_dict if lang == "en" else self.es_vocab_dict
        out = torch.full((len(sentences), self.max_seq_length), EOS_INDEX, dtype=torch.long)
        for row, sentence in enumerate(sentences):
            words = sentence.split() if isinstance(sentence, str) else list(sentence)
            words = [w for w in words if w not in ("SOS", "EOS")]
            unknown = [w for w in words if w not in vocab]
            if unknown:
                raise ValueError(f"unknown {'English' if lang == 'en' else 'Spanish'} "
                                 f"word(s) {', '.join(map(repr, unknown))}: the model only "
                                 "knows the words of its training vocabulary")
            if len(words) + 2 > self.max_seq_length:
                raise ValueError(f"{' '.join(words)!r} has {len(words)} words; this model "
                                 f"takes at most {self.max_seq_length - 2}")
            ids = [SOS_INDEX] + [vocab[w] for w in words] + [EOS_INDEX]
            out[row, :len(ids)] = torch.tensor(ids)
        return out

    def words(self, ids):
        """Spanish words of one id sequence, stopping at EOS, without SOS/EOS."""
        words = []
        for i in ids:
            i = int(i)
            if i == EOS_INDEX:
                break
            if i != SOS_INDEX:
                words.append(self.es_index_2_word[i])
        return words

    def prepare(self, sentence):
        """Normalise raw English like the corpus (lower case, contractions expanded,
        punctuation removed) and check it; return its words.

        Raises ValueError naming unknown words, or saying what is wrong with an empty or
        over-long sentence.
        """
        if not isinstance(sentence, str):
            return list(sentence)
        words = [w for w in normalize(sentence, expand=True).split() if w not in ("sos", "eos")]
        if not words:
            raise ValueError(f"nothing to translate in {sentence!r}: give an English "
                             f"sentence of 1 to {self.max_seq_length - 2} words")
        unknown = [w for w in words if w not in self.en_vocab_dict]
        if unknown:
            raise ValueError(f"{sentence!r}: the model has never seen the word(s) "
                             f"{', '.join(map(repr, unknown))}; rephrase with words of its "
                             "training vocabulary")
        if len(words) > self.max_seq_length - 2:
            raise ValueError(f"{sentence!r} has {len(words)} words; this model translates "
                             f"at most {self.max_seq_length - 2}")
        return words


def archive_path(dataroot, data_archive):
    """Where a DLStudio archive is: as given if that file exists, else under dataroot."""
    if os.path.isfile(data_archive):
        return data_archive
    return os.path.join(dataroot, data_archive)


def use_corpus(xformer, corpus=None):
    """What a DLStudio container does with its archive in its constructor: read it (unless
    a Corpus is given), keep its vocabularies as ``xformer.vocab`` and under DLStudio's
    attribute names, and split its pairs into training and held-out sentences."""
    if corpus is None:
        if xformer.data_archive is None:
            raise ValueError("give data_archive= (a DLStudio archive) or corpus=")
        corpus = load_archive(archive_path(xformer.dataroot, xformer.data_archive),
                              max_seq_length=xformer.max_seq_length)
    vocab = Vocabulary(corpus.vocab_en, corpus.vocab_es, xformer.max_seq_length)
    xformer.corpus, xformer.vocab = corpus, vocab
    xformer.vocab_en, xformer.vocab_es = vocab.vocab_en, vocab.vocab_es
    xformer.vocab_en_size, xformer.vocab_es_size = vocab.vocab_en_size, vocab.vocab_es_size
    xformer.en_vocab_dict, xformer.es_vocab_dict = vocab.en_vocab_dict, vocab.es_vocab_dict
    xformer.en_index_2_word, xformer.es_index_2_word = vocab.en_index_2_word, vocab.es_index_2_word
    xformer.vocab_fingerprint = vocab.fingerprint
    xformer.training_corpus, xformer.held_out_corpus = [], []
    if corpus.pairs:
        xformer.training_corpus, xformer.held_out_corpus = split_pairs(
            corpus.pairs, xformer.held_out_fraction, xformer.split_seed)
