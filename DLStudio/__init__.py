"""DLStudio Transformers: a teaching framework for the Transformer, after Avi Kak's DLStudio.

    from DLStudio import *          # DLStudio, TransformerFG, TransformerPreLN
"""

from .DLStudio import DLStudio

__all__ = ["DLStudio"]
__version__ = "0.1.0"
