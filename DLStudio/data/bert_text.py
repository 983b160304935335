"""BERT's text: a tokenizer with [CLS], [SEP], [MASK], [PAD] and [UNK], sentences (or pairs)
laid out as ``[CLS] a [SEP] (b [SEP])`` with segment ids, the masking rule of pre-training,
and the labelled rows of fine-tuning.

    tok = SpecialTokenizer.train(sentences, "bpe", 4000)       # or "word"; or from_vocab_txt
    ids, segments = tok.layout(["the dog runs"], max_len=16)    # (1, T) each, [PAD]-padded
    corrupted, selected = mask_tokens(ids, tok.special_mask(ids), generator, tok.mask_id,
                                      tok.size)

Three kinds, all Hugging Face ``tokenizers`` objects (one implementation of each, well kept;
the special tokens are ids it gives, looked up by name, never fixed numbers):
    word       a token per word seen in training; any other word is [UNK]
    bpe        byte-level BPE pieces learnt from the text (no word is unknown)
    wordpiece  a BERT vocabulary (``vocab.txt``: bert-base-uncased's, say), with BERT's own
               normalising (lower case, accents stripped) and splitting
"""

import hashlib
import random

import torch

from .vocabulary import plain_words, split_sentences

__all__ = ["SPECIAL_TOKENS", "SpecialTokenizer", "mask_tokens", "masked_once", "MaskedText",
           "read_masked_text", "LabelledRows", "read_labelled_rows", "RowError"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
KINDS = ("word", "bpe", "wordpiece")


class RowError(ValueError):
    """A labelled file's row that cannot be read; the message names its line."""


class SpecialTokenizer:
    """A tokenizer with BERT's special tokens (a Hugging Face ``tokenizers.Tokenizer``).

    Attributes: kind, size, pieces (id -> token), pad_id, unk_id, cls_id, sep_id, mask_id,
    fingerprint (a checkpoint stores it to recognise the tokenizer)."""

    def __init__(self, hf, kind):
        if kind not in KINDS:
            raise ValueError(f"tokenizer must be one of {', '.join(KINDS)}, not {kind!r}")
        self.hf, self.kind = hf, kind
        self.size = hf.get_vocab_size()
        self.pieces = [hf.id_to_token(i) for i in range(self.size)]
        for token in SPECIAL_TOKENS:
            if hf.token_to_id(token) is None:
                raise ValueError(f"the vocabulary has no {token}: BERT needs "
                                 f"{', '.join(SPECIAL_TOKENS)}")
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            hf.token_to_id(t) for t in SPECIAL_TOKENS)
        self.special_ids = sorted({self.pad_id, self.unk_id, self.cls_id, self.sep_id,
                                   self.mask_id})
        self.fingerprint = hashlib.sha256(hf.to_str().encode()).hexdigest()[:16]

    @classmethod
    def train(cls, sentences, kind="bpe", vocab_size=8000):
        """Learn a "word" or "bpe" tokenizer from ``sentences`` (strings)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        specials = list(SPECIAL_TOKENS)
        if kind == "word":
            hf = Tokenizer(models.WordLevel(unk_token="[UNK]"))
            hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
            trainer = trainers.WordLevelTrainer(special_tokens=specials, show_progress=False)
        elif kind == "bpe":
            if vocab_size < 256 + len(specials) + 1:
                raise ValueError(f"vocab_size {vocab_size} is too small for byte-level BPE: "
                                 "it needs the 256 bytes, the 5 special tokens and some "
                                 "merges (try 2000 to 8000)")
            hf = Tokenizer(models.BPE(unk_token="[UNK]"))
            hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            hf.decoder = decoders.ByteLevel()
            trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                          show_progress=False)
        else:
            raise ValueError(f"a tokenizer learnt from text is 'word' or 'bpe', not {kind!r} "
                             "(a wordpiece vocabulary is read: from_vocab_txt)")
        hf.train_from_iterator(list(sentences), trainer)
        return cls(hf, kind)

    @classmethod
    def from_vocab_txt(cls, path, lowercase=True, strip_accents=None):
        """BERT's WordPiece vocabulary (``vocab.txt``, a token a line) with BERT's
        normalising and splitting (Hugging Face ``tokenizers``' BERT components). A cased
        model (bert-base-cased) keeps case and accents: ``lowercase`` False;
        ``strip_accents`` None follows ``lowercase``, as in Hugging Face's BertTokenizer."""
        from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
        with open(path, encoding="utf-8") as f:
            vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
        hf = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]",
                                        max_input_chars_per_word=100))
        hf.normalizer = normalizers.BertNormalizer(
            lowercase=lowercase, strip_accents=lowercase if strip_accents is None else
            strip_accents)
        hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        hf.decoder = decoders.WordPiece()
        hf.add_special_tokens(list(SPECIAL_TOKENS))     # "[MASK]" in a text: the token
        return cls(hf, "wordpiece")

    @classmethod
    def from_state(cls, state):
        from tokenizers import Tokenizer
        return cls(Tokenizer.from_str(state["json"]), state["kind"])

    def state(self):
        return {"kind": self.kind, "json": self.hf.to_str()}

    def ids(self, texts):
        """Token ids of each text, no special tokens added. A literal "[MASK]" (or any
        special token written out) is that token."""
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def text(self, ids):
        """The text of ids, special tokens left out."""
        return self.hf.decode([int(i) for i in ids], skip_special_tokens=True)

    def readable(self, ids):
        """Each token as a reader sees it (for the explorer): its piece, "##" before one
        that continues a word."""
        shown = []
        for i in map(int, ids):
            piece = self.pieces[i]
            if i in self.special_ids or self.kind != "bpe":
                shown.append(piece)
                continue
            starts = piece.startswith("\u0120") or not shown or shown[-1] in SPECIAL_TOKENS
            text = self.hf.decode([i]).strip()
            shown.append(text if starts else "##" + text)
        return shown

    def layout(self, first, second=None, max_len=None):
        """``[CLS] a [SEP]`` (or ``[CLS] a [SEP] b [SEP]``) of each text, [PAD]-padded to
        the longest, with segment ids (0 up to the first [SEP], then 1). Too long a row is
        cut to ``max_len`` (the first text first loses its end while it is the longer).

        Returns: ids (B, T), segments (B, T) LongTensors."""
        a = self.ids(first)
        b = self.ids(second) if second is not None else [None] * len(a)
        rows = [self.row(x, y, max_len) for x, y in zip(a, b)]
        return pad_rows(rows, self.pad_id)

    def row(self, a, b=None, max_len=None):
        """One row's (ids, segments) of token ids a (and b), cut to ``max_len``."""
        a, b = list(a), None if b is None else list(b)
        room = None if max_len is None else max_len - (2 if b is None else 3)
        while room is not None and len(a) + len(b or []) > room:
            if b and len(b) > len(a):
                b.pop()
            else:
                a.pop()
        ids = [self.cls_id, *a, self.sep_id]
        segments = [0] * len(ids)
        if b is not None:
            ids += [*b, self.sep_id]
            segments += [1] * (len(b) + 1)
        return ids, segments

    def special_mask(self, ids):
        """True at [CLS], [SEP], [PAD] (and the others): tokens never selected for masking.
        Shape: (B, T) -> (B, T)"""
        return torch.isin(ids, torch.tensor(self.special_ids, device=ids.device))


