"""DLStudio Transformers: a teaching framework for the Transformer, after Avi Kak's DLStudio.

    from DLStudio import *          # DLStudio, TransformerFG, TransformerPreLN
"""

from .DLStudio import DLStudio
from .Transformers import TransformerFG, TransformerPreLN

__all__ = ["DLStudio", "TransformerFG", "TransformerPreLN"]
__version__ = "0.1.0"
