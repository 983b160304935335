"""Translation (greedy and beam search) and BLEU.

Translation is autoregressive: the decoder starts from SOS, predicts one word, and that word
is fed back as input for the next, until EOS (or max_seq_length). Sentences are translated
in batches; in greedy decoding a finished sentence leaves the batch. Inside
``model.decoding()`` every attention of the decoder keeps the keys and values of the words
already read (DLStudio.model.kv_cache), so each step computes one new position instead of the
whole prefix again; a student's decoder class that would not read them is run on the whole
prefix instead.

BLEU is computed on the held-out split, one hypothesis per distinct English sentence,
against every Spanish translation of that sentence in the archive:
    - NLTK ``corpus_bleu``: 4-gram, uniform weights, smoothing ``method1`` (epsilon 0.1
      for an n-gram order with no match), on whitespace tokens; reported x 100;
    - sacreBLEU's corpus score (its default 13a tokenisation and exp smoothing) with its
      signature. It is computed on the archive's text (lower case, punctuation removed,
      contractions expanded), so it compares runs on the same archive and split, not with
      papers' cased, detokenised test sets.
"""

import math
import random
from collections import OrderedDict

import torch

from ..checkpoints import free_name, mark_written
from ..model.tokens import EOS_INDEX, SOS_INDEX
from ..quick import HELD_OUT, quick
from ..runtime.precision import Precision
from .folder_rules import FinishedApart

#: beam search's default alpha: hypotheses are ranked by log p / length^alpha (the value of
#: Wu et al. 2016); every script's --length-penalty starts here.
LENGTH_PENALTY = 0.6

__all__ = ["LENGTH_PENALTY", "greedy_decode", "beam_step", "length_normalised", "beam_search",
           "translate_ids", "translate_sentences", "held_out_references", "bleu_scores",
           "evaluate_bleu", "translation_loss", "classify", "confusion_matrix",
           "format_confusion"]


class _NextWord:
    """Logits of the next word after ``ys`` (B, t): with the caches of ``model.decoding()``
    from the newest word only (one position of work per step), else by re-running the
    decoder on the whole prefix."""

    def __init__(self, model, memory, cross_mask, caches):
        self.model, self.memory, self.cross_mask, self.caches = model, memory, cross_mask, caches

    def __call__(self, ys):
        if self.caches:
            return self.model.decode_newest(ys, self.memory, self.cross_mask)  # (B, V_es)
        keep = torch.zeros(ys.shape, dtype=torch.bool, device=ys.device)
        keep[:, -1] = True                         # logits for the last position only
        return self.model.decode(ys, self.memory, self.cross_mask, keep)  # (B, V_es)

    def keep_rows(self, rows):
        """Greedy decoding: go on with these sentences only (the others have finished).
        Shape: rows (B_new,) indices."""
        self.memory, self.cross_mask = self.memory[rows], self.cross_mask[rows]
        for cache in self.caches:
            cache.select(rows)

    def reorder(self, origin):
        """Beam search: hypothesis i continues hypothesis origin[i], of the same sentence,
        whose memory is the same: only the self-attention caches move."""
        for cache in self.caches:
            if not cache.of_memory:
                cache.select(origin)


