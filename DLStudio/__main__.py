"""``python -m DLStudio SCRIPT ARGS``: the `dlstudio` command, for where it is not on PATH
(a notebook's ``!python -m DLStudio demo``, say)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m DLStudio"))
