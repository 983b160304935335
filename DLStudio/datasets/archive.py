"""Reading, checking, writing and splitting DLStudio's English-Spanish archives.

The format (despite the ``.tar.gz`` name, not a tar): gzip of a pickle of the tuple
``(dataset, vocab_en, vocab_es)``, where ``dataset`` maps an int to ``[english, spanish]``,
each sentence a string ``"SOS w1 w2 ... EOS"``, and each vocabulary is a list
``["SOS", "EOS", <words in sorted order>]``.

A pickle can run code while it is read, so an archive is untrusted input: it is read with
an unpickler that refuses every global name, which leaves exactly the built-in containers
(dict, list, tuple), strings and ints this format needs.
"""

import gzip
import hashlib
import io
import os
import pickle
import random
import tempfile
from dataclasses import dataclass

__all__ = ["ArchiveError", "Corpus", "load_archive", "save_archive", "archive_bytes",
           "build_corpus", "split_pairs", "vocab_fingerprint"]

SOS, EOS = "SOS", "EOS"


class ArchiveError(ValueError):
    """An archive that cannot be used, with a message that says why and what to do."""


class _NoGlobalsUnpickler(pickle.Unpickler):
    """Unpickler that admits no class or function: only built-in containers and scalars."""

    def find_class(self, module, name):
        raise ArchiveError(
            f"the archive asks to load '{module}.{name}', which a DLStudio archive never "
            "contains; it may be crafted to run code and was not loaded. Rebuild it with "
            "'python -m DLStudio.datasets build-archive' or 'synth'.")


@dataclass
class Corpus:
    """Sentence pairs and their vocabularies, as read from (or written to) an archive.

    Attributes:
        pairs:    list of ``(english, spanish)`` strings, each ``"SOS ... EOS"``.
        vocab_en: ``["SOS", "EOS", ...sorted words]``; likewise ``vocab_es``.
        name:     where it came from (for messages).
    """
    pairs: list
    vocab_en: list
    vocab_es: list
    name: str = "<corpus>"

    def longest_sentence(self):
        """Number of tokens, SOS and EOS included, of the longest sentence on either side."""
        return max(len(s.split()) for pair in self.pairs for s in pair)


def _fail(source, message):
    raise ArchiveError(f"{source}: {message}")


def _read_pickle(path):
    with open(path, "rb") as f:
        head = f.read(2)
    if head != b"\x1f\x8b":
        _fail(path, "not a gzip file. A DLStudio archive is a gzip-compressed pickle; build "
                    "one with 'python -m DLStudio.datasets build-archive TSV -o OUT'.")
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        _fail(path, f"the gzip stream is damaged ({e}); download or build the archive again.")
    try:
        return _NoGlobalsUnpickler(io.BytesIO(raw)).load()
    except ArchiveError as e:
        _fail(path, str(e))
    except Exception as e:  # any malformed pickle: say so instead of a raw traceback
        _fail(path, f"the content is not a readable pickle ({type(e).__name__}: {e}).")


def _check_vocab(source, vocab, lang):
    if not isinstance(vocab, list) or not all(isinstance(w, str) for w in vocab):
        _fail(source, f"the {lang} vocabulary must be a list of strings.")
    if vocab[:2] != [SOS, EOS]:
        _fail(source, f"the {lang} vocabulary must start with 'SOS', 'EOS' "
                      f"(it starts with {vocab[:2]}).")
    if len(set(vocab)) != len(vocab):
        _fail(source, f"the {lang} vocabulary lists a word twice.")


def _check_sentence(source, key, lang, sentence, vocab_set, max_seq_length):
    if not isinstance(sentence, str):
        _fail(source, f"pair {key}: the {lang} side is {type(sentence).__name__}, not a string.")
    words = sentence.split()
    if len(words) < 2 or words[0] != SOS or words[-1] != EOS:
        _fail(source, f"pair {key}: the {lang} sentence {sentence!r} is not wrapped in "
                      "SOS ... EOS.")
    if SOS in words[1:-1] or EOS in words[1:-1]:
        _fail(source, f"pair {key}: the {lang} sentence {sentence!r} has SOS or EOS inside it.")
    if max_seq_length is not None and len(words) > max_seq_length:
        _fail(source, f"pair {key}: the {lang} sentence {sentence!r} has {len(words)} tokens "
                      f"(SOS and EOS included), more than max_seq_length={max_seq_length}; "
                      f"raise max_seq_length to at least {len(words)} or rebuild the archive "
                      "with a smaller --max-words.")
    for w in words[1:-1]:
        if w not in vocab_set:
            _fail(source, f"pair {key}: the {lang} word {w!r} is missing from the {lang} "
                          "vocabulary.")


