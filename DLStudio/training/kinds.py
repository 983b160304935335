"""The trainer's three kinds, each the loop of `Trainer` fed its own data: sentence pairs
(`TranslationTrainer`), images (`ImageTrainer`) and sentences (`LanguageModelTrainer`). Each
takes a model, its data (the pairs and vocabulary, an ImageData, a TextData) and its
settings; none reads a container (DLStudio.containers.wiring builds them from one).
Batches are tensors built once: every sentence is turned into token ids before training,
and each batch is a set of rows cut to its longest sentence. Sentences of similar length
are batched together (length bucketing), so little time goes into padding."""

import hashlib

import torch

from ..data import pairs_fingerprint
from ..data.images import random_crops_and_flips
from ..evaluation.decode_and_score import classify, evaluate_bleu
from ..evaluation.generation import encode_sentences, perplexity
from ..model.tokens import EOS_INDEX, padding_mask, padding_of
from .trainer import ScoreMissing, Trainer

__all__ = ["TranslationTrainer", "ImageTrainer", "LanguageModelTrainer", "encode_pairs",
           "bucketed_batches"]


def encode_pairs(vocab, pairs):
    """Token ids of all pairs, built once (``vocab``: a Vocabulary).

    Returns:
        src (N, max_seq_length), tgt (N, max_seq_length) LongTensors (EOS-padded), and the
        number of tokens of each sentence (SOS and EOS included) as two (N,) tensors.
    """
    src = vocab.encode([en for en, _ in pairs], "en")
    tgt = vocab.encode([es for _, es in pairs], "es")
    end = getattr(vocab, "end_id", EOS_INDEX)          # a real model's tokenizer's own
    pad = getattr(vocab, "pad_id", None)
    src_len = (~padding_of(src, end, pad)).sum(1)
    tgt_len = (~padding_of(tgt, end, pad)).sum(1)
    return src, tgt, src_len, tgt_len


def bucketed_batches(lengths, batch_size, generator, pool=50):
    """Index batches of sentences of similar length, in random order.

    The indices are shuffled, cut into pools of ``pool`` batches, each pool is sorted by
    length and cut into batches, and the batches are shuffled: random, yet each batch has
    little padding.
    """
    order = torch.randperm(len(lengths), generator=generator)
    batches = []
    for start in range(0, len(order), batch_size * pool):
        chunk = order[start:start + batch_size * pool]
        chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    perm = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in perm]


class TranslationTrainer(Trainer):
    """Trains an EncoderDecoder (TransformerFG or TransformerPreLN) on sentence pairs:
    teacher forcing, one decoder pass per batch, length-bucketed batches.

    Args:
        model, optimizer, dls, checkpoints_dir: as for `Trainer`.
        vocab: the Vocabulary (words -> ids).  pairs: the training pairs.
        held_out: the held-out pairs (scored with ``track_bleu``).
        label_smoothing: of the cross-entropy (Vaswani et al. 2017, sec. 5.4).
        The other options are those of `Trainer`.
    """

    score_name, score_key = "BLEU", "held_out_bleu"

    def __init__(self, model, vocab, pairs, optimizer, dls, checkpoints_dir=None, *,
                 held_out=(), track_bleu=False, **options):
        if not pairs:
            raise ValueError("the training split is empty: give the container an archive")
        self.vocab, self.held_out, self.pairs = vocab, held_out, pairs
        self.src, self.tgt, self.src_len, self.tgt_len = encode_pairs(vocab, pairs)
        self.num_examples = len(self.src)
        super().__init__(model, optimizer, dls, checkpoints_dir, track_score=track_bleu,
                         **options)

    def batches(self, epoch, skip=0):
        """The epoch's batches of (src, tgt), each cut to its longest sentence; the first
        ``skip`` are left out."""
        lengths = torch.maximum(self.src_len, self.tgt_len)
        for idx in self.share(bucketed_batches(lengths, self.dls.batch_size,
                                               self.epoch_generator(epoch)), skip):
            T_src, T_tgt = int(self.src_len[idx].max()), int(self.tgt_len[idx].max())
            yield (self.src[idx, :T_src].to(self.device, non_blocking=True),
                   self.tgt[idx, :T_tgt].to(self.device, non_blocking=True))

    def data_fingerprint(self):
        """A hash of the training pairs, in order (another archive or split differs)."""
        return pairs_fingerprint(self.pairs)

    def payload(self, epoch, complete=True):
        """The trainer's checkpoint; a model with LoRA says how its LoRAs were added, so
        that the model is rebuilt with them before its weights are read (a real model's
        LoRA fine-tuning: containers/wiring.restored_translation)."""
        payload = super().payload(epoch, complete)
        lora = self.model.lora_settings() if hasattr(self.model, "lora_settings") else None
        if lora:
            payload["lora"] = lora
        return payload

    def held_out_score(self):
        if not self.held_out:
            return None
        return evaluate_bleu(self.model, self.vocab, self.held_out, show=0,
                             rules=getattr(self.model, "generation_rules", None))["bleu"]


