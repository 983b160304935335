"""Compatibility module: DLStudio scripts say ``from Transformers import *``."""

from DLStudio.Transformers import *  # noqa: F401,F403
from DLStudio.Transformers import __all__  # noqa: F401
