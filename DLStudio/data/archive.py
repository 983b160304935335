"""Reading, checking, writing and splitting DLStudio's English-Spanish archives.

The format (despite the ``.tar.gz`` name, not a tar): gzip of a pickle of the tuple
``(dataset, vocab_en, vocab_es)``, where ``dataset`` maps an int to ``[english, spanish]``,
each sentence a string ``"SOS w1 w2 ... EOS"``, and each vocabulary is a list
``["SOS", "EOS", <words in sorted order>]``.

A pickle can run code while it is read, so an archive is untrusted input: it is read with
an unpickler that refuses every global name, which leaves exactly the built-in containers
(dict, list, tuple), strings and ints this format needs. Reading is also bounded in time and
memory on any input: the decompressed size is capped (``max_bytes``), and before anything is
built the pickle's opcodes are walked to count its objects (``max_objects``) and to follow how
deep its containers nest (``max_depth``; the format needs 3, and a crafted tuple 200,000
levels deep crashes CPython's hashing), the walk's own work capped too (``max_steps``).
Every refusal is an ``ArchiveError`` whose message names the file, the problem and what to
do, and never prints more than a few dozen characters of the archive's content (a key is
checked for type and range before any message formats it).
"""

import gzip
import hashlib
import io
import os
import pickle
import pickletools
import random
import tempfile
import zlib
from array import array
from dataclasses import dataclass

__all__ = ["ArchiveError", "Corpus", "load_archive", "save_archive", "archive_bytes",
           "build_corpus", "split_pairs", "vocab_fingerprint", "pairs_fingerprint"]

SOS, EOS = "SOS", "EOS"

#: The caps on what an archive may hold (``load_archive`` takes others). The real archive of
#: 90,000 pairs is 7.8 MB decompressed, 0.87 million pickle opcodes, nested 3 deep.
MAX_BYTES = int(os.environ.get("DLSTUDIO_MAX_ARCHIVE_MB", "256")) * 1_000_000
MAX_OBJECTS = 5_000_000
MAX_DEPTH = 32
#: The walk's steps (each opcode, and each container deepened as its nesting is followed):
#: the 90,000-pair archive takes 0.96 million; tests/fuzz_archive.py's worst cases are
#: refused at this cap within seconds and a few hundred MB.
MAX_STEPS = 6_000_000
#: A pair's key: an int that any language reads as a 64-bit integer.
KEY_LIMIT = 2 ** 63


class ArchiveError(ValueError):
    """An archive that cannot be used, with a message that says why and what to do."""


class _NoGlobalsUnpickler(pickle.Unpickler):
    """Unpickler that admits no class or function: only built-in containers and scalars."""

    def find_class(self, module, name):
        raise ArchiveError(
            f"the archive asks to load '{module}.{name}', which a DLStudio archive never "
            "contains; it may be crafted to run code and was not loaded. Rebuild it with "
            "'python -m DLStudio.data build-archive' or 'synth'.")


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


def _fail(source, message):
    raise ArchiveError(f"{source}: {message}")


def _short(obj, width=60):
    """A description of untrusted content that is short whatever the content is."""
    if isinstance(obj, str):
        return repr(obj[:width]) + ("..." if len(obj) > width else "")
    if isinstance(obj, (list, tuple, dict, set, frozenset)):
        return f"a {type(obj).__name__} of {len(obj)} items"
    if isinstance(obj, int):
        return str(obj) if obj.bit_length() < 64 else "a very large int"
    return f"a {type(obj).__name__}"


def _read_bytes(path, max_bytes):
    with open(path, "rb") as f:
        head = f.read(2)
    if head != b"\x1f\x8b":
        _fail(path, "not a gzip file. A DLStudio archive is a gzip-compressed pickle; build "
                    "one with 'python -m DLStudio.data build-archive TSV -o OUT'.")
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:
        _fail(path, f"the gzip stream is damaged ({str(e)[:100]}); download or build the "
                    "archive again.")
    if len(raw) > max_bytes:
        _fail(path, f"it decompresses to more than {max_bytes / 1e6:.0f} MB, the cap that keeps "
                    "a crafted file from filling the memory (the 90,000-pair archive is 8 MB). "
                    "If it is a real, larger archive, raise the cap: load_archive(..., "
                    "max_bytes=...) or the environment variable DLSTUDIO_MAX_ARCHIVE_MB.")
    return raw