@torch.no_grad()
def greedy_decode(model, src, max_len, stop_at_eos=True, rules=None):
    """The most likely next word, fed back, until every sentence has emitted EOS. A
    sentence that has finished leaves the batch, so the steps after it cost nothing for it.

    ``stop_at_eos=False`` makes every sentence run all max_len - 1 steps (for benchmarks
    that must compare the same amount of work); ``rules``: a real model's folder's
    (folder_rules.GenerationRules), applied to each step's logits.

    Shape: src (B, T_src) -> (B, <= max_len - 1) predicted ids (EOS after the sentence end)
    """
    memory, cross_mask = model.encode(src)                             # (B, T_src, M)
    B, (start, end) = src.size(0), special_ids(model)
    out = torch.full((B, max_len - 1), end, dtype=torch.long, device=src.device)
    rows = torch.arange(B, device=src.device)        # the sentences still being translated
    ys = torch.full((B, 1), start, dtype=torch.long, device=src.device)
    steps = 0
    with model.decoding() as caches:
        next_word_logits = _NextWord(model, memory, cross_mask, caches)
        for t in range(max_len - 1):
            logits = next_word_logits(ys)                                 # (B_t, V_es)
            if rules is not None:              # a folder's: banned, forced tokens
                logits = rules(ys, logits.float())
            next_word = logits.argmax(dim=-1)                             # (B_t,)
            out[rows, t] = next_word
            steps = t + 1
            going = next_word != end                                      # (B_t,)
            if stop_at_eos and not going.all():
                if not going.any():
                    break
                rows, ys, next_word = rows[going], ys[going], next_word[going]
                next_word_logits.keep_rows(going.nonzero().squeeze(1))
            ys = torch.cat([ys, next_word[:, None]], dim=1)               # (B_t, t + 2)
    return out[:, :steps]


def special_ids(model):
    """The ids a model's decoder starts from and its sentences end with: DLStudio's SOS and
    EOS, or a real model's own (EncoderDecoder.start_id, end_id)."""
    return getattr(model, "start_id", SOS_INDEX), getattr(model, "end_id", EOS_INDEX)


def beam_step(scores, logp, finished, end_id=EOS_INDEX):
    """One step of beam search: of the K V ways to extend the K hypotheses of a sentence by
    one word, keep the K of highest log-probability. A finished hypothesis (it emitted
    EOS: ``end_id``) is extended by EOS only, at no cost, so that it keeps its score.

    Shape: scores (B, K) each hypothesis's log-probability so far (-inf: an empty slot),
        logp (B, K, V) log-probabilities of its next word, finished (B, K)
        -> scores (B, K), origin (B, K) the hypothesis (0..K-1) each new one extends,
        word (B, K) the word it adds
    """
    B, K, V = logp.shape
    logp = logp.clone()
    logp[finished] = float("-inf")                 # a finished hypothesis only repeats
    logp[finished, end_id] = 0.0                   # EOS, at no cost
    candidates = (scores[..., None] + logp).view(B, K * V)
    scores, flat = candidates.topk(K, dim=1)                               # (B, K)
    return scores, flat // V, flat % V


def length_normalised(scores, lengths, alpha):
    """The score a finished search ranks hypotheses by: log-probability / length^alpha,
    so that a longer translation is not beaten by a short one merely for having fewer words
    to pay for (alpha 0: no penalty; 1: the mean log-probability per word).

    Shape: scores, lengths (..., K) (lengths in words, EOS included) -> (..., K)
    """
    return scores / lengths.clamp(min=1) ** alpha


