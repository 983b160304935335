"""The bug museum, under the name the scripts and the notebook import: its code is
DLStudio/cli/museum.py, with the other scripts' jobs."""

from .cli.museum import *  # noqa: F401,F403
from .cli.museum import __all__, main  # noqa: F401
