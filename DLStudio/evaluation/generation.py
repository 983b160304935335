"""A language model (TransformerGPT) at work: how well it predicts held-out text, and
continuing a prompt.

Perplexity is exp of the mean negative log-likelihood the model gives each next token of
held-out sentences (EOS included, so ending a sentence counts). Per piece, the mean is over
the tokens; per word, the same total is divided by the number of words (+1 for each EOS),
so that a word-level model and a BPE model (several pieces per rare word) can be compared:
for a word-level model both are the same number.

Generation feeds the model its own output, one token at a time, as translation does:
greedy (temperature 0: the most likely token), or sampled from softmax(logits / T),
optionally from the ``top_k`` most likely tokens only, or from the fewest whose
probabilities add up to ``top_p`` (nucleus sampling, Holtzman et al. 2020); a
``repetition_penalty`` > 1 makes tokens already in the text less likely (Keskar et al. 2019).
A real model's folder (containers/hub.py) brings its own start and end tokens and its
defaults (generation_config.json: `folder_defaults`). Inside ``gpt.decoding()`` each layer
keeps the keys and values of the tokens already read (DLStudio.model.kv_cache): the prompt is
read once, then each step computes one new position.
"""

import contextlib
import math
import warnings

import torch
import torch.nn.functional as F

from ..data import normalize
from ..data.vocabulary import plain_words
from ..model import left_padding
from ..model.tokens import EOS_INDEX, SOS_INDEX, padding_mask
from ..runtime import weight_layout

__all__ = ["encode_sentences", "perplexity", "folder_perplexity", "next_token", "generate",
           "generate_text", "prompt_ids", "encode", "decode", "folder_defaults", "penalised",
           "until_end", "not_applied", "sampling_ignored", "with_folder_defaults",
           "FOLDER_NEW_TOKENS", "cut_at", "steps", "stream_text", "Continuation",
           "LanguageModelUse", "PrefixCache"]


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
    if vocab.kind == "hub":
        return folder_perplexity(gpt, sentences, vocab, max_seq_length, batch_size)
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


@torch.no_grad()
def folder_perplexity(gpt, texts, vocab=None, max_seq_length=None, batch_size=16):
    """Perplexity of a real model (its folder's tokenizer, ``vocab``) on ``texts`` as
    transformers computes ``exp(model(ids, labels=ids).loss)``: each text's ids as the
    tokenizer gives them (its start token where its post-processor adds one), the text as
    written, every token after the first scored; several texts weighted by their tokens.
    Rows are padded to their batch's longest and the padding is never scored (causal
    attention: a position never reads the padding after it). A text of fewer than two
    tokens, or longer than ``max_seq_length`` (default: the model's), is skipped.

    Returns: as `perplexity` ("per_word": per whitespace-separated word; no EOS is added)
    """
    vocab = vocab if vocab is not None else gpt.vocab
    limit = max_seq_length or gpt.max_seq_length
    encoded = [(text, vocab.encode(text)) for text in texts]
    kept = [(text, ids) for text, ids in encoded if 2 <= len(ids) <= limit]
    if not kept:
        raise ValueError("no text to score: each has fewer than two tokens or is longer than "
                         f"the model's {limit}")
    was_training, device = gpt.training, next(gpt.parameters()).device
    gpt.eval()
    nll, pieces = 0.0, 0
    for at in range(0, len(kept), batch_size):
        rows = [ids for _, ids in kept[at:at + batch_size]]
        T = max(map(len, rows))
        ids = torch.tensor([r + [0] * (T - len(r)) for r in rows], device=device)    # (B, T)
        lengths = torch.tensor([len(r) for r in rows], device=device)
        scored = torch.arange(1, T, device=device) < lengths[:, None]          # (B, T - 1)
        total, count = gpt.loss(ids, keep=scored)
        nll, pieces = nll + float(total), pieces + count
    gpt.train(was_training)
    words = sum(len(text.split()) for text, _ in kept) or 1
    return {"per_piece": math.exp(nll / pieces), "per_word": math.exp(nll / words),
            "sentences": len(kept), "skipped": len(texts) - len(kept),
            "pieces": pieces, "words": words}


