"""BERT's two trainers, the loop of `Trainer` fed BERT's batches: masked-language
pre-training (`MaskedLanguageTrainer`) and fine-tuning a classifier on [CLS]
(`ClassifierTrainer`). Each takes the model, its data (a MaskedText, or encoded rows) and
its settings; neither reads a container (DLStudio.containers.bert builds them)."""

import hashlib
import math

import torch
import torch.nn.functional as F

from ..data.bert_text import mask_tokens, masked_once, pad_rows
from ..evaluation.classify_text import predict_rows
from .kinds import bucketed_batches
from .trainer import Trainer

__all__ = ["MaskedLanguageTrainer", "ClassifierTrainer", "masked_scores", "encode_rows"]


def _fingerprint(texts):
    h = hashlib.sha256()
    for text in texts:
        h.update(str(text).encode() + b"\n")
    return h.hexdigest()[:16]


def _masks_of(first_row, seed, epoch):
    """The generator of one batch's masks, from the seed, the epoch and the batch's first
    row (no two batches of an epoch share one): every epoch masks anew, and a resumed run
    masks as an unbroken one."""
    return torch.Generator().manual_seed((seed or 0) * 1000003 + epoch * 100_003
                                         + first_row + 7)


@torch.no_grad()
def masked_scores(model, ids, segments, selected, targets, batch_size=256):
    """Masked-token accuracy (percent) and perplexity (exp of the mean cross-entropy) at
    the selected positions of already-masked rows."""
    model.eval()
    device = next(model.parameters()).device
    right, loss, n = 0, 0.0, 0
    for start in range(0, len(ids), batch_size):
        part = slice(start, start + batch_size)
        keep = selected[part].to(device)
        if not keep.any():
            continue
        original = targets[part].to(device)                # the padding: of these ids
        logits = model(ids[part].to(device), segments[part].to(device), keep,
                       pad=original == model.pad_id).float()
        truth = original[keep]
        right += (logits.argmax(-1) == truth).sum().item()
        loss += F.cross_entropy(logits, truth, reduction="sum").item()
        n += len(truth)
    if not n:
        return None
    return {"accuracy": 100.0 * right / n, "perplexity": math.exp(loss / n), "tokens": n}


class MaskedLanguageTrainer(Trainer):
    """Pre-trains a TransformerBERT by masked-language modelling: each batch's tokens are
    selected and corrupted anew (``masking``: `mask_tokens` by default, from a generator of
    the seed, epoch and batch), the loss only at the selected ones. With ``next_sentence``
    (text whose lines run in order) half the rows pair a line with the next, half with a
    random line, and the pair head learns which. The held-out sentences are masked once, so
    their scores compare across checkpoints."""

    score_name, score_key = "perplexity", "held_out_mlm_perplexity"

    def __init__(self, model, text, optimizer, dls, checkpoints_dir=None, *,
                 track_perplexity=False, mask_rate=0.15, masking=None, **options):
        if len(text.training_sentences) < 2:
            raise ValueError("no training text: give TransformerBERT sentences=")
        self.text, self.tok, self.mask_rate = text, text.vocab, mask_rate
        # masking(ids, special, generator) -> (corrupted, selected): the model's own (a
        # student's, in the masking exercise); the held-out rows always by the rule
        self.masking = masking or (lambda ids, special, gen: mask_tokens(
            ids, special, gen, self.tok.mask_id, self.tok.size, self.mask_rate,
            self.tok.special_ids))
        self.next_sentence = model.next_sentence is not None
        self.pieces = self.tok.ids(text.training_sentences)
        self.singles = pad_rows([self.tok.row(p, None, text.max_seq_length)
                                 for p in self.pieces], self.tok.pad_id)
        self.lengths = (self.singles[0] != self.tok.pad_id).sum(1)
        self.num_examples = len(self.pieces) - (1 if self.next_sentence else 0)
        model.requires_grad_(True)
        for p in model.unused_parameters("mlm"):
            p.requires_grad_(False)
        self.held_out = (masked_once(self.tok, text.held_out_sentences, text.max_seq_length,
                                     dls.seed or 0, mask_rate)
                         if text.held_out_sentences else None)
        self.accuracy_history = []               # (step, epoch, masked-token accuracy)
        super().__init__(model, optimizer, dls, checkpoints_dir, track_score=track_perplexity,
                         **options)

    def batches(self, epoch, skip=0):
        """The epoch's batches (ids, segments, selected, targets) [+ is_next], each cut to
        its longest row."""
        order = bucketed_batches(self.lengths[:self.num_examples], self.dls.batch_size,
                                 self.epoch_generator(epoch))
        for idx, mine in self.share_with_batch(order, skip):   # drawn for the global batch
            gen = _masks_of(int(idx[0]), self.dls.seed, epoch)
            if self.next_sentence:
                ids, segments, is_next = self.pairs(idx, gen)
            else:
                T = int(self.lengths[idx].max())
                ids, segments = self.singles[0][idx, :T], self.singles[1][idx, :T]
            special = self.tok.special_mask(ids)
            corrupted, selected = self.masking(ids, special, gen)
            if not selected.any():      # (a short last batch may draw none: mask one)
                first = (~special).nonzero()[0]
                selected[tuple(first)], corrupted[tuple(first)] = True, self.tok.mask_id
            batch = (corrupted, segments, selected, ids) + \
                ((is_next,) if self.next_sentence else ())
            yield tuple(t[mine].to(self.device, non_blocking=True) for t in batch)

    def pairs(self, idx, gen):
        """Rows of a line and the next (is_next 1) or a random other line (0)."""
        is_next = (torch.rand(len(idx), generator=gen) < 0.5).long()
        other = torch.randint(len(self.pieces), (len(idx),), generator=gen)
        rows = [self.tok.row(self.pieces[i], self.pieces[i + 1 if nxt else j],
                             self.text.max_seq_length)
                for i, nxt, j in zip(idx.tolist(), is_next.tolist(), other.tolist())]
        return (*pad_rows(rows, self.tok.pad_id), is_next)

    def loss_and_count(self, ids, segments, selected, targets, is_next=None):
        if is_next is not None:           # the pair task's loss beside it, one pass
            return self.model.pair_task_loss(ids, segments, selected, targets, is_next,
                                             self.label_smoothing, self.net)
        return self.model.mlm_loss(ids, segments, selected, targets, self.label_smoothing,
                                   self.net)

    def data_fingerprint(self):
        return {"text": _fingerprint(self.text.training_sentences),
                "next_sentence": self.next_sentence}

    def held_out_score(self):
        """The held-out perplexity at the masked tokens; their accuracy is kept beside it
        (``held_out_mlm_accuracy`` of the checkpoint)."""
        scores = None if self.held_out is None else masked_scores(self.model, *self.held_out)
        if scores is None:
            return None
        self.accuracy_history.append((self.step, self.epoch, scores["accuracy"]))
        return scores["perplexity"]

    def write_checkpoint(self, payload, epoch, path):
        payload["held_out_mlm_accuracy"] = self.accuracy_history   # held_out_score adds to it
        super().write_checkpoint(payload, epoch, path)

    def newest_checkpoint(self):
        path, payload = super().newest_checkpoint()
        self.accuracy_history = [tuple(r) for r in payload.get("held_out_mlm_accuracy", [])]
        return path, payload


