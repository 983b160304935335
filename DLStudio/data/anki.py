"""Build a DLStudio archive from a public Tatoeba/Anki sentence file (``spa.txt`` and kin).

Each line of such a file is ``English <TAB> other language <TAB> attribution``. Curation
follows DLStudio's description of its archive: lower case, English contractions expanded,
punctuation removed (``¿`` and ``¡`` included), accents kept, at most ``max_words`` words
per side, every sentence wrapped in ``SOS ... EOS``.
"""

import logging
import os
import random
import unicodedata

from .archive import ArchiveError, build_corpus

__all__ = ["normalize", "expand_contractions", "read_tsv_pairs", "curate_pairs",
           "load_pairs_file", "is_pairs_file", "PAIRS_DEFAULTS"]

log = logging.getLogger(__name__)

# Whole-word English contractions whose expansion is not just a suffix rule.
_WHOLE_WORDS = {
    "can't": "cannot", "won't": "will not", "shan't": "shall not", "ain't": "am not",
    "i'm": "i am", "let's": "let us", "y'all": "you all",
    "it's": "it is", "he's": "he is", "she's": "she is", "that's": "that is",
    "there's": "there is", "here's": "here is", "what's": "what is", "who's": "who is",
    "where's": "where is", "how's": "how is", "when's": "when is", "why's": "why is",
}
# Suffix rules, tried in order; a possessive "'s" (tom's) is not a contraction and stays.
_SUFFIXES = [("n't", " not"), ("'re", " are"), ("'ve", " have"), ("'ll", " will"),
             ("'d", " would")]
_SUFFIX_OWNERS = {"i", "you", "he", "she", "it", "we", "they", "there", "that", "who",
                  "what", "where", "how", "why", "when"}

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})


def expand_contractions(text):
    """Expand English contractions word by word: ``"i'm sure they'll come"`` ->
    ``"i am sure they will come"``. Expects lower-case text."""
    out = []
    for word in text.split():
        if word in _WHOLE_WORDS:
            out.append(_WHOLE_WORDS[word])
            continue
        for suffix, expansion in _SUFFIXES:
            stem = word[: -len(suffix)]
            if word.endswith(suffix) and (suffix == "n't" or stem in _SUFFIX_OWNERS):
                word = stem + expansion
                break
        out.append(word)
    return " ".join(out)


def normalize(text, expand=False):
    """Lower-case, optionally expand contractions, and remove punctuation.

    Letters (accented ones included), digits and apostrophes inside a word are kept;
    everything else becomes a space: ``"¿Dónde está el U.S. Post-Office?"`` ->
    ``"dónde está el u s post office"``.
    """
    text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES).lower()
    if expand:
        text = expand_contractions(text)
    text = "".join(ch if (ch.isalnum() or ch == "'") else " " for ch in text)
    words = [w.strip("'") for w in text.split()]
    return " ".join(w for w in words if w)


def read_tsv_pairs(path):
    """Yield ``(english, other)`` raw strings from an Anki/Tatoeba tab-separated file."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 2:
                raise ValueError(f"{path}:{lineno}: expected 'English<TAB>translation"
                                 f"[<TAB>attribution]', found {line[:60]!r}")
            yield fields[0], fields[1]


def curate_pairs(raw_pairs, max_words=8, num_pairs=90000, seed=0):
    """Normalise raw pairs, keep those of at most ``max_words`` words on both sides, and
    take ``num_pairs`` of them (None: all) after a seeded shuffle.

    Returns:
        a ``Corpus`` (sentences wrapped in SOS ... EOS, vocabularies built).
    """
    seen, kept = set(), []
    for en, other in raw_pairs:
        en, other = normalize(en, expand=True), normalize(other)
        if not en or not other or (en, other) in seen:
            continue
        if len(en.split()) <= max_words and len(other.split()) <= max_words:
            seen.add((en, other))
            kept.append((en, other))
    random.Random(seed).shuffle(kept)
    if num_pairs is None:
        num_pairs = len(kept)
    if len(kept) < num_pairs:
        log.warning("only %d pairs have at most %d words on both sides; keeping all of them "
                    "(%d were asked for)", len(kept), max_words, num_pairs)
    return build_corpus(kept[:num_pairs])



#: How a pairs file becomes a corpus when nothing else is said (see `load_pairs_file`).
PAIRS_DEFAULTS = {"max_words": 8, "num_pairs": None, "seed": 0}


def is_pairs_file(path):
    """Whether ``path`` names a pairs file (``.tsv`` or ``.txt``) rather than an archive."""
    return str(path).endswith((".tsv", ".txt"))


def load_pairs_file(path, options=None):
    """A Corpus from a tab-separated file of sentence pairs (``English<TAB>Spanish``, an
    optional third column ignored: Tatoeba/Anki's format, or a student's own file),
    curated as `curate_pairs` does with ``options`` ({"max_words", "num_pairs", "seed"};
    `PAIRS_DEFAULTS` for what is left out).

    Raises:
        FileNotFoundError, or ArchiveError naming the file and what to change in it.
    """
    options = {**PAIRS_DEFAULTS, **(options or {})}
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no pairs file at {path}: give a text file with one "
                                "'English<TAB>Spanish' pair per line")
    try:
        raw = list(read_tsv_pairs(path))
    except UnicodeDecodeError as e:
        raise ArchiveError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start}): save "
                           "it as UTF-8 (one 'English<TAB>Spanish' pair per line)") from None
    except ValueError as e:
        raise ArchiveError(f"{e}: each line needs a tab between the English sentence and "
                           "its translation") from None
    corpus = curate_pairs(raw, **options)
    if len(corpus.pairs) < 2:
        raise ArchiveError(
            f"{path}: {len(raw)} lines, but only {len(corpus.pairs)} pairs of at most "
            f"{options['max_words']} words on both sides with letters in them; training "
            "needs at least 2 (one is held out). Add pairs, or allow longer sentences "
            "(--max-words).")
    corpus.name = path
    return corpus