def next_token(logits, temperature=0.0, top_k=None, generator=None, top_p=None):
    """Greedy (temperature 0) or sampled from softmax(logits / temperature), among the
    ``top_k`` largest logits when given, then among the fewest likeliest tokens whose
    probabilities add up to ``top_p`` (the first always kept). Shape: logits (B, V) -> (B,)"""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k:
        kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]   # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)             # (B, V)
        probs = sorted_logits.softmax(dim=-1)
        dropped = probs.cumsum(dim=-1) - probs >= top_p       # the likelier ones reach top_p
        dropped[:, 0] = False                                 # the likeliest always stays
        logits = logits.masked_fill(torch.zeros_like(dropped).scatter(-1, order, dropped),
                                    float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(logits.device)


def penalised(logits, ys, penalty):
    """Each token already in ys made less likely: its logit divided by ``penalty`` where
    positive, multiplied where negative (CTRL, Keskar et al. 2019). Shape: (B, V), (B, t)"""
    seen = logits.gather(1, ys)                                                # (B, t)
    return logits.scatter(1, ys, torch.where(seen > 0, seen / penalty, seen * penalty))


@torch.no_grad()
def generate(gpt, prompt, max_new_tokens=None, temperature=0.0, top_k=None, generator=None,
             use_cache=True, top_p=None, repetition_penalty=1.0, end_ids=(EOS_INDEX,),
             on_token=None, ended=None, logprobs=None, pads=None, session=None):
    """Continue each row of ``prompt`` until it emits one of ``end_ids`` (none: until
    max_new_tokens) or max_seq_length is reached, or ``ended(ys)`` (B,) says it has ended
    (a stop string); ``on_token(ids)`` is called with each step's tokens (B,); ``logprobs``
    (a list) gets each step's log-probabilities of those tokens (B,) under the model's own
    distribution (before temperature, top-k, top-p and the repetition penalty). ``pads``
    (B,): rows padded on the left (inside model.left_padding.left_padded), each then
    reaching max_seq_length of its own tokens. ``session``: a `PrefixCache` whose caches
    already hold the start of ``prompt`` (one row), which is then not read again.

    ``use_cache=False`` re-reads the whole prefix at every step (what the cache saves; a
    test checks both give the same tokens).

    Shape: prompt (B, P) ids (SOS first, or a folder's own) -> (B, <= max_seq_length) ids,
        the prompt included, end_ids[0] after a row's end
    """
    ys = prompt
    for ys, logprob in steps(gpt, prompt, max_new_tokens, temperature, top_k, generator,
                             use_cache, top_p, repetition_penalty, end_ids, ended, pads,
                             session):
        if on_token is not None:
            on_token(ys[:, -1])
        if logprobs is not None:
            logprobs.append(logprob)
    return ys


def steps(gpt, prompt, max_new_tokens=None, temperature=0.0, top_k=None, generator=None,
          use_cache=True, top_p=None, repetition_penalty=1.0, end_ids=(EOS_INDEX,),
          ended=None, pads=None, session=None):
    """`generate`'s loop, one step at a time: yields (ys, the new tokens' log-probabilities
    (B,)) after each token (stopping early leaves the caches as they were). A row that has
    reached max_seq_length of its own tokens (``pads``: padded rows) ends there."""
    gpt.eval()
    ends = torch.tensor(list(end_ids), dtype=torch.long, device=prompt.device)
    ys, B = prompt, prompt.size(0)
    pads = torch.zeros(B, dtype=torch.long, device=ys.device) if pads is None else pads
    room = gpt.max_seq_length - (ys.size(1) - pads)                         # (B,)
    steps = int(room.max()) if max_new_tokens is None else min(int(room.max()),
                                                                max_new_tokens)
    done = torch.zeros(B, dtype=torch.bool, device=ys.device)
    scope = (contextlib.nullcontext(session.caches) if session is not None else
             gpt.decoding() if use_cache else contextlib.nullcontext([]))
    held = session.start(ys[0].tolist()) if session is not None else 0   # already read
    layout = weight_layout.read_by_columns(gpt, weight_layout.worth_it(gpt, B, steps))
    with scope as caches, layout:
        try:
            for step in range(steps):
                if caches and step > 0:
                    logits = gpt.decode_newest(ys)                          # (B, V)
                elif held:             # the tokens after those the caches hold, then logits
                    x = gpt.embeddings_generator(ys)[:, held:]             # (B, T - held, M)
                    logits = gpt.master_decoder(x, None)[:, -1]             # (B, V)
                else:
                    keep = torch.zeros(ys.shape, dtype=torch.bool, device=ys.device)
                    keep[:, -1] = True                       # logits of the last position
                    logits = gpt(ys, keep)                                  # (B, V)
                chosen_from = logits
                if repetition_penalty != 1.0:      # (a row's pads read as its first token)
                    first = torch.maximum(torch.arange(ys.size(1), device=ys.device)[None],
                                          pads[:, None])
                    logits = penalised(logits, ys.gather(1, first), repetition_penalty)
                token = next_token(logits, temperature, top_k, generator, top_p)   # (B,)
                logprob = chosen_from.float().log_softmax(-1).gather(1, token[:, None])[:, 0]
                if len(ends):                               # a row that has ended stays so
                    token = token.masked_fill(done, int(ends[0]))
                    done |= torch.isin(token, ends)
                ys = torch.cat([ys, token[:, None]], dim=1)
                if ended is not None:
                    done |= ended(ys)
                done |= step + 1 >= room                      # a row at max_seq_length
                yield ys, logprob
                if done.all():
                    break
        finally:          # a session's caches hold all but the newest token, once one came
            if session is not None and caches and ys.size(1) > prompt.size(1):
                session.ids = ys[0, :-1].tolist()


class PrefixCache:
    """A conversation's key/value caches, kept from one turn to the next: each turn the
    model reads only what follows the longest prefix its rendered conversation shares with
    the tokens the caches hold (a chat template may rewrite earlier turns, and a reply
    re-encoded may split otherwise: the shared tokens decide, not the last turn's length).

        with PrefixCache(gpt) as session:
            reply = gpt.generate(None, ids=ids, session=session)[0]      # each turn

    Where the model's classes would not read a cache (a student's), every turn reads all."""

    def __init__(self, gpt):
        self.gpt, self.ids, self.caches, self.scope = gpt, [], [], gpt.decoding()

    def __enter__(self):
        self.caches = self.scope.__enter__()
        return self

    def __exit__(self, *exc):
        return self.scope.__exit__(*exc)

    def start(self, row):
        """How many of ``row``'s tokens the caches hold (at most all but its last, whose
        logits are wanted); the caches are cut back to them."""
        shared = 0
        for held, new in zip(self.ids, row[:-1]):
            if held != new:
                break
            shared += 1
        shared = shared if self.caches else 0
        for cache in self.caches:
            cache.keep(shared)
        self.ids = self.ids[:shared]
        return shared


def until_end(ids, ends=(EOS_INDEX,)):
    """``ids`` up to the first of ``ends``, and that end token (None where none came)."""
    ids = [int(i) for i in ids]
    at = min((ids.index(e) for e in ends if e in ids), default=None)
    return (ids, None) if at is None else (ids[:at], ids[at])


def encode(gpt, text):
    """``gpt.encode``: the ids of ``text`` as a prompt: SOS first, normalised like the
    archive's text when the GPT was trained on an archive; a real model's: as its folder's
    tokenizer gives them (transformers' ids). Raises ValueError for unknown words."""
    if gpt.vocab.kind == "hub":
        return gpt.vocab.encode(text)
    text = normalize(text, expand=gpt.lang == "en") if gpt.archive_text else text
    words = plain_words(text)
    unknown = gpt.vocab.unknown(words)
    if unknown:
        raise ValueError(f"the prompt holds word(s) this word-level model never saw: "
                         f"{', '.join(map(repr, unknown))}")
    return [SOS_INDEX, *gpt.vocab.ids([" ".join(words)])[0]] if words else [SOS_INDEX]


def prompt_ids(gpt, prompt):
    """A prompt's ids (1, P) (`encode`; a real model's start token for an empty prompt).
    Raises ValueError for unknown words, a prompt too long, or an empty prompt to a folder
    that names no start token (transformers refuses it too: nothing to continue)."""
    ids = encode(gpt, prompt)
    if gpt.vocab.kind == "hub":
        if not ids and gpt.vocab.start_id is None:
            raise ValueError("this model's folder names no start token (bos_token_id) in its "
                             "vocabulary, so an empty prompt gives it nothing to continue: "
                             "give a prompt")
        ids = ids or [gpt.vocab.start_id]
        if len(ids) >= gpt.max_seq_length:
            raise ValueError(f"the prompt is {len(ids)} tokens; this model reads at most "
                             f"{gpt.max_seq_length}: give a shorter one")
    elif len(ids) >= gpt.max_seq_length:
        raise ValueError(f"the prompt is {len(ids) - 1} tokens; this model reads sentences of "
                         f"at most {gpt.max_seq_length - 2}: give a shorter one")
    return torch.tensor([ids], device=next(gpt.parameters()).device)


def decode(gpt, ids):
    """``gpt.decode``: the text of ids, without start, end or other special tokens."""
    ids = [int(i) for i in ids]
    if gpt.vocab.kind == "hub":
        return gpt.vocab.decode(ids)
    return gpt.vocab.text(until_end(ids[1:] if ids[:1] == [SOS_INDEX] else ids)[0])


#: New tokens a real model's continuation gets when neither the call nor its folder says.
FOLDER_NEW_TOKENS = 256
#: Settings of a generation_config.json that generation here does not apply.
NOT_APPLIED = ("min_p", "no_repeat_ngram_size", "typical_p", "epsilon_cutoff", "eta_cutoff",
               "num_beams", "length_penalty", "bad_words_ids", "suppress_tokens",
               "begin_suppress_tokens", "forced_bos_token_id", "forced_eos_token_id",
               "min_length", "min_new_tokens", "exponential_decay_length_penalty",
               "encoder_repetition_penalty", "guidance_scale", "sequence_bias")
#: Values of those that change nothing (transformers' defaults).
NEUTRAL = {"min_p": None, "no_repeat_ngram_size": 0, "typical_p": 1.0, "epsilon_cutoff": 0.0,
           "eta_cutoff": 0.0, "num_beams": 1, "length_penalty": 1.0, "min_length": 0,
           "min_new_tokens": None, "encoder_repetition_penalty": 1.0, "guidance_scale": None}


def folder_defaults(gpt):
    """A real model's generation settings as its generation_config.json gives them
    (transformers' defaults where it is silent: greedy unless do_sample, then top_k 50),
    with ``max_length`` (prompt included) where it sets one; `not_applied` names the rest."""
    config = getattr(gpt, "generation_config", None) or {}
    found = {"repetition_penalty": config.get("repetition_penalty") or 1.0}
    if config.get("do_sample"):
        found.update(temperature=config.get("temperature", 1.0), top_k=config.get("top_k", 50),
                     top_p=config.get("top_p", 1.0))
    if config.get("max_new_tokens"):
        found["max_new_tokens"] = config["max_new_tokens"]
    elif config.get("max_length"):
        found["max_length"] = config["max_length"]
    return found


def with_folder_defaults(gpt, options):
    """``options`` over `folder_defaults` (a folder's sampling settings left out where the
    options ask for greedy decoding: they would change nothing)."""
    found = folder_defaults(gpt)
    if "temperature" in options and (options["temperature"] or 0) <= 0:
        found = {k: v for k, v in found.items() if k not in ("top_k", "top_p")}
    return {**found, **options}


def not_applied(gpt):
    """The settings of a folder's generation_config.json that generation here ignores
    (with a value that would change the text), by name: what a script says once."""
    config = getattr(gpt, "generation_config", None) or {}
    return [f"{name} {config[name]!r}" for name in NOT_APPLIED
            if config.get(name) not in (None, NEUTRAL.get(name), [], {})]


def sampling_ignored(temperature, top_k, top_p):
    """The line to say when top_k or top_p is given to greedy decoding (None: nothing to
    say): greedy takes the likeliest token, so they change nothing."""
    given = [f"{name} {value}" for name, value in (("top_k", top_k), ("top_p", top_p))
             if value not in (None, 0, 1.0)]
    if (temperature or 0) > 0 or not given:
        return None
    return (f"{' and '.join(given)} ignored: temperature 0 decodes greedily (the likeliest "
            "token); give a temperature above 0 to sample")


def generate_text(gpt, prompt, num_samples=1, max_new_tokens=None, temperature=0.0,
                  top_k=None, seed=None, use_cache=True, top_p=None, repetition_penalty=1.0,
                  on_token=None, ids=None, max_length=None, stop=(), logprobs=False,
                  batch_size=None, session=None):
    """Continue a prompt (a string, possibly empty; or ``ids``, a list): ``num_samples``
    sentences (the prompt included), as text; a real model's: the continuation only,
    as its folder's tokenizer writes it. With ``logprobs``: each sample as (text, [(piece,
    log-probability), ...]), a pair for each new token up to its end (the model's own
    log-probability of the token chosen, whatever the sampling settings).

    A list of prompts is continued together, ``batch_size`` at a time (all at once by
    default), each row padded on the left to the longest (model/left_padding.py): one text
    per prompt and sample, in order, each what its prompt gives alone. ``session``: a
    `PrefixCache` kept across the turns of a conversation (one prompt, one sample).

    Length: our own model's ends at EOS or at its max_seq_length; a real model's at one of
    its folder's end tokens (none named: never) or after ``max_new_tokens`` new tokens, or
    at ``max_length`` tokens with the prompt; with neither given, FOLDER_NEW_TOKENS (256)
    new tokens; or where its continuation holds one of the ``stop`` strings (a blank line,
    say), which is cut off with what follows it. top_k or top_p with temperature 0 are
    ignored, with a warning saying so.
    """
    generator = _sampling(temperature, top_k, top_p, seed)
    prompts = list(prompt) if isinstance(prompt, (list, tuple)) else [prompt]
    size = batch_size or len(prompts) or 1
    out = []
    for at in range(0, len(prompts), size):
        run = Continuation(gpt, prompts[at:at + size], num_samples, max_new_tokens, ids,
                           max_length, stop)
        kept = [] if logprobs else None
        with run.padded():
            ys = generate(gpt, run.ids, run.max_new_tokens, temperature, top_k, generator,
                          use_cache, top_p, repetition_penalty, run.ends, on_token,
                          run.ended, kept, run.pads, session)
        rows = run.rows(ys)
        texts = [run.text(b, row) for b, row in enumerate(rows)]
        if not logprobs:
            out += texts
            continue
        scores = torch.stack(kept, 1).tolist() if kept else [[] for _ in texts]  # (B, new)
        out += [(text, run.pieces(b, row, score))
                for b, (text, row, score) in enumerate(zip(texts, rows, scores))]
    return out


def stream_text(gpt, prompt, max_new_tokens=None, temperature=0.0, top_k=None, seed=None,
                use_cache=True, top_p=None, repetition_penalty=1.0, ids=None, max_length=None,
                stop=()):
    """``gpt.stream``: the continuation of `generate_text` (one prompt, one sample), yielded
    in pieces as it forms: ``for piece in gpt.stream(prompt): print(piece, end="")``. A
    piece holds whole characters only (a character of several bytes waits for its last
    token), and never the start of a stop string (held back until it is told apart); the
    pieces joined are generate_text's text."""
    generator = _sampling(temperature, top_k, top_p, seed)
    run = Continuation(gpt, [prompt], 1, max_new_tokens, ids, max_length, stop)
    held = max((len(s) for s in run.stop), default=1) - 1     # might begin a stop string
    shown, ys = 0, run.ids
    for ys, _ in steps(gpt, run.ids, run.max_new_tokens, temperature, top_k, generator,
                       use_cache, top_p, repetition_penalty, run.ends, run.ended):
        text = run.text(0, ys[0].tolist())
        ready = len(text) - held
        while ready > shown and text[ready - 1] == "\ufffd":  # a character not yet whole
            ready -= 1
        if ready > shown:
            yield text[shown:ready]
            shown = ready
    text = run.text(0, ys[0].tolist())
    if len(text) > shown:
        yield text[shown:]


def _sampling(temperature, top_k, top_p, seed):
    """The random generator of ``seed`` (None without one), after warning where top_k or
    top_p would change nothing (`sampling_ignored`)."""
    said = sampling_ignored(temperature, top_k, top_p)
    if said:
        warnings.warn(said, stacklevel=3)
    return torch.Generator().manual_seed(seed) if seed is not None else None


class Continuation:
    """What generate_text and stream_text share: the prompts' ids, ``num_samples`` rows each
    (padded on the left where their lengths differ), their end tokens, their length in new
    tokens, the stop strings, and the text of a row."""

    def __init__(self, gpt, prompts, num_samples, max_new_tokens, ids, max_length, stop):
        self.gpt, self.hub = gpt, gpt.vocab.kind == "hub"
        device = next(gpt.parameters()).device
        rows = ([prompt_ids(gpt, p)[0].tolist() for p in prompts] if ids is None
                else [list(ids)])
        if ids is not None and not 0 < len(ids) < gpt.max_seq_length:
            raise ValueError(f"the prompt is {len(ids)} tokens; this model continues prompts "
                             f"of 1 to {gpt.max_seq_length - 1}: give "
                             f"{'one' if not ids else 'a shorter one'}")
        rows = [row for row in rows for _ in range(num_samples)]
        self.P = [len(row) for row in rows]
        self.ids, self.pads = left_padding.padded_rows(rows, rows[0][0], device)
        if self.hub and max_new_tokens is None:
            max_new_tokens = (max(1, max_length - max(self.P)) if max_length
                              else FOLDER_NEW_TOKENS)
        self.max_new_tokens = max_new_tokens
        self.ends = gpt.vocab.end_ids if self.hub else (EOS_INDEX,)
        self.stop = [s for s in ([stop] if isinstance(stop, str) else stop) if s]
        self.start = [0 if self.hub else len(self.whole(b, row))   # where each continuation
                      for b, row in enumerate(rows)]              # begins in its text
        self.ended = self.stopped if self.stop else None

    def padded(self):
        """The scope of the model reading these rows: left-padded where they need it."""
        if not self.pads.any():
            return contextlib.nullcontext()
        return left_padding.left_padded(self.gpt, self.pads)

    def rows(self, ys):
        """The rows of ys (B, T) as lists, without their padding, up to max_seq_length."""
        most = self.gpt.max_seq_length
        return [row[pad:pad + most] for row, pad in zip(ys.tolist(), self.pads.tolist())]

    def whole(self, b, row):        # a folder's: its continuation; ours: the whole sentence
        if self.hub:
            return continuation(self.gpt.vocab, row[:self.P[b]],
                                until_end(row[self.P[b]:], self.ends)[0])
        return self.gpt.vocab.text(until_end(row[1:])[0])

    def text(self, b, row):
        """Row b's text, cut at the first stop string of its continuation."""
        return cut_at(self.whole(b, row), self.stop, self.start[b])

    def stopped(self, ys):          # the rows whose continuation holds a stop string
        return torch.tensor([any(s in self.whole(b, row)[self.start[b]:] for s in self.stop)
                             for b, row in enumerate(self.rows(ys))], device=ys.device)

    def pieces(self, b, row, scores):
        """(piece, log-probability) for each new token of row b up to its end."""
        kept, _ = until_end(row[self.P[b]:], self.ends)
        return [(self.gpt.decode([token]) if self.hub else self.gpt.vocab.text([token]),
                 float(score)) for token, score in zip(kept, scores)]


def continuation(vocab, prompt, new):
    """The text ``new`` adds to ``prompt``, as transformers shows it: the whole decoded less
    the prompt's decoding. Decoded alone, a SentencePiece continuation loses the space in
    front of its first word (the decoder strips one from the start of a text)."""
    whole, before = vocab.decode(list(prompt) + list(new)), vocab.decode(prompt)
    return whole[len(before):] if whole.startswith(before) else vocab.decode(new)


def cut_at(text, stop, start=0):
    """``text`` up to the first of the ``stop`` strings it holds from ``start`` on (all of
    it where none)."""
    found = [text.find(s, start) for s in stop]
    return text[:min((at for at in found if at >= 0), default=len(text))]


class LanguageModelUse:
    """What a TransformerGPT does with text: score it, continue it, stream it, and turn it
    into ids and back (this module's functions, as methods)."""

    def perplexity(self, sentences=None):
        """Perplexity on the held-out sentences (or ``sentences``), per piece and per word."""
        return perplexity(self, self.held_out_sentences if sentences is None else sentences)

    def generate(self, prompt, **options):
        """Continue ``prompt`` (a string); see `generate_text` for the options (a real
        model's defaults: its folder's, `with_folder_defaults`)."""
        return generate_text(self, prompt, **with_folder_defaults(self, options))

    def stream(self, prompt, **options):
        """``for piece in gpt.stream(prompt): print(piece, end="", flush=True)``: the text of
        `generate` as it forms, in whole characters (`stream_text`; one sample)."""
        return stream_text(self, prompt, **with_folder_defaults(self, options))

    def encode(self, text):
        """``text`` as a prompt's ids: SOS first (a folder's: as its tokenizer adds them)."""
        return encode(self, text)

    def decode(self, ids):
        """The text of ``ids``, without start, end or other special tokens."""
        return decode(self, ids)
