"""DLStudio Transformers: a teaching framework for the Transformer, after Avi Kak's DLStudio.

    from DLStudio import *          # DLStudio, TransformerFG, TransformerPreLN, visTransformer
"""

from .DLStudio import DLStudio
from .Transformers import TransformerFG, TransformerPreLN, visTransformer

__all__ = ["DLStudio", "TransformerFG", "TransformerPreLN", "visTransformer"]
__version__ = "0.1.0"