class ImageTrainer(Trainer):
    """Trains a visTransformer on its training images: batches of images in random order
    (shifted and flipped with ``augment``), cross-entropy on the class.

    Args:
        model: the visTransformer.  images: its ImageData (training and test sets).
        optimizer, dls, checkpoints_dir and the other options: as for `Trainer`.
        augment: random shifts and flips of the training images ("shifts": no flips).
        track_accuracy: score
        the test images at every checkpoint.
    """

    score_name, score_key = "accuracy", "held_out_accuracy"

    def __init__(self, model, images, optimizer, dls, checkpoints_dir=None, *, augment=False,
                 track_accuracy=False, **options):
        if images is None or images.training_set is None:
            raise ValueError("no training images: call load_shapes_dataset() or "
                             "load_cifar_10_dataset() first")
        self.data, self.augment = images, augment
        self.images, self.labels = images.training_set.images, images.training_set.labels
        self.num_examples = len(self.labels)
        super().__init__(model, optimizer, dls, checkpoints_dir, track_score=track_accuracy,
                         **options)

    def batches(self, epoch, skip=0):
        """The epoch's batches of (images in [0, 1], labels); the first ``skip`` are left
        out (their random shifts are still drawn, so a resumed run matches)."""
        gen = self.epoch_generator(epoch)
        order = torch.randperm(self.num_examples, generator=gen)
        W = self.world.size
        for i, idx in enumerate(order.split(self.dls.batch_size)):
            images = self.images[idx].float().div_(255)                   # (B, C, H, W)
            if self.augment:                   # drawn for the global batch, on every rank
                images = random_crops_and_flips(images, gen,
                                                flips=self.augment != "shifts")
            if i >= skip and len(idx) >= W:
                mine = self.world.share(torch.arange(len(idx)))
                yield (images[mine].to(self.device, non_blocking=True),
                       self.labels[idx[mine]].to(self.device, non_blocking=True))

    def data_fingerprint(self):
        """The data set's recipe (where CIFAR-10 lies may change) and the augmentation."""
        spec = {k: v for k, v in (self.data.spec or {}).items() if k != "dataroot"}
        return {"dataset": spec, "images": len(self.labels), "augment": self.augment}

    def held_out_score(self):
        test = self.data.test_set
        if test is None:
            return None
        return 100.0 * (classify(self.model, test.images) == test.labels).float().mean().item()


class LanguageModelTrainer(Trainer):
    """Trains a TransformerGPT on its training sentences: at every position the next token
    (teacher forcing, one pass per batch, as the translation decoder is trained), loss on
    the real tokens up to each sentence's EOS, length-bucketed batches.

    Args:
        model: the TransformerGPT.  text: its TextData (vocabulary.read_text: the training
        and held-out sentences, the tokenizer, max_seq_length).  optimizer, dls,
        checkpoints_dir and the options of `Trainer`; track_perplexity: score the held-out
        sentences at every checkpoint.
    """

    score_name, score_key = "perplexity", "held_out_perplexity"

    def __init__(self, model, text, optimizer, dls, checkpoints_dir=None, *,
                 track_perplexity=False, **options):
        if not text.training_sentences:
            raise ValueError("no training text: give TransformerGPT sentences=")
        self.text = text
        self.ids, _ = encode_sentences(text.vocab, text.training_sentences, text.max_seq_length)
        self.lengths = (~padding_mask(self.ids)).sum(1)
        self.num_examples = len(self.ids)
        super().__init__(model, optimizer, dls, checkpoints_dir, track_score=track_perplexity,
                         **options)

    def batches(self, epoch, skip=0):
        """The epoch's batches of sentences (B, T), each cut to its longest."""
        for idx in self.share(bucketed_batches(self.lengths, self.dls.batch_size,
                                               self.epoch_generator(epoch)), skip):
            T = int(self.lengths[idx].max())
            yield (self.ids[idx, :T].to(self.device, non_blocking=True),)

    def data_fingerprint(self):
        h = hashlib.sha256()
        for sentence in self.text.training_sentences:
            h.update(sentence.encode() + b"\n")
        return h.hexdigest()[:16]

    def held_out_score(self):
        text = self.text
        if not text.held_out_sentences:
            return None
        try:
            return perplexity(self.model, text.held_out_sentences, text.vocab,
                              text.max_seq_length)["per_piece"]
        except ValueError as e:
            raise ScoreMissing(f"the held-out perplexity cannot be computed: {e} (a word-level "
                               "tokenizer knows only the training words: --tokenizer bpe "
                               "reads any)") from None
