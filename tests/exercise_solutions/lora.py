import math

import torch
import torch.nn as nn

from DLStudio.Transformers import TransformerGPT


class MyLoRA(TransformerGPT.LoRA):
    def reset_parameters(self):
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
            self.B.zero_()

    def delta(self, rows=slice(None)):
        return self.scale * (self.B[rows] @ self.A)

    def merged(self, W, rows=slice(None)):
        return W + self.delta(rows)


class MyTransformer(TransformerGPT):
    LoRA = MyLoRA
