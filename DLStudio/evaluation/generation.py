"""A language model (TransformerGPT) at work: how well it predicts held-out text, and
continuing a prompt.

Perplexity is exp of the mean negative log-likelihood the model gives each next token of
held-out sentences (EOS included, so ending a sentence counts). Per piece, the mean is over
the tokens; per word, the same total is divided by the number of words (+1 for each EOS),
so that a word-level model and a BPE model (several pieces per rare word) can be compared:
for a word-level model both are the same number.

Generation feeds the model its own output, one token at a time, as translation does:
greedy (temperature 0: the most likely token), or sampled from softmax(logits / T),
optionally from the ``top_k`` most likely tokens only. Inside ``gpt.decoding()`` each layer
keeps the keys and values of the tokens already read (DLStudio.model.kv_cache): the prompt is
read once, then each step computes one new position.
"""

import contextlib
import math

import torch
import torch.nn.functional as F

from ..data import normalize
from ..data.vocabulary import plain_words
from ..model.tokens import EOS_INDEX, SOS_INDEX, padding_mask

__all__ = ["encode_sentences", "perplexity", "next_token", "generate", "generate_text",
           "prompt_ids"]


def encode_sentences(tokenizer, sentences, max_seq_length):
    """SOS, the tokens, EOS, EOS-padded: (N, max_seq_length), and which sentences fitted
    (a sentence longer than max_seq_length is left out)."""
    rows, fitted = [], []
    for sentence, ids in zip(sentences, tokenizer.ids([" ".join(plain_words(s))
                                                       for s in sentences])):
        ids = [SOS_INDEX, *ids, EOS_INDEX]
        if len(ids) <= max_seq_length:
            rows.append(ids + [EOS_INDEX] * (max_seq_length - len(ids)))
            fitted.append(sentence)
    return torch.tensor(rows, dtype=torch.long).view(-1, max_seq_length), fitted


@torch.no_grad()
def perplexity(gpt, sentences, vocab=None, max_seq_length=None, batch_size=256):
    """Perplexity of ``gpt`` on ``sentences`` (strings), per piece and per word, read with
    ``vocab`` into at most ``max_seq_length`` tokens (default: the GPT's own).

    Returns: {"per_piece", "per_word", "sentences" (scored), "skipped" (too long, or with a
    word a word-level tokenizer lacks), "pieces", "words"}
    """
    vocab = vocab if vocab is not None else gpt.vocab
    known = [s for s in sentences if not vocab.unknown(plain_words(s))]
    ids, fitted = encode_sentences(vocab, known, max_seq_length or gpt.max_seq_length)
    if not fitted:
        raise ValueError("no sentence to score: each is too long for the model or holds an "
                         "unknown word")
    was_training, device = gpt.training, next(gpt.parameters()).device
    gpt.eval()
    nll, pieces = 0.0, 0
    for chunk in ids.split(batch_size):
        T = int((~padding_mask(chunk)).sum(1).max())
        chunk = chunk[:, :T].to(device)
        inputs, labels = chunk[:, :-1], chunk[:, 1:]                       # (B, T - 1)
        keep = ~padding_mask(labels)
        logits = gpt(inputs, keep)                                         # (N, V)
        nll += F.cross_entropy(logits.float(), labels[keep], reduction="sum").item()
        pieces += int(keep.sum())
    gpt.train(was_training)
    words = sum(len(plain_words(s)) + 1 for s in fitted)                  # + EOS each
    return {"per_piece": math.exp(nll / pieces), "per_word": math.exp(nll / words),
            "sentences": len(fitted), "skipped": len(sentences) - len(fitted),
            "pieces": pieces, "words": words}


def next_token(logits, temperature=0.0, top_k=None, generator=None):
    """Greedy (temperature 0) or sampled from softmax(logits / temperature), among the
    ``top_k`` largest logits when given. Shape: logits (B, V) -> (B,)"""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k:
        kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]   # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(logits.device)


@torch.no_grad()
def generate(gpt, prompt, max_new_tokens=None, temperature=0.0, top_k=None, generator=None,
             use_cache=True):
    """Continue each row of ``prompt`` until it emits EOS (or max_seq_length is reached).

    ``use_cache=False`` re-reads the whole prefix at every step (what the cache saves; a
    test checks both give the same tokens).

    Shape: prompt (B, P) ids starting with SOS -> (B, <= max_seq_length) ids, the prompt
        included, EOS after a row's end
    """
    gpt.eval()
    ys, B = prompt, prompt.size(0)
    room = gpt.max_seq_length - ys.size(1)
    steps = room if max_new_tokens is None else min(room, max_new_tokens)
    done = torch.zeros(B, dtype=torch.bool, device=ys.device)
    scope = gpt.decoding() if use_cache else contextlib.nullcontext([])
    with scope as caches:
        for step in range(steps):
            if caches and step > 0:
                logits = gpt.decode_newest(ys)                              # (B, V)
            else:
                keep = torch.zeros(ys.shape, dtype=torch.bool, device=ys.device)
                keep[:, -1] = True                           # logits of the last position
                logits = gpt(ys, keep)                                      # (B, V)
            token = next_token(logits, temperature, top_k, generator)       # (B,)
            token = token.masked_fill(done, EOS_INDEX)
            ys = torch.cat([ys, token[:, None]], dim=1)
            done |= token == EOS_INDEX
            if done.all():
                break
    return ys


def prompt_ids(gpt, prompt):
    """A prompt's ids (1, P), SOS first; normalised like the archive's text when the GPT
    was trained on an archive. Raises ValueError for unknown words or a prompt too long."""
    text = normalize(prompt, expand=gpt.lang == "en") if gpt.archive_text else prompt
    words = plain_words(text)
    unknown = gpt.vocab.unknown(words)
    if unknown:
        raise ValueError(f"the prompt holds word(s) this word-level model never saw: "
                         f"{', '.join(map(repr, unknown))}")
    ids = [SOS_INDEX, *gpt.vocab.ids([" ".join(words)])[0]] if words else [SOS_INDEX]
    if len(ids) >= gpt.max_seq_length:
        raise ValueError(f"the prompt is {len(ids) - 1} tokens; this model reads sentences of "
                         f"at most {gpt.max_seq_length - 2}: give a shorter one")
    return torch.tensor([ids], device=next(gpt.parameters()).device)


def generate_text(gpt, prompt, num_samples=1, max_new_tokens=None, temperature=0.0,
                  top_k=None, seed=None, use_cache=True):
    """Continue a prompt (a string, possibly empty): ``num_samples`` sentences (the prompt
    included), as text."""
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    ids = prompt_ids(gpt, prompt).repeat(num_samples, 1)
    out = generate(gpt, ids, max_new_tokens, temperature, top_k, generator, use_cache)
    texts = []
    for row in out.tolist():
        body = row[1:]
        body = body[:body.index(EOS_INDEX)] if EOS_INDEX in body else body
        texts.append(gpt.vocab.text(body))
    return texts