_IN_PLACE = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS"}
_EMPTY = {"EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET", "EMPTY_TUPLE"}


class _Walk:
    """What the opcode walk knows of the objects, kept small: each object's depth (4 bytes)
    and whether it is a container; for a container that was put into another, the
    containers that hold it. ``steps`` counts the walk's work (opcodes read and nesting
    followed), capped at ``max_steps``."""

    def __init__(self, path, max_depth, max_steps):
        self.path, self.max_depth, self.max_steps, self.steps = path, max_depth, max_steps, 0
        self.depth, self.container, self.holders = array("i"), bytearray(), {}

    def new(self, container):
        self.depth.append(0)
        self.container.append(container)
        return len(self.depth) - 1

    def step(self):
        self.steps += 1
        if self.steps > self.max_steps:
            _fail(self.path, f"following how its containers nest takes more than "
                             f"{self.max_steps:,} steps, the cap that keeps a crafted file from "
                             "exhausting time and memory (the 90,000-pair archive takes under "
                             "a million); a real archive that large needs load_archive(..., "
                             "max_steps=...).")

    def hold(self, target, child):
        """``target`` now holds ``child``: it is at least one deeper."""
        if self.container[child]:
            self.holders.setdefault(child, []).append(target)
        if self.depth[child] + 1 > self.depth[target]:
            self.deepen(target, self.depth[child] + 1)

    def deepen(self, obj, d):
        """``obj`` is now at least ``d`` deep, and so each container holding it one deeper,
        and so on up (a container that holds itself deepens until it passes the cap)."""
        todo = [(obj, d)]
        while todo:
            obj, d = todo.pop()
            self.step()
            if d <= self.depth[obj]:
                continue
            if d > self.max_depth:
                _fail(self.path, f"its containers nest more than {self.max_depth} deep (a "
                                 "DLStudio archive nests 3 deep: tuple, dict, pair); it may be "
                                 "crafted to crash the reader and was not loaded.")
            self.depth[obj] = d
            todo.extend((holder, d + 1) for holder in self.holders.get(obj, ()))


def _check_opcodes(raw, path, max_objects, max_depth, max_steps=None):
    """Walk the pickle's opcodes without building anything: count them, and follow the
    nesting depth of every container. The walk keeps a stack of object numbers beside the
    unpickler's stack; each object knows its depth and the containers that hold it, so that
    a container grown in place after it was put into another (APPEND onto a list fetched
    back from the memo) deepens those too, whatever the order of the opcodes. Its work is
    capped (``max_steps``), so a crafted file is refused in bounded time."""
    walk = _Walk(path, max_depth, max_steps or MAX_STEPS)
    stack, marks, memo = [], [], {}
    try:
        for count, (op, arg, _) in enumerate(pickletools.genops(raw), 1):
            if count > max_objects:
                _fail(path, f"it holds more than {max_objects:,} pickle objects, the cap that "
                            "keeps a crafted file from exhausting time and memory; a real "
                            "archive that large needs load_archive(..., max_objects=...).")
            walk.step()
            name = op.name
            if name == "MARK":
                marks.append(len(stack))
            elif name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
                index = arg if name != "MEMOIZE" else len(memo)
                if not isinstance(index, int) or not 0 <= index <= count:
                    _fail(path, f"it stores an object under memo index {_short(index)}, beyond "
                                f"the {count:,} it has read (a pickle's unpickler makes room "
                                "for every index up to it); it may be crafted to fill the "
                                "memory and was not loaded.")
                memo[index] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo[arg])
            elif name == "POP_MARK":
                del stack[marks.pop():]
            elif name == "DUP":
                stack.append(stack[-1])
            elif name not in ("PROTO", "FRAME", "STOP"):
                _apply(op, stack, marks, walk)
    except ArchiveError:
        raise
    except Exception as e:            # malformed or truncated: genops says where
        _fail(path, f"the content is not a readable pickle ({type(e).__name__}: "
                    f"{str(e)[:100]}); download or build the archive again.")


def _apply(op, stack, marks, walk):
    """One opcode's effect on the objects: a new object (a container one deeper than what
    it holds), or an in-place addition (APPEND, SETITEM, ...) to a container below."""
    before = op.stack_before
    items = []
    if pickletools.markobject in before:
        start = marks.pop()
        items, stack[start:] = stack[start:], []
        before = before[:before.index(pickletools.markobject)]
    below = stack[len(stack) - len(before):] if before else []
    del stack[len(stack) - len(below):]
    if op.name in _IN_PLACE:
        target, held = below[0], below[1:] + items
    else:
        held = below + items
        target = walk.new(bool(held) or op.name in _EMPTY)   # a string never grows
    for child in held:
        walk.hold(target, child)
    stack.extend([target] * len(op.stack_after))


