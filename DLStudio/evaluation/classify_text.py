"""Using a BERT: the probability of each label for texts (or pairs of texts), and the
likeliest tokens where a text says [MASK]. The tokenizer is the model's (a
data.bert_text.SpecialTokenizer); texts are laid out as the model was trained."""

import torch

__all__ = ["class_probabilities", "predict_rows", "fill_mask", "text_ids",
           "decoder_probabilities"]


@torch.no_grad()
def class_probabilities(model, ids, segments, batch_size=256):
    """Shape: ids, segments (B, T) -> (B, K) probabilities, each row summing to 1."""
    model.eval()
    device = next(model.parameters()).device
    out = [torch.softmax(model(ids[i:i + batch_size].to(device),
                               segments[i:i + batch_size].to(device), None,
                               "classifier").float(), -1).cpu()
           for i in range(0, len(ids), batch_size)]
    return torch.cat(out) if out else torch.zeros(0, model.classifier.out_features)


def predict_rows(model, ids, segments, batch_size=256):
    """The likeliest label's index of each row. Shape: (B, T) -> (B,)"""
    return class_probabilities(model, ids, segments, batch_size).argmax(-1)


@torch.no_grad()
def fill_mask(model, tok, text, top=5):
    """For each [MASK] of ``text`` (the literal token, found before anything else reads the
    text), the ``top`` likeliest tokens and their probabilities: a list (a [MASK] each) of
    [(token as text, probability)]. Raises ValueError when the text has no [MASK]."""
    model.eval()
    ids, segments = tok.layout([text], max_len=model.max_seq_length)
    where = (ids[0] == tok.mask_id).nonzero().flatten()
    if not len(where):
        raise ValueError(f"{text!r} has no [MASK] to fill: write [MASK] where a word "
                         "should go, e.g. \"the dog [MASK] the ball\"")
    device = next(model.parameters()).device
    logits = model(ids.to(device), segments.to(device)).float()[0, where]       # (n, V)
    logits[:, tok.special_ids] = float("-inf")         # a word, never [PAD] or [MASK]
    probs = torch.softmax(logits, -1).cpu()
    best = probs.topk(min(top, probs.size(-1)), dim=-1)
    return [[(tok.text([i]).strip() or tok.pieces[i], p) for i, p in
             zip(row_ids.tolist(), row_p.tolist())]
            for row_ids, row_p in zip(best.indices, best.values)]


# ------------------------------------------------------------------------------------------
# A classifier on a decoder (model/decoder_head.py).

def text_ids(gpt, text, second=None, limit=None):
    """A text (and a second one, on a new line) as a decoder classifier reads it: its ids,
    the model's end token last; cut to ``limit`` tokens (default: the model's), the end
    token kept. Raises ValueError for a word a word-level model never saw."""
    from ..model.tokens import EOS_INDEX
    from .generation import encode
    whole = text if second is None else f"{text}\n{second}"
    if gpt.vocab.kind == "hub":
        ids = gpt.vocab.encode(whole)
        end = gpt.vocab.end_ids[0] if gpt.vocab.end_ids else None
    else:
        ids, end = encode(gpt, whole.replace("\n", " ")), EOS_INDEX
    limit = min(limit or gpt.max_seq_length, gpt.max_seq_length)
    if end is not None:
        ids = ids[:limit - 1] + [end]
    return ids[:limit] or [end if end is not None else 0]


def padded_rows(rows, device):
    """ids (B, T) right-padded with 0 (never read: the last real token looks back only),
    and each row's length (B,)."""
    T = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (T - len(r)) for r in rows], device=device)
    return ids, torch.tensor([len(r) for r in rows], device=device)


@torch.no_grad()
def decoder_probabilities(gpt, texts, seconds=None, batch_size=64):
    """Each label's probability for each text (or pair): (N, K), rows summing to 1."""
    if not getattr(gpt, "labels", None):
        raise ValueError("this GPT has no classifier: fine-tune one (finetune_lm.py "
                         "--classify)")
    was, device = gpt.training, next(gpt.parameters()).device
    gpt.eval()
    rows = [text_ids(gpt, t, None if seconds is None else seconds[i])
            for i, t in enumerate(texts)]
    out = []
    for at in range(0, len(rows), batch_size):
        ids, lengths = padded_rows(rows[at:at + batch_size], device)
        out.append(torch.softmax(gpt.class_logits(ids, lengths).float(), -1).cpu())
    gpt.train(was)
    return torch.cat(out) if out else torch.zeros(0, len(gpt.labels))
