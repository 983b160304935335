"""DLStudio Transformers: a teaching framework for the Transformer, after Avi Kak's DLStudio.

    from DLStudio import *          # DLStudio, TransformerFG, TransformerPreLN, TransformerGPT,
                                    # visTransformer
"""

import os as _os
import warnings as _warnings

from .cli.install_check import mixed_with_kak as _mixed_with_kak
from .runtime.studio import DLStudio
from .Transformers import TransformerFG, TransformerGPT, TransformerPreLN, visTransformer

_mixed = _mixed_with_kak(_os.path.dirname(_os.path.abspath(__file__)))
if _mixed:                  # Avi Kak's DLStudio in the same environment: say what to do
    _warnings.warn(_mixed, RuntimeWarning, stacklevel=2)

__all__ = ["DLStudio", "TransformerFG", "TransformerPreLN", "TransformerGPT", "visTransformer"]
__version__ = "0.1.0"