def pad_rows(rows, pad_id):
    """(ids, segments) rows -> two (B, T) LongTensors, padded with ``pad_id`` (and 0)."""
    T = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    segments = torch.zeros((len(rows), T), dtype=torch.long)
    for r, (row_ids, row_segments) in enumerate(rows):
        ids[r, :len(row_ids)] = torch.tensor(row_ids)
        segments[r, :len(row_segments)] = torch.tensor(row_segments)
    return ids, segments


def mask_tokens(ids, special, generator, mask_id, vocab_size, rate=0.15, special_ids=()):
    """BERT's corruption (Devlin et al. 2019, 3.1): select each token that is not
    ``special`` with probability ``rate``; of the selected, 80% become [MASK], 10% a random
    ordinary token (any id of the vocabulary but ``special_ids``: never a [PAD] that would
    hide a position the model must predict), 10% stay as they were. The loss is computed at
    the selected positions only.

    Shape: ids (B, T), special (B, T) bool -> corrupted ids (B, T), selected (B, T) bool
    """
    draw = torch.rand(ids.shape, generator=generator)                     # (B, T)
    selected = (draw < rate) & ~special
    how = torch.rand(ids.shape, generator=generator)       # 80 / 10 / 10 among the selected
    every = torch.arange(vocab_size)
    ordinary = every[~torch.isin(every, torch.tensor(list(special_ids), dtype=torch.long))]
    random_ids = ordinary[torch.randint(len(ordinary), ids.shape, generator=generator)]
    corrupted = ids.clone()
    corrupted[selected & (how < 0.8)] = mask_id
    swap = selected & (how >= 0.8) & (how < 0.9)
    corrupted[swap] = random_ids[swap]
    return corrupted, selected


def masked_once(tok, sentences, max_len, seed=0, rate=0.15):
    """Held-out sentences laid out and masked once by the rule, from ``seed``, so that their
    scores compare across checkpoints: (corrupted ids, segments, selected, original ids)."""
    ids, segments = tok.layout(sentences, max_len=max_len)
    corrupted, selected = mask_tokens(ids, tok.special_mask(ids),
                                      torch.Generator().manual_seed(seed), tok.mask_id,
                                      tok.size, rate, tok.special_ids)
    return corrupted, segments, selected, ids


