"""Floor 2, what a run runs on, which both training and evaluation use: the configuration
object students make first (``studio``: ``DLStudio``, with the device), the processes
torchrun started (``distributed``), the number format of the arithmetic (``precision``)
and how the weights lie in memory while a model generates (``weight_layout``)."""
