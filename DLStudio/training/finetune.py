"""Fine-tuning a language model, two more kinds of the trainer's loop (trainer.py):

* `CompletionTrainer`: supervised fine-tuning (instruction tuning). The loss is the
  cross-entropy of the tokens a row marks to learn (training/rows.py: the assistant's turns, a
  completion), never of the prompt's; rows padded to their batch's longest.
* `ClassifyingTrainer`: a classifier on the last token's state (model/decoder_head.py),
  cross-entropy on the label.
* `PreferenceTrainer`: DPO (Rafailov et al. 2023). For a prompt x, a chosen completion
  y_w and a rejected one y_l, with log-probabilities summed over the completion's tokens,

      loss = -log sigmoid( beta [ (log p(y_w|x) - log p_ref(y_w|x))
                                 - (log p(y_l|x) - log p_ref(y_l|x)) ] )

  The reference model is the model before fine-tuning. Its log-probabilities are computed
  once, before the first step (with LoRA: the adapter switched off), so no second copy of
  the weights is kept, under the policy's autocast (bf16: step 0's loss is ln 2 exactly).
  Every dropout is off while DPO trains, as TRL's ``disable_dropout`` has it.

Each kind sums ``accumulate`` batches of ``batch_size`` rows into one optimiser step (gradient
accumulation: the gradient of one batch of ``accumulate x batch_size`` rows, in the memory
of one of ``batch_size``)."""

import hashlib
import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..runtime.precision import Precision
from .trainer import Trainer

__all__ = ["CompletionTrainer", "PreferenceTrainer", "ClassifyingTrainer", "dpo_loss",
           "completion_logps", "padded", "PAD"]

#: The id padding is written with: never read (causal attention looks back only) nor learnt.
PAD = 0


def padded(examples, device):
    """ids (B, T) right-padded, and keep (B, T - 1): True where the next token is learnt."""
    T = max(len(e.ids) for e in examples)
    ids = torch.tensor([e.ids + [PAD] * (T - len(e.ids)) for e in examples], device=device)
    learn = torch.tensor([e.learn + [False] * (T - len(e.learn)) for e in examples],
                         device=device)
    return ids, learn[:, 1:]


def completion_logps(model, ids, keep, run=None):
    """Each row's log-probability of its learnt tokens, summed: (B,)."""
    logits = (model if run is None else run)(ids[:, :-1], keep)             # (N, V)
    token = torch.log_softmax(logits.float(), -1).gather(
        -1, ids[:, 1:][keep][:, None])[:, 0]                                 # (N,)
    rows = keep.nonzero()[:, 0]
    return torch.zeros(len(ids), device=ids.device).index_add(0, rows, token)


def dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta=0.1):
    """The sigmoid DPO loss of each pair, from summed log-probabilities: (P,)."""
    return -F.logsigmoid(beta * ((chosen - ref_chosen) - (rejected - ref_rejected)))


class _Rows(Trainer):
    """What both kinds share: examples batched by length, ``accumulate`` batches a step."""

    def __init__(self, model, examples, held_out, optimizer, dls, checkpoints_dir=None, *,
                 accumulate=1, settings=None, **options):
        if not examples:
            raise ValueError("no rows to fine-tune on")
        self.examples, self.held_out, self.accumulate = examples, held_out, accumulate
        self.settings = dict(settings or {})
        self.num_examples = len(examples)
        self.lengths = torch.tensor([self.length(e) for e in examples])
        self.micro = dls.batch_size
        dls.batch_size = self.micro * accumulate           # a step's rows
        super().__init__(model, optimizer, dls, checkpoints_dir, **options)

    def payload(self, epoch, complete=True):
        """The trainer's checkpoint; with LoRA, of the weights that learn alone (A and B, a
        classifier's head): the frozen rest is the model's source, read again on --resume,
        so a checkpoint is the adapter's size, not the model's."""
        payload = super().payload(epoch, complete)
        if getattr(self.model, "lora_targets", None) and isinstance(payload["model"], dict):
            learnt = {n for n, p in self.model.named_parameters() if p.requires_grad}
            payload["model"] = {k: v for k, v in payload["model"].items() if k in learnt}
            payload["weights_kept"] = "learnt"
        return payload

    def length(self, example):
        return len(example.ids)

    def batches(self, epoch, skip=0):
        """Each step's rows, as ``accumulate`` batches of similar lengths."""
        from .kinds import bucketed_batches
        for idx in self.share(bucketed_batches(self.lengths, self.dls.batch_size,
                                               self.epoch_generator(epoch)), skip):
            yield tuple(self.tensors([self.examples[i] for i in part.tolist()])
                        for part in idx.split(self.micro))

    def batch_loss(self, *parts):
        """The step's mean loss: each part's share of it is differentiated as it comes (its
        graph then freed); the last part's is returned to the trainer's backward."""
        count = sum(self.count(part) for part in parts)
        value = 0.0
        for i, part in enumerate(parts):
            loss = self.part_loss(part) / count
            value += loss.item()
            if i < len(parts) - 1:
                loss.backward()
        return loss, value

    def data_fingerprint(self):
        h = hashlib.sha256()
        for e in self.examples:
            for one in (e if isinstance(e, tuple) else (e,)):
                h.update(repr((one.ids, one.learn)).encode())
        return h.hexdigest()[:16]

    def training_config(self):
        """The trainer's, and what makes this fine-tuning (LoRA's rank, alpha, targets;
        DPO's beta; the accumulation)."""
        return dict(super().training_config(), finetuning=self.settings,
                    accumulate=self.accumulate)


