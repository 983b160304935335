"""What rebuilding a container from a checkpoint needs besides its weights: its class, as
the checkpoint records it ("module:Class": `class_path`, `import_class`, `container_class`),
and the corpus it was trained on (`corpus_of`, `corpus_fits`). Every ``from_checkpoint``
returns a `Restored`."""

import importlib
import inspect
import os
import sys
from typing import NamedTuple

from .files import CheckpointError

__all__ = ["Restored", "class_path", "import_class", "ClassNotFound", "container_class",
           "corpus_fits", "corpus_of"]


class ClassNotFound(TypeError):
    """A class named "module:Class" that cannot be imported; the message says what to do."""


def class_path(cls):
    """``"module:QualName"`` of a class, as a later process imports it. A class defined in a
    script run as ``python3 homework.py`` is recorded under the script's name (homework)."""
    module = cls.__module__
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
        elif getattr(main, "__file__", None):
            module = os.path.splitext(os.path.basename(main.__file__))[0]
    return f"{module}:{cls.__qualname__}"


def import_class(path):
    """The class named by ``"module:QualName"`` (the current folder is searched too) or by
    ``"path/to/module.py:QualName"`` (a file anywhere: its folder is searched first). Raises
    ClassNotFound saying what could not be found."""
    module_name, _, qualname = path.rpartition(":") if path.count(":") > 1 else \
        path.partition(":")
    if not module_name or not qualname:
        raise ClassNotFound(f"--model-class {path!r}: write it as module:Class, e.g. "
                            "homework_my_attention_head:TransformerFGWithTemperature, or "
                            "as path/to/file.py:Class")
    if module_name.endswith(".py"):
        if not os.path.isfile(module_name):
            raise ClassNotFound(f"--model-class {path!r}: there is no file {module_name}")
        folder = os.path.dirname(os.path.abspath(module_name))
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module_name = os.path.splitext(os.path.basename(module_name))[0]
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        obj = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ClassNotFound(f"cannot import {path}: {e}. Run from the folder that holds "
                            f"{module_name}.py, or add that folder to PYTHONPATH") from None
    if not inspect.isclass(obj):
        raise ClassNotFound(f"{path} is not a class")
    return obj


class Restored(NamedTuple):
    """What every ``from_checkpoint`` returns: the container (DLStudio's object, with its
    vocabulary and settings), the model ready to use (for a GPT or a visTransformer, the
    container itself) and the checkpoint's contents.

        xformer, model, checkpoint = TransformerFG.from_checkpoint("ck/checkpoint_39.pt")
        gpt = TransformerGPT.from_checkpoint("ck_gpt/checkpoint_9.pt").model
    """

    container: object
    model: object
    checkpoint: dict


def container_class(payload, path, called_on, model_class, ours):
    """The class a checkpoint was trained with: ``model_class`` (a class or "module:Class",
    refused when it is not the recorded one), the class ``from_checkpoint`` was called on,
    or one of ``ours``. A student's class is never imported on the checkpoint's word."""
    recorded = payload.get("container_class") or class_path(ours[payload.get("variant")])
    if model_class is not None:
        cls = import_class(model_class) if isinstance(model_class, str) else model_class
        if class_path(cls) != recorded:
            raise CheckpointError(f"{path} was trained with {recorded}, not {class_path(cls)}; "
                                  f"give --model-class {recorded}")
        return cls
    for cls in (called_on, *ours.values()):
        if class_path(cls) == recorded:
            return cls
    module = recorded.partition(":")[0]
    raise CheckpointError(
        f"{path} was trained with a class of your own, {recorded}: rebuild it with "
        f"--model-class {recorded}, run from the folder that holds {module}.py (in Python: "
        f"{recorded.rpartition(':')[2]}.from_checkpoint(path))")


def corpus_fits(payload, corpus):
    """Whether ``corpus`` is the archive a translation checkpoint was trained on: the same
    vocabularies (DLStudio's, from the archive), or else the same training split."""
    from ..data import pairs_fingerprint, split_pairs, vocab_fingerprint
    args = payload["container_args"]
    if "tokenizers" not in payload and args.get("vocab_from", "archive") == "archive":
        return vocab_fingerprint(corpus.vocab_en, corpus.vocab_es) == payload["vocab_fingerprint"]
    data = (payload.get("training_config") or {}).get("data")
    if data is None or not corpus.pairs:
        return data is None
    train, _ = split_pairs(corpus.pairs, args["held_out_fraction"], args["split_seed"])
    return pairs_fingerprint(train) == data


def corpus_of(payload):
    """The archive a checkpoint was trained on, if it is still where it was and still fits
    (`corpus_fits`); else a corpus with no pairs. The vocabulary always comes from the
    checkpoint. The bundled corpus is found in this copy of the package when the one the
    checkpoint names (a clone's, another installation's) is not there."""
    from ..data import BUNDLED_ARCHIVE, BUNDLED_NAME, ArchiveError, Corpus, load_corpus
    args = payload["container_args"]
    path = os.path.join(args.get("dataroot") or ".", args.get("data_archive") or "")
    if args.get("data_archive") == BUNDLED_NAME and not os.path.isfile(path):
        path = BUNDLED_ARCHIVE
    if args.get("data_archive") and os.path.isfile(path):
        try:
            corpus = load_corpus(path, pairs_options=args.get("pairs_options"))
        except ArchiveError:
            corpus = None
        if corpus and corpus_fits(payload, corpus):
            return corpus
    return Corpus([], payload["vocab_en"], payload["vocab_es"], name="checkpoint")
