"""The example scripts, as modules of the package:

    python -m DLStudio.examples.seq2seq_with_transformerFG --epochs 3

In a clone they are the files of ExamplesTransformers/ (added to this package's path
below); an installed copy carries them here, copied in by setup.py when it builds.
"""

import os

_clone = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "ExamplesTransformers")
if os.path.isdir(_clone):
    __path__.append(_clone)
