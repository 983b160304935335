"""Exercise `warmup_schedule`: the learning-rate warm-up of Vaswani et al. 2017, eq. 3.

    lr(step) = lr_mul * d_model^-0.5 * min(step^-0.5, step * n_warmup_steps^-1.5)

The rate rises linearly for n_warmup_steps steps, peaks there, then decays as 1/sqrt(step).
Write `MySchedule.lr_at(step)`: the rate of optimiser step `step` (1, 2, 3, ...: the first
step is 1). The constructor (given) keeps self.lr_mul, self.d_model (the embedding size M)
and self.n_warmup_steps; step() (given) counts the steps and sets the optimiser's rate to
lr_at(that count) before each update. The model's own lr_at is switched off for your class
while the checks run. MyTransformer trains with your schedule.

    dlstudio check warmup_schedule warmup_schedule.py [--train]
    python3 show_lr_schedule.py      (the standard curve, to compare)
    python3 seq2seq_with_transformerFG.py --model-class warmup_schedule:MyTransformer
"""
from DLStudio.Transformers import TransformerFG


class MySchedule(TransformerFG.ScheduledOptim):
    def lr_at(self, step):
        raise NotImplementedError


class MyTransformer(TransformerFG):
    ScheduledOptim = MySchedule