@torch.no_grad()
def beam_search(model, src, max_len, beam_width=4, length_penalty=LENGTH_PENALTY, stop_at_eos=True,
                step=beam_step, rank=length_normalised, hypotheses=None, rules=None):
    """Keep the ``beam_width`` best partial translations of each sentence at every step.

    A finished hypothesis (it emitted EOS) keeps its score; at the end, hypotheses are
    ranked by log-probability / length^length_penalty. ``beam_width=1`` is greedy decoding.
    A sentence whose every hypothesis has finished leaves the batch, as in greedy decoding
    (``stop_at_eos=False``: every sentence runs all max_len - 1 steps, for benchmarks).
    ``step`` and ``rank``: `beam_step` and `length_normalised`, or a student's.
    ``hypotheses`` (a dict): gets, for each sentence index, its K final hypotheses as
    (ids, log-probability, ranking score), best first (for the attention explorer).
    ``rules``: a real model's folder's (folder_rules.GenerationRules), applied to each step's
    log-probabilities; its finished hypotheses are kept apart from the beam as transformers
    keeps them (folder_rules.FinishedApart: its length_penalty and early_stopping).

    Shape: src (B, T_src) -> (B, <= max_len - 1) predicted ids (EOS after the sentence end)
    """
    K = beam_width
    memory, cross_mask = model.encode(src)                                 # (B, T_src, M)
    B, device, (start, end) = src.size(0), src.device, special_ids(model)
    ends = {} if end == EOS_INDEX else {"end_id": end}     # (a student's step knows EOS)
    memory = memory.repeat_interleave(K, dim=0)                            # (B K, T_src, M)
    cross_mask = cross_mask.repeat_interleave(K, dim=0)                    # (B K, 1, 1, T_src)
    out = torch.full((B, max_len - 1), end, dtype=torch.long, device=device)
    sentences = torch.arange(B, device=device)       # the sentences still being searched
    ys = torch.full((B * K, 1), start, dtype=torch.long, device=device)
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0                                  # start from one hypothesis per sentence
    apart = None if rules is None or not rules.finished_apart else \
        FinishedApart(B, K, max_len - 1, rules, device)
    if apart is not None:
        scores = apart.first_scores(B)
    finished = torch.zeros(B * K, dtype=torch.bool, device=device)
    lengths = torch.zeros(B * K, device=device)
    steps = 0
    with model.decoding() as caches:
        next_word_logits = _NextWord(model, memory, cross_mask, caches)
        for t in range(max_len - 1):
            B_t = len(sentences)
            logits = next_word_logits(ys)                                  # (B_t K, V_es)
            logp = torch.log_softmax(logits.float(), dim=-1)               # (B_t K, V_es)
            logp = (logp if rules is None else rules(ys, logp)).view(B_t, K, -1)
            last = t == max_len - 2                      # the last step ends every search
            if apart is None:
                scores, origin, word = step(scores, logp, finished.view(B_t, K), **ends)
            else:                                        # transformers' bookkeeping
                scores, origin, word = apart.step(scores, logp, ys, sentences, t, last)
            origin = (torch.arange(B_t, device=device)[:, None] * K + origin).view(-1)
            word = word.reshape(-1)                                        # (B_t K,)
            ys = torch.cat([ys[origin], word[:, None]], dim=1)             # (B_t K, t + 2)
            next_word_logits.reorder(origin)
            lengths = lengths[origin] + (~finished[origin]).float()
            finished = finished[origin] | (word == end)
            steps = t + 1
            if apart is not None:                        # transformers' stopping test
                done = apart.done(scores, sentences, t, last)
            elif last or not stop_at_eos:
                done = torch.full((B_t,), last, dtype=torch.bool, device=device)
            else:
                done = finished.view(B_t, K).all(dim=1)                    # (B_t,)
            if done.any():
                if apart is not None:           # the best of each one's finished list
                    out[sentences[done], :steps] = apart.best(sentences[done])[:, :steps]
                    if hypotheses is not None:
                        hypotheses.update({row: apart.found(row)
                                           for row in sentences[done].tolist()})
                else:
                    ranked = rank(scores[done], lengths.view(B_t, K)[done], length_penalty)
                    best = ranked.argmax(dim=1) + done.nonzero().squeeze(1) * K
                    out[sentences[done], :steps] = ys[best, 1:]
                    for j, row in enumerate(done.nonzero().squeeze(1).tolist()
                                            if hypotheses is not None else ()):
                        found = [(ys[row * K + k, 1:].tolist(), scores[row, k].item(),
                                  ranked[j, k].item()) for k in range(K)]
                        hypotheses[int(sentences[row])] = sorted(found, key=lambda h: -h[2])
                if done.all():
                    break
                going = ~done
                rows = (going.nonzero() * K + torch.arange(K, device=device)).view(-1)
                next_word_logits.keep_rows(rows)
                sentences, scores = sentences[going], scores[going]
                ys, finished, lengths = ys[rows], finished[rows], lengths[rows]
    return out[:, :steps]


