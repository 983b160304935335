"""A classifier on a decoder (GPT-1's fine-tuning, Radford et al. 2018, sec. 3.2): the
stack's output at a text's last token, which has read the whole text, goes through one
linear layer to a score for each class.

    token ids ──> EmbeddingsGenerator ──> N x BasicDecoderWithMasking ──> final norm
    (B, T)                                                                  (B, T, M)
                          the state at each row's last token (B, M) ──> ClassifyingHead
                                                                          (B, K) classes

The output layer over the vocabulary is not used. A text ends with the model's end token,
so that every text's last token is one the model has learnt to read as an end.
"""

import torch
import torch.nn as nn

from .tokens import causal_mask

__all__ = ["ClassifyingHead", "DecoderClassifying"]


class ClassifyingHead(nn.Module):
    """One linear layer from the last token's state to the classes' scores.

    Shape: (B, M) -> (B, K)
    """

    def __init__(self, embedding_size, num_classes):
        super().__init__()
        self.proj = nn.Linear(embedding_size, num_classes)

    def forward(self, state):
        return self.proj(state)


class DecoderClassifying:
    """A classifier on a GPT (a container mixin: ``self.master_decoder``,
    ``self.embeddings_generator``)."""

    ClassifyingHead = ClassifyingHead

    def add_classifier(self, labels):
        """A `ClassifyingHead` (the class's nested one) for ``labels``, on the model's device;
        its weights learn, the others as they were."""
        labels = tuple(labels)
        if len(labels) < 2:
            raise ValueError(f"a classifier needs two labels or more, got {labels}")
        device = next(self.parameters()).device
        self.labels = labels
        self.classifier = self.ClassifyingHead(self.embedding_size, len(labels)).to(device)
        return self.classifier

    def last_states(self, ids, lengths):
        """The stack's output, after its final norm, at each row's last token: (B, M).
        Shape: ids (B, T) right-padded, lengths (B,)"""
        decoder = self.master_decoder
        x = self.embeddings_generator(ids)
        mask = causal_mask(ids.size(1), ids.device) if ids.size(1) > 1 else None
        for layer in decoder.basic_decoder_arr:
            x = layer(x, None, mask)                                       # (B, T, M)
        x = decoder.final_norm(x)
        return x[torch.arange(len(ids), device=ids.device), lengths - 1]   # (B, M)

    def class_logits(self, ids, lengths):
        """Each row's score for each label. Shape: (B, T), (B,) -> (B, K)"""
        return self.classifier(self.last_states(ids, lengths))