def load_archive(path, max_seq_length=None):
    """Read and validate a DLStudio archive.

    Args:
        path:           the ``.tar.gz`` (gzip + pickle) file.
        max_seq_length: when given, every sentence (SOS and EOS included) must fit in it.

    Returns:
        a ``Corpus`` with the pairs in key order.

    Raises:
        FileNotFoundError when the file is missing; ``ArchiveError`` naming the file and
        the problem for anything else wrong with it.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"no archive at {path}. Build one from a Tatoeba/Anki file with "
            "'python -m DLStudio.datasets build-archive spa.txt -o OUT', or use the bundled "
            "corpus datasets/en_es_synthetic_8_20000.tar.gz.")
    obj = _read_pickle(path)
    if not (isinstance(obj, tuple) and len(obj) == 3):
        found = type(obj).__name__
        if isinstance(obj, (tuple, list)):
            found += f" of length {len(obj)}"
        _fail(path, f"expected the tuple (dataset, vocab_en, vocab_es), found {found}.")
    dataset, vocab_en, vocab_es = obj
    if not isinstance(dataset, dict) or not dataset:
        _fail(path, "the first element must be a non-empty dict index -> [english, spanish].")
    _check_vocab(path, vocab_en, "English")
    _check_vocab(path, vocab_es, "Spanish")
    en_set, es_set = set(vocab_en), set(vocab_es)
    pairs = []
    for key in sorted(dataset, key=lambda k: (str(type(k)), k)):
        pair = dataset[key]
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            _fail(path, f"pair {key} must be [english, spanish], found {pair!r:.80}.")
        _check_sentence(path, key, "English", pair[0], en_set, max_seq_length)
        _check_sentence(path, key, "Spanish", pair[1], es_set, max_seq_length)
        pairs.append((pair[0], pair[1]))
    return Corpus(pairs, vocab_en, vocab_es, name=path)


def build_corpus(pairs, name="<corpus>"):
    """Make a Corpus from ``(english, spanish)`` word strings, adding SOS/EOS and vocabularies.

    The sentences are given without SOS/EOS; the vocabularies list every word, sorted.
    """
    wrapped = [(f"{SOS} {en} {EOS}", f"{SOS} {es} {EOS}") for en, es in pairs]
    vocab_en = [SOS, EOS] + sorted({w for en, _ in pairs for w in en.split()})
    vocab_es = [SOS, EOS] + sorted({w for _, es in pairs for w in es.split()})
    return Corpus(wrapped, vocab_en, vocab_es, name=name)


def archive_bytes(corpus):
    """The archive's bytes: the same corpus always gives the same bytes (gzip mtime fixed)."""
    dataset = {i: [en, es] for i, (en, es) in enumerate(corpus.pairs)}
    payload = pickle.dumps((dataset, corpus.vocab_en, corpus.vocab_es), protocol=4)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as gz:
        gz.write(payload)
    return buf.getvalue()


def save_archive(corpus, path):
    """Write ``corpus`` to ``path`` atomically (temporary file, then rename)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-archive-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(archive_bytes(corpus))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def split_pairs(pairs, held_out_fraction=0.05, seed=0):
    """Split sentence pairs into training and held-out lists, grouped by English sentence.

    Every pair whose English sentence is held out goes to the held-out list, so no held-out
    English sentence is ever seen in training, and every Spanish translation of it is
    available as a reference for BLEU. The same pairs and seed always give the same split.

    Returns:
        ``(train_pairs, held_out_pairs)``, each in the order of ``pairs``.
    """
    if not 0.0 < held_out_fraction < 1.0:
        raise ValueError(f"held_out_fraction must be between 0 and 1, got {held_out_fraction}")
    english = sorted({en for en, _ in pairs})
    if len(english) < 2:
        raise ValueError("a split needs at least two distinct English sentences")
    random.Random(seed).shuffle(english)
    n_held = min(len(english) - 1, max(1, round(held_out_fraction * len(english))))
    held = set(english[:n_held])
    train = [p for p in pairs if p[0] not in held]
    held_out = [p for p in pairs if p[0] in held]
    return train, held_out


def vocab_fingerprint(vocab_en, vocab_es):
    """A short hash of both vocabularies: a checkpoint only fits the vocabularies it was
    trained with, and this says which those were."""
    h = hashlib.sha256()
    for vocab in (vocab_en, vocab_es):
        h.update("\n".join(vocab).encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]
