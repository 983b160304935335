"""Floor 3, training: the one training loop (``trainer``: Trainer and its translation, image
and language-model kinds), the settings each model kind is described by (``settings``), the
optimiser and its warm-up (``schedule``), torchrun (``distributed``) and number formats
(``precision``).

    from DLStudio.training import TranslationTrainer
"""

from .trainer import *  # noqa: F403  (the trainer's names, as DLStudio.training)
from .trainer import __all__  # noqa: F401
