"""Floor 2, checkpoints: the file itself (``files``: its format, writing and reading it, what
goes in and whether it fits a model), a run's bookkeeping around it (``runs``: which files
this framework wrote, what --resume checks), and what rebuilding a container from it needs
(``restore``: the class it records, the corpus it was trained on).

    from DLStudio.checkpoints import load_checkpoint, find_checkpoint
"""

from .files import (
    FORMAT,
    MANIFEST,
    WEIGHTS,
    CheckpointError,
    best_use,
    check_fits,
    checkpoint_files,
    checkpoint_path,
    find_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_into,
    make_payload,
    mark_written,
    save_checkpoint,
    save_final,
    saved_model_paths,
    weights_of,
    with_weights,
)
from .restore import (
    ClassNotFound,
    Restored,
    class_path,
    container_class,
    corpus_fits,
    corpus_of,
    import_class,
)
from .runs import (
    RESUME_KEYS,
    check_resumable,
    check_same_average,
    check_same_run,
    free_name,
    refuse_saved_model_of_theirs,
    refuse_theirs,
    written_here,
)

__all__ = ["FORMAT", "MANIFEST", "WEIGHTS", "CheckpointError", "best_use", "check_fits",
           "checkpoint_files", "checkpoint_path", "find_checkpoint", "list_checkpoints",
           "load_checkpoint", "load_into", "make_payload", "mark_written", "save_checkpoint",
           "save_final", "weights_of", "with_weights", "ClassNotFound", "Restored",
           "class_path", "container_class", "corpus_fits", "corpus_of", "import_class",
           "RESUME_KEYS", "check_resumable", "check_same_average", "check_same_run",
           "free_name", "refuse_saved_model_of_theirs", "refuse_theirs", "saved_model_paths",
           "written_here"]
