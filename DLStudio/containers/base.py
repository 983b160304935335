"""What every DLStudio container adds to the architecture's parts (`Container`: settings,
optimiser, warm-up, rebuilding from a checkpoint), and what the containers of one kind of text
share (`TextModel`). DLStudio.Transformers builds its containers on these."""

from ..checkpoints import (
    CheckpointError,
    Restored,
    class_path,
    container_class,
    load_checkpoint,
    load_into,
    with_weights,
)
from ..data.vocabulary import DataView, tokenizer_from_state
from ..runtime.studio import DLStudio
from ..training.schedule import COOLDOWN, BudgetedOptim, ScheduledOptim, adam

__all__ = ["Container", "TextModel"]


class Container:
    """What every DLStudio container adds to its parts: its settings (``settings_class``,
    DLStudio.containers.settings: the constructor's keywords, what a checkpoint records and what
    --resume compares), the optimiser DLStudio's scripts train with, and the warm-up as
    DLStudio names it (``TransformerFG.ScheduledOptim``)."""

    ScheduledOptim = ScheduledOptim       # the warm-up of Vaswani et al. 2017, eq. 3
    BudgetedOptim = BudgetedOptim         # schedule="budget": down to zero when it ends
    settings_class = None
    tokenizer_of = staticmethod(tokenizer_from_state)     # a checkpoint's tokenizer_state

    def take_settings(self, dl_studio, settings):
        """Check the keywords against ``settings_class`` and set each setting here."""
        self.dl_studio, self.class_path = dl_studio, class_path(type(self))
        checked = self.settings_class.checked(type(self).__name__, settings)
        checked.apply_to(self)
        return checked

    def described(self, **more):
        """What a checkpoint records of this container: its class, its settings as they
        are now, which of them shape the weights and which identify a run."""
        settings = self.settings_class
        return {"variant": self.variant, "container_class": self.class_path,
                "container_args": settings.record(self), "shape_args": settings.shape_names(),
                "shape_defaults": settings.shape_defaults(),
                "identity_args": settings.names("identity"),
                "identity_defaults": settings.identity_defaults(), **more}

    def make_optimizer(self, params):
        """Adam (``optimizer_params``): post-LN (FG) with ``num_warmup_steps`` > 0 driven by
        the warm-up of `ScheduledOptim`; pre-LN, or FG with ``num_warmup_steps=0`` (to see
        what the warm-up is for), at ``dl_studio.learning_rate``. ``schedule="budget"``:
        `BudgetedOptim` from the same peak (FG: after its warm-up), down to zero at the end
        of ``max_steps`` or ``max_minutes``; ``"cooldown"``: the same, falling over the
        budget's last fifth only (`COOLDOWN`)."""
        warm_up = not self.norm_first and self.num_warmup_steps
        schedule = getattr(self, "schedule", "warmup")
        if schedule in ("budget", "cooldown"):
            # the same peak as without a budget (FG: the warm-up's; PreLN: the rate), then
            # down to zero at the budget's end (the trainer tells it where that is)
            peak = (self.ScheduledOptim(None, self.lr_mul, self.embedding_size,
                                        self.num_warmup_steps).lr_at(self.num_warmup_steps)
                    if warm_up else self.dl_studio.learning_rate)
            return self.BudgetedOptim(adam(params, 0.0, self.optimizer_params), peak,
                                      self.num_warmup_steps if warm_up else 0,
                                      cooldown=COOLDOWN if schedule == "cooldown" else 1.0)
        if not warm_up:
            return adam(params, self.dl_studio.learning_rate, self.optimizer_params)
        return self.ScheduledOptim(adam(params, 0.0, self.optimizer_params), self.lr_mul,
                                   self.embedding_size, self.num_warmup_steps)

    @classmethod
    def rebuilt(cls, path, dl_studio, model_class, base, expected, weights="raw"):
        """The `Restored` of a checkpoint of a container that is itself the model
        (visTransformer, TransformerGPT: ``base``), in eval mode on the device. ``expected``
        says what the file should have held."""
        payload = with_weights(load_checkpoint(path), weights, path)
        if payload.get("variant") != base.variant:
            raise CheckpointError(f"{path} holds a {payload.get('variant')} model, not "
                                  f"{expected}")
        cls = container_class(payload, path, cls, model_class, {base.variant: base})
        dls = dl_studio or DLStudio(seed=None)
        extra = ({"vocab": cls.tokenizer_of(payload["tokenizer_state"])}
                 if "tokenizer_state" in payload else {})
        model = cls(dl_studio=dls, **extra,
                    **cls.settings_class.from_record(payload["container_args"]))
        load_into(model, payload)
        model = model.to(dls.device).eval()
        return Restored(model, model, payload)


class TextModel(Container):
    """What the containers that read sentences of one kind share (TransformerGPT,
    TransformerBERT): their text as read-only views of ``self.data`` (a TextData or a
    MaskedText), and a description that keeps the tokenizer, so the file alone rebuilds it."""

    training_sentences = DataView("training_sentences")
    held_out_sentences = DataView("held_out_sentences")
    vocab = DataView("vocab")

    def description(self):
        """What rebuilds this model: its settings and its tokenizer (DLStudio.checkpoints)."""
        return self.described(tokenizer_state=self.vocab.state(),
                              vocab_fingerprint=self.vocab.fingerprint)

    def load_weights(self, checkpoint):
        return load_into(self, checkpoint)
