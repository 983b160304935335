"""Is this copy whole? Avi Kak's DLStudio (``pip install DLStudio``) also installs top-level
packages named ``DLStudio`` and ``Transformers``. In one environment the two overwrite each
other's files (pip does not stop it: whichever came last wins ``DLStudio/__init__.py`` and
``DLStudio/DLStudio.py``), and ``import Transformers`` finds his package before our
``Transformers.py``. Importing DLStudio warns with `mixed_with_kak`'s message; the
``dlstudio`` command refuses to run where the files are shared.
"""

import importlib.metadata
import importlib.util
import os

__all__ = ["mixed_with_kak", "shares_files_with_kak", "transformers_is_kak",
           "KAK_DISTRIBUTION"]

#: The name of Avi Kak's package on PyPI (ours is DLStudio-Transformers).
KAK_DISTRIBUTION = "DLStudio"
ADVICE = ("Keep the two in separate virtual environments: python3 -m venv ~/venv-dlstudio-xf "
          "&& ~/venv-dlstudio-xf/bin/pip install DLStudio-Transformers (this package), and "
          "Kak's DLStudio in another")


def _kak_distribution():
    try:
        return importlib.metadata.distribution(KAK_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def shares_files_with_kak(package_dir):
    """Whether Kak's DLStudio is installed where this copy (imported from ``package_dir``)
    is, so that the two have overwritten each other's files: a sentence, or None."""
    kak = _kak_distribution()
    if kak is None:
        return None
    his = os.path.dirname(os.path.abspath(kak.locate_file(os.path.join("DLStudio",
                                                                       "__init__.py"))))
    if os.path.realpath(his) != os.path.realpath(package_dir):
        return None
    return (f"Avi Kak's DLStudio {kak.version} is installed in the same place as this "
            f"DLStudio Transformers ({package_dir}): both install the package DLStudio, so "
            "each has overwritten files of the other")


def transformers_is_kak():
    """Whether ``import Transformers`` finds Kak's package instead of our Transformers.py:
    a sentence, or None."""
    spec = importlib.util.find_spec("Transformers")
    if spec is None or spec.submodule_search_locations is None:
        return None
    where = list(spec.submodule_search_locations)[0]
    return (f"`import Transformers` finds the package {where} (Avi Kak's DLStudio), not this "
            "project's Transformers.py: `from Transformers import *` gives his classes, "
            "`from DLStudio import *` ours")


def mixed_with_kak(package_dir):
    """Everything that mixes this copy with Kak's DLStudio, and what to do; None if
    nothing does."""
    found = [p for p in (shares_files_with_kak(package_dir), transformers_is_kak()) if p]
    return "; ".join(found) + f". {ADVICE}." if found else None
