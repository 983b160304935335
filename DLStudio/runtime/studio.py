"""The configuration object that every DLStudio script creates first.

    dls = DLStudio(dataroot="./data/", path_saved_model="./saved_model",
                   learning_rate=1e-5, batch_size=50, epochs=40, use_gpu=True)

It holds what the containers (`TransformerFG`, `TransformerPreLN`, `visTransformer`) and the
trainer read: paths, optimiser settings, the seed and the device. It builds no models, and
reads data only when a DLStudio script asks it to (``load_cifar_10_dataset``).
"""

import random

import torch

from .distributed import join_torchrun

__all__ = ["DLStudio", "pick_device"]


def pick_device(use_gpu=True):
    """Return the fastest device present: CUDA, then Apple's MPS, then the CPU.

    With ``use_gpu=False`` the answer is always the CPU.
    """
    if use_gpu and torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if use_gpu and mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


class DLStudio:
    """Paths, optimiser settings, seed and device for one experiment.

    Args (keyword-only; an unknown keyword raises ``TypeError`` naming the valid ones):
        dataroot:          folder that holds the data archives (default ``"./data/"``).
        path_saved_model:  where the final model goes: one path, or a dict of paths keyed by
                           component (``"encoder_FG"``, ``"decoder_FG"``, ...) as in DLStudio.
        learning_rate:     Adam's learning rate where no warm-up schedule sets it (PreLN).
        batch_size:        sentence pairs per training step.
        epochs:            passes over the training split.
        use_gpu:           use CUDA (or MPS) when present; the CPU otherwise.
        seed:              seeds Python's and PyTorch's generators, for repeatable runs.
        momentum, image_size, classes, convo_layers_config, fc_layers_config, debug_train,
        debug_test: accepted so that other DLStudio scripts construct unchanged.

    Attributes:
        device: a ``torch.device``, always set (DLStudio 2.5.8 leaves it unset when
                ``use_gpu=False``); under torchrun, this process's GPU.
        world:  where this process stands among those torchrun started (rank, size); one
                process without torchrun (see DLStudio.runtime.distributed).

    Example:
        >>> dls = DLStudio(dataroot="./data/", batch_size=50, epochs=40, use_gpu=False)
        >>> dls.device
        device(type='cpu')
    """

    _DEFAULTS = {
        "dataroot": "./data/",
        "path_saved_model": "./saved_model",
        "learning_rate": 1e-5,
        "batch_size": 50,
        "epochs": 40,
        "use_gpu": True,
        "seed": 0,
        "momentum": 0.9,
        "image_size": None,
        "classes": None,
        "convo_layers_config": None,
        "fc_layers_config": None,
        "debug_train": 0,
        "debug_test": 0,
    }

    @classmethod
    def default(cls, name):
        """The default of keyword ``name`` (the scripts' flags take it from here)."""
        return cls._DEFAULTS[name]

    def __init__(self, *args, **kwargs):
        if args:
            raise TypeError("DLStudio takes keyword arguments only, e.g. "
                            "DLStudio(dataroot='./data/', batch_size=50)")
        unknown = sorted(set(kwargs) - set(self._DEFAULTS))
        if unknown:
            raise TypeError(f"DLStudio got unknown keyword(s) {', '.join(unknown)}; "
                            f"valid keywords are: {', '.join(sorted(self._DEFAULTS))}")
        for name, default in self._DEFAULTS.items():
            setattr(self, name, kwargs.get(name, default))
        for name in ("batch_size", "epochs"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"DLStudio: {name} must be a whole number >= 1, got {value!r}")
        if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
            raise ValueError(f"DLStudio: learning_rate must be a positive number, "
                             f"got {self.learning_rate!r}")
        if not isinstance(self.path_saved_model, (str, dict)):
            raise TypeError("DLStudio: path_saved_model must be a path or a dict of paths, "
                            f"got {type(self.path_saved_model).__name__}")
        self.world, self.device = join_torchrun(pick_device(self.use_gpu))
        if self.seed is not None:
            self.set_seed(self.seed)

    def load_cifar_10_dataset(self, download=False):
        """For DLStudio scripts that ask the configuration for CIFAR-10: read it (from
        ``dataroot``) and keep it here until a visTransformer trains on it. Raises
        ImageDataError saying where to put the data when it is missing."""
        from ..data.images import load_cifar10
        self.image_datasets = (load_cifar10(self.dataroot, True, download),
                               load_cifar10(self.dataroot, False, False))

    @staticmethod
    def set_seed(seed):
        """Seed Python's and PyTorch's random generators (CPU and every GPU)."""
        random.seed(seed)
        torch.manual_seed(seed)

    def __repr__(self):
        shown = ", ".join(f"{k}={getattr(self, k)!r}" for k in
                          ("dataroot", "batch_size", "epochs", "learning_rate", "seed"))
        return f"DLStudio({shown}, device={self.device})"