def encode_rows(tok, rows, label_index, max_len):
    """Token ids, segment ids and label indices of LabelledRows (labels unseen refused)."""
    unseen = sorted(set(rows.labels) - set(label_index))
    if unseen:
        raise ValueError(f"{rows.path}: label(s) {', '.join(map(repr, unseen))} were not in "
                         f"the training rows (the model knows {', '.join(label_index)})")
    ids, segments = tok.layout(rows.texts, rows.seconds, max_len)
    labels = torch.tensor([label_index[label] for label in rows.labels])
    return ids, segments, labels


class ClassifierTrainer(Trainer):
    """Fine-tunes a TransformerBERT's classifier on [CLS] (and every layer under it):
    labelled rows in random order, cross-entropy on the label. The MLM head rests."""

    score_name, score_key = "accuracy", "held_out_accuracy"

    def __init__(self, model, train, test, optimizer, dls, checkpoints_dir=None, *,
                 track_accuracy=False, **options):
        self.train_rows, self.test = train, test          # (ids, segments, labels) each
        self.lengths = (train[0] != model.pad_id).sum(1)
        self.num_examples = len(train[2])
        model.requires_grad_(True)
        for p in model.unused_parameters("classifier"):
            p.requires_grad_(False)
        super().__init__(model, optimizer, dls, checkpoints_dir, track_score=track_accuracy,
                         **options)

    def batches(self, epoch, skip=0):
        ids, segments, labels = self.train_rows
        for idx in self.share(bucketed_batches(self.lengths, self.dls.batch_size,
                                               self.epoch_generator(epoch)), skip):
            T = int(self.lengths[idx].max())
            yield (ids[idx, :T].to(self.device), segments[idx, :T].to(self.device),
                   labels[idx].to(self.device))

    def loss_and_count(self, ids, segments, labels):
        return self.model.classifier_loss(ids, segments, labels, self.label_smoothing,
                                          self.net)

    def data_fingerprint(self):
        ids, _, labels = self.train_rows
        return _fingerprint([ids.sum().item(), ids.shape, labels.tolist()])

    def held_out_score(self):
        if self.test is None:
            return None
        predicted = predict_rows(self.model, self.test[0], self.test[1])
        return 100.0 * (predicted == self.test[2]).float().mean().item()