def _read_pickle(path, max_bytes=MAX_BYTES, max_objects=MAX_OBJECTS, max_depth=MAX_DEPTH,
                 max_steps=None):
    raw = _read_bytes(path, max_bytes)
    _check_opcodes(raw, path, max_objects, max_depth, max_steps)
    try:
        return _NoGlobalsUnpickler(io.BytesIO(raw)).load()
    except ArchiveError as e:
        _fail(path, str(e))
    except Exception as e:  # any malformed pickle: say so instead of a raw traceback
        _fail(path, f"the content is not a readable pickle ({type(e).__name__}: "
                    f"{str(e)[:100]}).")


def _check_vocab(source, vocab, lang):
    if not isinstance(vocab, list) or not all(isinstance(w, str) for w in vocab):
        _fail(source, f"the {lang} vocabulary must be a list of strings.")
    if vocab[:2] != [SOS, EOS]:
        _fail(source, f"the {lang} vocabulary must start with 'SOS', 'EOS' "
                      f"(it starts with {', '.join(_short(w, 20) for w in vocab[:2])}).")
    if len(set(vocab)) != len(vocab):
        _fail(source, f"the {lang} vocabulary lists a word twice.")


def _check_sentence(source, key, lang, sentence, vocab_set, max_seq_length):
    if not isinstance(sentence, str):
        _fail(source, f"pair {key}: the {lang} side is {type(sentence).__name__}, not a string.")
    words = sentence.split()
    if len(words) < 2 or words[0] != SOS or words[-1] != EOS:
        _fail(source, f"pair {key}: the {lang} sentence {_short(sentence)} is not wrapped in "
                      "SOS ... EOS.")
    if SOS in words[1:-1] or EOS in words[1:-1]:
        _fail(source, f"pair {key}: the {lang} sentence {_short(sentence)} has SOS or EOS "
                      "inside it.")
    if max_seq_length is not None and len(words) > max_seq_length:
        _fail(source, f"pair {key}: the {lang} sentence {_short(sentence)} has {len(words)} tokens "
                      f"(SOS and EOS included), more than max_seq_length={max_seq_length}; "
                      f"raise max_seq_length to at least {len(words)} or rebuild the archive "
                      "with a smaller --max-words.")
    for w in words[1:-1]:
        if w not in vocab_set:
            _fail(source, f"pair {key}: the {lang} word {_short(w, 30)} is missing from the "
                          f"{lang} vocabulary.")


def load_archive(path, max_seq_length=None, max_bytes=MAX_BYTES, max_objects=MAX_OBJECTS,
                 max_depth=MAX_DEPTH, max_steps=MAX_STEPS):
    """Read and validate a DLStudio archive.

    Args:
        path:           the ``.tar.gz`` (gzip + pickle) file.
        max_seq_length: when given, every sentence (SOS and EOS included) must fit in it.
        max_bytes, max_objects, max_depth, max_steps: the caps on the decompressed size,
                        the number of pickle objects, the nesting depth and the steps of
                        the walk that follows it (see the module docstring).

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
            "'python -m DLStudio.data build-archive spa.txt -o OUT', or use the bundled "
            "corpus datasets/en_es_synthetic_8_20000.tar.gz.")
    obj = _read_pickle(path, max_bytes, max_objects, max_depth, max_steps)
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
    # checked before any message formats a key (a 5,000-digit int cannot become a string)
    odd_key = next((k for k in dataset if type(k) is not int or not 0 <= k < KEY_LIMIT), None)
    if odd_key is not None:
        _fail(path, f"the dataset's keys must be ints from 0 to 2**63 - 1, found "
                    f"{_short(odd_key)}.")
    pairs = []
    for key in sorted(dataset):
        pair = dataset[key]
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            _fail(path, f"pair {key} must be [english, spanish], found {_short(pair)}.")
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


def pairs_fingerprint(pairs):
    """A short hash of sentence pairs, in order (a training split: another archive or split
    differs)."""
    h = hashlib.sha256()
    for en, es in pairs:
        h.update(f"{en}\t{es}\n".encode())
    return h.hexdigest()[:16]
