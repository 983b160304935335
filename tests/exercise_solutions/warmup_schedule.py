from DLStudio.Transformers import TransformerFG


class MySchedule(TransformerFG.ScheduledOptim):
    def lr_at(self, step):
        rise = step * self.n_warmup_steps ** -1.5
        fall = step ** -0.5
        return self.lr_mul * self.d_model ** -0.5 * min(rise, fall)


class MyTransformer(TransformerFG):
    ScheduledOptim = MySchedule