class CompletionTrainer(_Rows):
    """Supervised fine-tuning: cross-entropy on the learnt tokens. ``held_out_score``: the
    held-out rows' perplexity of those tokens."""

    score_name, score_key = "perplexity", "held_out_perplexity"

    def tensors(self, examples):
        return padded(examples, self.device)

    def count(self, part):
        return int(part[1].sum())

    def part_loss(self, part):
        ids, keep = part
        return self.model.loss(ids, run=self.net, keep=keep)[0]

    @torch.no_grad()
    def held_out_score(self, examples=None):
        examples = self.held_out if examples is None else examples
        if not examples:
            return None
        was, nll, count = self.model.training, 0.0, 0
        self.model.eval()
        for at in range(0, len(examples), self.micro):
            ids, keep = padded(examples[at:at + self.micro], self.device)
            total, n = self.model.loss(ids, keep=keep)
            nll, count = nll + float(total), count + n
        self.model.train(was)
        return math.exp(nll / count)


class PreferenceTrainer(_Rows):
    """DPO on (chosen, rejected) pairs with ``beta``. ``held_out_score``: the share of
    held-out pairs whose chosen completion the model prefers more than the reference
    does (the implicit reward of the chosen one is the higher), in percent."""

    score_name, score_key = "preference accuracy", "held_out_preference_accuracy"

    def __init__(self, model, examples, held_out, optimizer, dls, checkpoints_dir=None, *,
                 beta=0.1, **options):
        self.beta = beta
        self.micro_for_reference = dls.batch_size
        device = dls.device
        model.to(device)
        # the reference under the policy's own autocast: at step 0 the two are one model,
        # and the loss is ln 2 exactly, as TRL's is
        precision = Precision(options.get("precision", "fp32"), device)
        for module in model.modules():     # as TRL's disable_dropout: the model's and LoRA's
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        self.reference = self.reference_logps(model, examples, device, precision)  # (P, 2)
        self.held_out_reference = self.reference_logps(model, held_out, device, precision)
        self.index = {id(pair): i for i, pair in enumerate(examples)}
        super().__init__(model, examples, held_out, optimizer, dls, checkpoints_dir, **options)

    def length(self, pair):
        return max(len(e.ids) for e in pair)

    @torch.no_grad()
    def reference_logps(self, model, pairs, device, precision=None):
        """(P, 2) summed log-probabilities of each pair's chosen and rejected completion
        under the model as it is now (with LoRA: switched off), under ``precision``'s
        autocast (the policy's), with a progress bar."""
        if not pairs:
            return torch.zeros(0, 2)
        was = model.training
        model.eval()
        off = model.lora_off() if getattr(model, "lora_targets", None) else nullcontext()
        cast = precision.autocast() if precision is not None else nullcontext()
        out = []
        with off, cast:
            for at in tqdm(range(0, len(pairs), self.micro_for_reference),
                           desc="reference log-probabilities", unit="batch", leave=False):
                chunk = pairs[at:at + self.micro_for_reference]
                ids, keep = padded([e for pair in chunk for e in pair], device)
                out.append(completion_logps(model, ids, keep).view(-1, 2).cpu())
        model.train(was)
        return torch.cat(out)

    def tensors(self, pairs):
        ids, keep = padded([e for pair in pairs for e in pair], self.device)
        reference = self.reference[[self.index[id(p)] for p in pairs]].to(self.device)
        return ids, keep, reference

    def count(self, part):
        return len(part[2])

    def part_loss(self, part):
        ids, keep, reference = part
        logps = completion_logps(self.model, ids, keep, self.net).view(-1, 2)
        return dpo_loss(logps[:, 0], logps[:, 1], reference[:, 0], reference[:, 1],
                        self.beta).sum()

    @torch.no_grad()
    def held_out_score(self):
        if not self.held_out:
            return None
        was, wins = self.model.training, 0
        self.model.eval()
        for at in range(0, len(self.held_out), self.micro):
            chunk = self.held_out[at:at + self.micro]
            ids, keep = padded([e for pair in chunk for e in pair], self.device)
            with self.precision.autocast():            # as its reference was computed
                logps = completion_logps(self.model, ids, keep).view(-1, 2).cpu()
            ratios = logps - self.held_out_reference[at:at + len(chunk)]
            wins += int((ratios[:, 0] > ratios[:, 1]).sum())
        self.model.train(was)
        return 100.0 * wins / len(self.held_out)


class ClassifyingTrainer(_Rows):
    """A classifier on a decoder (model/decoder_head.py): cross-entropy of each text's label
    from the last token's state. ``held_out_score``: the held-out rows' accuracy (%)."""

    score_name, score_key = "accuracy", "held_out_accuracy"

    def tensors(self, examples):
        from ..evaluation.classify_text import padded_rows
        ids, lengths = padded_rows([e.ids for e in examples], self.device)
        return ids, lengths, torch.tensor([e.label for e in examples], device=self.device)

    def count(self, part):
        return len(part[2])

    def part_loss(self, part):
        ids, lengths, labels = part
        return F.cross_entropy(self.model.class_logits(ids, lengths).float(), labels,
                               reduction="sum")

    def data_fingerprint(self):
        h = hashlib.sha256()
        for e in self.examples:
            h.update(repr((e.ids, e.label)).encode())
        return h.hexdigest()[:16]

    @torch.no_grad()
    def held_out_score(self):
        if not self.held_out:
            return None
        was, right = self.model.training, 0
        self.model.eval()
        for at in range(0, len(self.held_out), self.micro):
            ids, lengths, labels = self.tensors(self.held_out[at:at + self.micro])
            right += int((self.model.class_logits(ids, lengths).argmax(-1) == labels).sum())
        self.model.train(was)
        return 100.0 * right / len(self.held_out)
