"""Floor 3, using a trained model: greedy and beam decoding, BLEU and accuracy
(``decode_and_score``), a GPT's text and perplexity (``generation``), pictures of attention
and embeddings (``visualize``).

    from DLStudio.evaluation import evaluate_bleu, greedy_decode
"""

from .decode_and_score import *  # noqa: F403  (as DLStudio.evaluation)
from .decode_and_score import __all__  # noqa: F401
