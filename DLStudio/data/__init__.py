"""The data layer: DLStudio archives (safe loading, validation, split), the Tatoeba/Anki
converter, the generator of the bundled synthetic corpus, and images (CIFAR-10 and our own
shapes) for the visTransformer.

Command line: ``python -m DLStudio.data {inspect,build-archive,synth,tasks} ...``.
"""

from .anki import (
    PAIRS_DEFAULTS,
    curate_pairs,
    expand_contractions,
    is_pairs_file,
    load_pairs_file,
    normalize,
    read_tsv_pairs,
)
from .archive import (
                      ArchiveError,
                      Corpus,
                      archive_bytes,
                      build_corpus,
                      load_archive,
                      pairs_fingerprint,
                      save_archive,
                      split_pairs,
                      vocab_fingerprint,
)
from .images import (
                     CIFAR10_CLASSES,
                     SHAPE_CLASSES,
                     ImageDataError,
                     ImageSet,
                     generate_shapes,
                     load_cifar10,
                     random_crops_and_flips,
)
from .synth import generate_corpus, generate_pairs

__all__ = ["ArchiveError", "Corpus", "archive_bytes", "build_corpus", "load_archive",
           "save_archive", "split_pairs", "vocab_fingerprint", "pairs_fingerprint", "curate_pairs",
           "expand_contractions", "normalize", "read_tsv_pairs", "load_pairs_file",
           "PAIRS_DEFAULTS", "load_corpus", "is_pairs_file", "generate_corpus",
           "generate_pairs", "BUNDLED_ARCHIVE", "BUNDLED_NAME", "BUNDLED_SHA256", "ImageSet",
           "ImageDataError", "SHAPE_CLASSES", "CIFAR10_CLASSES", "generate_shapes",
           "load_cifar10", "random_crops_and_flips"]

import os as _os

#: The bundled corpus's name and SHA-256: ``python -m DLStudio.data synth`` writes exactly
#: these bytes (a test checks it), and setup.py checks the copy it packs.
BUNDLED_NAME = "en_es_synthetic_8_20000.tar.gz"
BUNDLED_SHA256 = "cb5f8a996738ca7ee7f77dee535b5cc23b10b945fd795a46336b2299bd18dbcc"
_here = _os.path.dirname(_os.path.abspath(__file__))
#: The project's own corpus: inside the package in an installed copy, in datasets/ in a clone.
BUNDLED_ARCHIVE = next((path for path in (
    _os.path.join(_here, BUNDLED_NAME),
    _os.path.join(_os.path.dirname(_os.path.dirname(_here)), "datasets", BUNDLED_NAME))
    if _os.path.isfile(path)), _os.path.join(_here, BUNDLED_NAME))


def load_corpus(path, max_seq_length=None, pairs_options=None):
    """A Corpus from a DLStudio archive, or from a pairs file (``.tsv``/``.txt``, or any
    file when ``pairs_options`` is given: see `load_pairs_file`)."""
    if pairs_options is not None or is_pairs_file(path):
        return load_pairs_file(path, pairs_options)
    return load_archive(path, max_seq_length=max_seq_length)