@torch.no_grad()
def translate_ids(model, src, max_len, beam_width=1, batch_size=256, precision="fp32",
                  length_penalty=LENGTH_PENALTY, rules=None):
    """Translate many sentences in batches. Shape: src (N, T_src) -> list of N id lists.
    ``precision``: of decoding, as training's ``--precision`` (DLStudio.runtime.precision);
    ``length_penalty``: beam search's alpha (see `beam_search`); ``rules``: a real model's
    folder's (folder_rules.GenerationRules)."""
    model.eval()
    out = []
    with Precision(precision, src.device).autocast():
        for start in range(0, src.size(0), batch_size):
            chunk = src[start:start + batch_size]
            if beam_width == 1:
                ids = greedy_decode(model, chunk, max_len, rules=rules)
            else:
                ids = beam_search(model, chunk, max_len, beam_width, length_penalty,
                                  rules=rules)
            out.extend(ids.tolist())
    return out


def translate_sentences(model, vocab, sentences, beam_width=1, precision="fp32",
                        length_penalty=LENGTH_PENALTY, rules=None):
    """Translate English sentences (raw strings or word lists) in one batch; return the
    Spanish strings. Raises ValueError naming what is wrong with a sentence. ``rules``: a
    real model's folder's (its max_length too); its tokenizer gives the text (``text``)."""
    words = [vocab.prepare(s) for s in sentences]
    src = vocab.encode(words, "en").to(next(model.parameters()).device)
    ids = translate_ids(model, src, vocab.max_seq_length if rules is None else rules.max_length,
                        beam_width, precision=precision, length_penalty=length_penalty,
                        rules=rules)
    text = getattr(vocab, "text", None)
    return [text(seq) if text else " ".join(vocab.words(seq)) for seq in ids]


@torch.no_grad()
def translation_loss(model, vocab, pairs, batch_size=128):
    """Teacher forcing on ``pairs``: the model's mean cross-entropy per Spanish token (its
    end token included) and the perplexity, e to that mean: how surprised it is by the
    references, as training measures it. Returns {"loss", "perplexity", "tokens"}."""
    was_training, device = model.training, next(model.parameters()).device
    model.eval()
    total, tokens = 0.0, 0
    for start in range(0, len(pairs), batch_size):
        part = pairs[start:start + batch_size]
        src = vocab.encode([en for en, _ in part], "en").to(device)
        tgt = vocab.encode([es for _, es in part], "es").to(device)
        summed, n = model.loss(src, tgt)
        total, tokens = total + float(summed), tokens + n
    model.train(was_training)
    return {"loss": total / tokens, "perplexity": math.exp(total / tokens), "tokens": tokens}


def held_out_references(pairs):
    """Group pairs by English sentence: OrderedDict english -> list of Spanish references
    (each a word list without SOS/EOS), in first-seen order."""
    refs = OrderedDict()
    for en, es in pairs:
        refs.setdefault(en, []).append(es.split()[1:-1])
    return refs


def bleu_scores(hypotheses, references):
    """Corpus BLEU of word-list hypotheses against lists of word-list references.

    Returns:
        dict with ``bleu`` (NLTK, x 100), ``sacrebleu`` (x 100) and ``signature``.
    """
    from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu
    nltk_bleu = 100 * corpus_bleu(references, hypotheses,
                                  smoothing_function=SmoothingFunction().method1)
    result = {"bleu": nltk_bleu, "sentences": len(hypotheses)}
    try:
        import sacrebleu
    except ImportError:      # sacreBLEU is a dependency; without it only NLTK's score
        return result
    # sacreBLEU's form for a variable number of references: stream i holds each sentence's
    # i-th reference, or None where it has fewer (its signature then says nrefs:var).
    n_refs = max(len(r) for r in references)
    streams = [[" ".join(r[i]) if i < len(r) else None for r in references]
               for i in range(n_refs)]
    metric = sacrebleu.metrics.BLEU()
    score = metric.corpus_score([" ".join(h) for h in hypotheses], streams)
    result.update(sacrebleu=score.score, signature=str(metric.get_signature()))
    return result


