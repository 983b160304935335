"""Floor 1, the model: ``architecture.py`` (every nested class in the lecture's order, built
from sizes, torch only; the file to open first) and the torch-only helpers it uses: masks
(``tokens``), the key/value cache, override detection, the attention recorder."""