class MaskedText:
    """What a BERT pre-trains on: training and held-out sentences (split by distinct
    sentence), the tokenizer, max_seq_length; ``ordered``: the lines run in order (the
    next-sentence task may pair neighbours)."""

    def __init__(self, training, held_out, tokenizer, max_seq_length, ordered=False):
        self.training_sentences, self.held_out_sentences = training, held_out
        self.vocab, self.max_seq_length, self.ordered = tokenizer, max_seq_length, ordered


def read_masked_text(sentences, *, held_out_fraction=0.05, split_seed=0, tokenizer="bpe",
                     vocab_size=8000, vocab=None, max_seq_length=None, ordered=False):
    """A BERT's MaskedText: sentences split into training and held-out, the tokenizer learnt
    from the training ones (or ``vocab``), max_seq_length fitted to the longest training
    sentence with [CLS] and [SEP] (twice that with ``ordered``: a pair of them).
    ``ordered`` text keeps its order: its held-out part is its last lines. The length
    always has room for a pair of such sentences (``[CLS] a [SEP] b [SEP]``), so that the
    position table covers the pairs a fine-tuned model reads."""
    sentences = [" ".join(plain_words(s)) for s in sentences]     # an archive's: no SOS/EOS
    sentences = [s for s in sentences if s]
    if len(set(sentences)) < 2:
        raise ValueError("BERT needs at least two different sentences to learn from")
    if ordered:        # the held-out lines are the last ones, so that neighbours stay
        cut = max(1, round(held_out_fraction * len(sentences)))
        training, held_out = sentences[:-cut], sentences[-cut:]
    else:
        training, held_out = split_sentences(sentences, held_out_fraction, split_seed)
    if vocab is None:
        vocab = SpecialTokenizer.train(training, tokenizer, vocab_size)
    longest = max(len(ids) for ids in vocab.ids(training))
    return MaskedText(training, held_out, vocab, max(max_seq_length or 0, 2 * longest + 3),
                      ordered)


class LabelledRows:
    """Rows of a classification file: texts (and second texts, for pairs) and labels."""

    def __init__(self, texts, labels, seconds=None, path=None):
        self.texts, self.labels, self.seconds, self.path = texts, labels, seconds, path

    def __len__(self):
        return len(self.labels)

    def keep_per_label(self, n, seed=0):
        """``n`` rows of each label (all of a label that has fewer), chosen with ``seed``,
        in the file's order."""
        by_label = {}
        for i, label in enumerate(self.labels):
            by_label.setdefault(label, []).append(i)
        rng, kept = random.Random(seed), []
        for label in sorted(by_label):
            rows = by_label[label]
            kept += rows if len(rows) <= n else rng.sample(rows, n)
        kept.sort()
        return LabelledRows([self.texts[i] for i in kept], [self.labels[i] for i in kept],
                            None if self.seconds is None else [self.seconds[i] for i in kept],
                            self.path)


#: First fields that make a first row a header, not a label.
HEADER_WORDS = {"label", "labels", "class", "category", "target", "y", "sentiment"}


def read_labelled_rows(path, lines=None):
    """The rows of a TSV file of ``label<TAB>text`` or ``label<TAB>text<TAB>text2`` (every
    row the same); ``lines``: the rows' text already read (standard input). Raises RowError
    naming the line of a bad row."""
    if lines is None:
        try:
            with open(path, encoding="utf-8-sig") as f:      # a byte-order mark: not text
                lines = f.read().splitlines()
        except FileNotFoundError:
            raise RowError(f"no file {path}") from None
        except UnicodeDecodeError as e:
            raise RowError(f"{path} is not UTF-8 text (byte {e.start})") from None
    lines = list(lines)
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    texts, labels, seconds, width = [], [], [], None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (2, 3) or not all(f.strip() for f in fields):
            raise RowError(f"{path}, line {number}: expected label<TAB>text or "
                           f"label<TAB>text<TAB>text2, got {line[:60]!r}")
        if width is not None and len(fields) != width:
            raise RowError(f"{path}, line {number}: {len(fields) - 1} text(s), but the rows "
                           f"before have {width - 1}: every row must be alike")
        width = len(fields)
        if not labels and fields[0].strip().lower() in HEADER_WORDS:
            raise RowError(f"{path}, line {number} looks like a header ({line[:60]!r}): the "
                           "file has no header row (a header would be a label of one row, "
                           "learnt like the others); delete that line")
        labels.append(fields[0].strip())
        texts.append(fields[1].strip())
        if width == 3:
            seconds.append(fields[2].strip())
    if not labels:
        raise RowError(f"{path} holds no rows: write label<TAB>text, one row a line")
    return LabelledRows(texts, labels, seconds if width == 3 else None, path)