def evaluate_bleu(model, vocab, pairs, beam_width=1, device=None, show=0, seed=0,
                  result_file=None, print_fn=print, precision="fp32",
                  length_penalty=LENGTH_PENALTY, rules=None):
    """Translate the distinct English sentences of ``pairs`` with ``model`` and score them
    (``vocab``: the Vocabulary, or a real model's tokenizer; ``rules``: its folder's, see
    `translate_sentences`).

    Args:
        show: how many randomly chosen translations to print beside their references.
        result_file: also write every translation there (tab-separated: English,
            prediction, references joined by " | "); where a file of that name is not one
            this framework wrote, it stays and they go to NAME-1.txt, ... (``result_file``
            of the result says where).
        precision: of decoding ("fp32", "bf16", "fp16" on CUDA, "auto").
        length_penalty: beam search's alpha (`beam_search`; greedy decoding has none).
    Returns:
        the dict of ``bleu_scores`` plus ``translations``: list of (english, predicted words,
        references), and ``translatable``: how many English sentences the vocabulary can
        read at all (a sentence with a word it lacks, or too long, is scored as an empty
        translation: BLEU is then over every sentence, comparable between tokenizers).
        Predictions are words (BPE pieces joined back), scored against the same words.
    """
    refs = held_out_references(pairs)
    english = list(refs)[:HELD_OUT if quick() else None]      # DLSTUDIO_QUICK=1: a few
    device = device or next(model.parameters()).device
    readable = [en for en in english if vocab.fits(en)]
    hyps = dict.fromkeys(english, [])    # a sentence the model cannot read: no translation
    if readable:
        src = vocab.encode(readable, "en").to(device)
        ids = translate_ids(model, src, vocab.max_seq_length if rules is None else
                            rules.max_length, beam_width, precision=precision,
                            length_penalty=length_penalty, rules=rules)
        hyps.update(zip(readable, (vocab.words(seq) for seq in ids)))
    result = bleu_scores([hyps[en] for en in english], [refs[en] for en in english])
    result["translatable"] = len(readable)
    result["translations"] = [(en, hyps[en], refs[en]) for en in english]
    for en, h, r in random.Random(seed).sample(result["translations"],
                                               min(show, len(english))):
        print_fn(f"  English:     {' '.join(en.split()[1:-1])}\n"
                 f"  predicted:   {' '.join(h)}\n"
                 f"  reference:   {' | '.join(' '.join(x) for x in r)}\n")
    if result_file:                # never over a file of the student's: see free_name
        path = free_name(result_file)
        with open(path, "w", encoding="utf-8") as f:
            for en, h, r in result["translations"]:
                f.write(f"{' '.join(en.split()[1:-1])}\t{' '.join(h)}\t"
                        f"{' | '.join(' '.join(x) for x in r)}\n")
        mark_written(path)
        print_fn(f"translations written: {path}"
                 + (f" ({result_file} is not a file this framework wrote: it stays)"
                    if path != result_file else ""))
        result["result_file"] = path
    return result


# ---------------------------------------------------------------------------------------
# Image classification (visTransformer).
@torch.no_grad()
def classify(model, images, batch_size=500):
    """Predicted class of each image. Shape: (N, C, H, W) uint8 (or float in [0, 1]) -> (N,)"""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = []
    for chunk in images.split(batch_size):
        x = chunk.float().div(255) if chunk.dtype == torch.uint8 else chunk.float()
        out.append(model(x.to(device)).argmax(-1).cpu())
    model.train(was_training)
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long)


def confusion_matrix(predicted, true, num_classes):
    """(K, K) counts: row = true class, column = predicted class."""
    flat = true.long() * num_classes + predicted.long()
    return torch.bincount(flat, minlength=num_classes ** 2).view(num_classes, num_classes)


def format_confusion(matrix, classes):
    """The confusion matrix as a text table, with each class's accuracy (recall)."""
    corner = "true \\ predicted"
    L = max(len(corner), *(len(c) for c in classes)) + 1
    w = max(6, *(len(c) for c in classes)) + 1
    lines = [f"{corner:<{L}}" + "".join(f"{c:>{w}}" for c in classes) + f"{'correct':>9}"]
    for k, (c, row) in enumerate(zip(classes, matrix.tolist())):
        lines.append(f"{c:<{L}}" + "".join(f"{n:>{w}}" for n in row)
                     + f"{100 * row[k] / max(sum(row), 1):>8.1f}%")
    return "\n".join(lines)
