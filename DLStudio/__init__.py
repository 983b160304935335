"""DLStudio Transformers: a teaching framework for the Transformer, after Avi Kak's DLStudio.

    from DLStudio import *          # DLStudio, TransformerFG, TransformerPreLN, TransformerGPT,
                                    # visTransformer
"""

from .DLStudio import DLStudio
from .Transformers import TransformerFG, TransformerGPT, TransformerPreLN, visTransformer

__all__ = ["DLStudio", "TransformerFG", "TransformerPreLN", "TransformerGPT", "visTransformer"]
__version__ = "0.1.0"
