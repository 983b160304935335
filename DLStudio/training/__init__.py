"""Floor 4, training: the one training loop (``trainer``), its kinds for sentence pairs,
images and sentences (``kinds``), the process's own affairs beside the loop (``process``:
Ctrl-C, progress lines, random states) and the optimiser and its schedules (``schedule``).

    from DLStudio.training import TranslationTrainer
"""

from .kinds import (
    ImageTrainer,
    LanguageModelTrainer,
    TranslationTrainer,
    bucketed_batches,
    encode_pairs,
)
from .trainer import ScoreMissing, Trainer, TrainingDiverged, TrainingInterrupted

__all__ = ["Trainer", "TranslationTrainer", "ImageTrainer", "LanguageModelTrainer",
           "TrainingDiverged", "TrainingInterrupted", "ScoreMissing", "encode_pairs",
           "bucketed_batches"]
