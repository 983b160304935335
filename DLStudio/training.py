"""The training loop shared by TransformerFG and TransformerPreLN.

    for each batch:  zero_grad -> forward (one decoder pass, teacher forcing) -> loss on
                     the real target positions -> backward -> clip -> step -> log

Batches are tensors built once: every pair is turned into token ids before training, and
each batch is a set of rows cut to its longest sentence. Pairs of similar length are
batched together (length bucketing), so little time goes into padding.
"""

import logging
import math
import os
import random
import time

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .checkpoints import FORMAT, checkpoint_path, list_checkpoints, save_checkpoint
from .tokens import padding_mask

__all__ = ["Trainer", "TrainingDiverged", "encode_pairs", "bucketed_batches"]

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message says where and what to try."""


def encode_pairs(xformer, pairs):
    """Token ids of all pairs, built once.

    Returns:
        src (N, max_seq_length), tgt (N, max_seq_length) LongTensors (EOS-padded), and the
        number of tokens of each sentence (SOS and EOS included) as two (N,) tensors.
    """
    src = xformer.sentence_with_words_to_ints([en for en, _ in pairs], "en")
    tgt = xformer.sentence_with_words_to_ints([es for _, es in pairs], "es")
    src_len = (~padding_mask(src)).sum(1)
    tgt_len = (~padding_mask(tgt)).sum(1)
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


class Trainer:
    """Trains an EncoderDecoder on the container's training split and writes checkpoints.

    Args:
        xformer:          the container (TransformerFG or TransformerPreLN).
        master_encoder, master_decoder: the stacks to train (with both embedding generators).
        checkpoints_dir:  where ``checkpoint_<epoch>.pt`` files go.
        max_minutes:      stop after this much training time (a checkpoint is written).
        clip_grad_norm:   clip the gradient norm to this value (None: no clipping).
        overwrite:        allow a directory that already holds checkpoints (files of the
                          same name are replaced; nothing else is ever deleted).
    """

    def __init__(self, xformer, master_encoder, master_decoder, checkpoints_dir,
                 display_train_loss=False, max_minutes=None, clip_grad_norm=1.0,
                 overwrite=False, log_every=None):
        dls = xformer.dl_studio
        self.xformer, self.dls, self.device = xformer, dls, dls.device
        self.encoder, self.decoder = master_encoder, master_decoder
        self.model = xformer.EncoderDecoder(xformer, master_encoder, master_decoder)
        self.model.to(self.device)
        self.optimizer = xformer.make_optimizer(self.model.parameters())
        self.checkpoints_dir = checkpoints_dir
        self.display_train_loss = display_train_loss
        self.max_minutes, self.clip_grad_norm = max_minutes, clip_grad_norm
        self.log_every = log_every
        self.step, self.epoch, self.train_losses = 0, 0, []
        if xformer.save_checkpoints and checkpoints_dir:
            existing = list_checkpoints(checkpoints_dir) if os.path.isdir(checkpoints_dir) else []
            if existing and not overwrite:
                raise FileExistsError(
                    f"{checkpoints_dir} already holds checkpoints {existing} from another "
                    "run. Choose another directory, or pass overwrite=True (--overwrite) to "
                    "replace checkpoints of the same index (other files are never deleted).")
        if not xformer.training_corpus:
            raise ValueError("the training split is empty: give the container an archive")
        self.src, self.tgt, self.src_len, self.tgt_len = encode_pairs(
            xformer, xformer.training_corpus)

    # -----------------------------------------------------------------------------------
    def loss_on_batch(self, src, tgt):
        """Cross-entropy over the target positions up to and including the first EOS.

        Shape: src (B, T_src), tgt (B, T_tgt) -> scalar
        """
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]                      # (B, T_tgt - 1)
        keep = ~padding_mask(labels)                                  # (B, T_tgt - 1)
        logits = self.model(src, tgt_in, keep)                        # (N, V_es)
        return F.cross_entropy(logits, labels[keep],
                               label_smoothing=self.xformer.label_smoothing)

    def train_step(self, src, tgt):
        self.optimizer.zero_grad()
        loss = self.loss_on_batch(src, tgt)
        value = loss.item()
        if not math.isfinite(value):
            raise TrainingDiverged(
                f"the loss became {value} at epoch {self.epoch}, step {self.step + 1} "
                f"(learning rate {self.current_lr():.3g}). Lower the peak learning rate "
                "(lr_mul / learning_rate) or lengthen the warm-up (num_warmup_steps).")
        loss.backward()
        if self.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_grad_norm)
        self.optimizer.step()
        self.step += 1
        return value

    def current_lr(self):
        return self.optimizer.param_groups[0]["lr"]

    def batches(self, epoch):
        gen = torch.Generator().manual_seed((self.dls.seed or 0) * 1000003 + epoch)
        lengths = torch.maximum(self.src_len, self.tgt_len)
        for idx in bucketed_batches(lengths, self.dls.batch_size, gen):
            T_src, T_tgt = int(self.src_len[idx].max()), int(self.tgt_len[idx].max())
            yield (self.src[idx, :T_src].to(self.device, non_blocking=True),
                   self.tgt[idx, :T_tgt].to(self.device, non_blocking=True))

    def run(self, callback=None):
        """Train for ``dl_studio.epochs`` epochs (or ``max_minutes``); return the losses.

        ``callback(trainer)``, if given, is called after every step; returning True stops
        training there (a checkpoint is written, as when ``max_minutes`` runs out).
        """
        self.model.train()
        start = time.monotonic()
        n_batches = math.ceil(len(self.src) / self.dls.batch_size)
        out_of_time = False
        for epoch in range(self.epoch, self.dls.epochs):
            self.epoch = epoch
            bar = tqdm(self.batches(epoch), total=n_batches, leave=False,
                       desc=f"epoch {epoch + 1}/{self.dls.epochs}", mininterval=1.0)
            total, count = 0.0, 0
            for src, tgt in bar:
                loss = self.train_step(src, tgt)
                self.train_losses.append(loss)
                total, count = total + loss, count + 1
                if self.step % 20 == 0:
                    bar.set_postfix(loss=f"{total / count:.3f}", lr=f"{self.current_lr():.2e}")
                if (self.max_minutes and time.monotonic() - start > 60 * self.max_minutes) \
                        or (callback is not None and callback(self)):
                    out_of_time = True
                    break
            bar.close()
            log.info("epoch %d/%d: mean loss %.4f, lr %.2e, %.0f s", epoch + 1, self.dls.epochs,
                     total / max(count, 1), self.current_lr(), time.monotonic() - start)
            due = ((epoch + 1) % self.xformer.checkpoint_freq == 0
                   or epoch + 1 == self.dls.epochs)
            if self.xformer.save_checkpoints and self.checkpoints_dir and (due or out_of_time):
                self.save(epoch)
            if out_of_time:
                log.info("stopped early after %.1f minutes", (time.monotonic() - start) / 60)
                break
        self.model.eval()
        if self.display_train_loss:
            self.plot_losses()
        return self.train_losses

    # -----------------------------------------------------------------------------------
    def payload(self, epoch):
        """Everything a later script needs, in one dict (see DLStudio.checkpoints)."""
        x = self.xformer
        return {
            "format": FORMAT, "variant": x.variant, "epoch": epoch, "step": self.step,
            "container_args": x.constructor_args(),
            "encoder_config": self.encoder.config(), "decoder_config": self.decoder.config(),
            "vocab_en": list(x.vocab_en), "vocab_es": list(x.vocab_es),
            "vocab_fingerprint": x.vocab_fingerprint,
            "model": {"embeddings_generator_en": x.embeddings_generator_en.state_dict(),
                      "embeddings_generator_es": x.embeddings_generator_es.state_dict(),
                      "encoder": self.encoder.state_dict(),
                      "decoder": self.decoder.state_dict()},
            "optimizer": self.optimizer.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])},
            "train_losses": list(self.train_losses),
        }

    def save(self, epoch):
        path = checkpoint_path(self.checkpoints_dir, epoch)
        save_checkpoint(self.payload(epoch), path)
        log.info("checkpoint written: %s", path)
        return path

    def plot_losses(self):
        from matplotlib.figure import Figure
        folder = self.checkpoints_dir or "."
        os.makedirs(folder, exist_ok=True)
        fig = Figure(figsize=(7, 4))
        ax = fig.add_subplot()
        losses = torch.tensor(self.train_losses)
        k = max(1, len(losses) // 200)
        smooth = losses[: len(losses) // k * k].view(-1, k).mean(1) if len(losses) >= k else losses
        ax.plot(torch.arange(len(smooth)) * k, smooth)
        ax.set_xlabel("training step")
        ax.set_ylabel("cross-entropy loss")
        ax.set_title(f"Transformer{self.xformer.variant}: training loss")
        path = os.path.join(folder, "train_loss.png")
        fig.savefig(path, dpi=100)
        log.info("loss curve written: %s", path)
        return path

