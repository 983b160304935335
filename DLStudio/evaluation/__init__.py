"""Floor 3, using a trained model: greedy and beam decoding, BLEU and accuracy
(``decode_and_score``), a GPT's text and perplexity (``generation``), the pictures
(``visualize``) and the attention explorer's page (``explorer_page``).

    from DLStudio.evaluation import evaluate_bleu, greedy_decode
"""

from .decode_and_score import (
    LENGTH_PENALTY,
    beam_search,
    beam_step,
    bleu_scores,
    classify,
    confusion_matrix,
    evaluate_bleu,
    format_confusion,
    greedy_decode,
    held_out_references,
    length_normalised,
    translate_ids,
    translate_sentences,
)

__all__ = ["LENGTH_PENALTY", "greedy_decode", "beam_step", "length_normalised", "beam_search",
           "translate_ids", "translate_sentences", "held_out_references", "bleu_scores",
           "evaluate_bleu", "classify", "confusion_matrix", "format_confusion"]
