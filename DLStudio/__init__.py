"""DLStudio Transformers: a teaching framework for the Transformer, after Avi Kak's DLStudio.

    from DLStudio import *          # DLStudio, TransformerFG, TransformerPreLN, TransformerGPT,
                                    # TransformerBERT, visTransformer

The front door names the public classes and loads each the first time it is asked for, so
that importing one module of the package (``DLStudio.model.architecture``) loads nothing of
the floors above it, and ``import DLStudio`` nothing of the command line.
"""

import importlib as _importlib
import os as _os
import warnings as _warnings

from .install_check import mixed_with_kak as _mixed_with_kak

__all__ = ["DLStudio", "TransformerFG", "TransformerPreLN", "TransformerGPT", "TransformerBERT",
           "visTransformer"]
__version__ = "0.1.0"

#: Where each public name lives (DLStudio's: the containers, and the configuration object).
_HOMES = {"DLStudio": "runtime.studio", "TransformerFG": "Transformers",
          "TransformerPreLN": "Transformers", "TransformerGPT": "Transformers",
          "TransformerBERT": "Transformers", "visTransformer": "Transformers"}


def __getattr__(name):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_HOMES})


_mixed = _mixed_with_kak(_os.path.dirname(_os.path.abspath(__file__)))
if _mixed:                  # Avi Kak's DLStudio in the same environment: say what to do
    _warnings.warn(_mixed, RuntimeWarning, stacklevel=2)
