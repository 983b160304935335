"""Exercise `lora`: LoRA (Hu et al. 2021), fine-tuning by a change of low rank.

A projection W (out x in) stays frozen; what learns is A (r x in) and B (out x r), with
r much smaller than in and out, and the layer computes

    W x + (alpha / r) B A x

Write three things:
    MyLoRA.reset_parameters(self): self.A random (nn.init.kaiming_uniform_(self.A,
        a=math.sqrt(5)), as PEFT), self.B zero, so that the adapted model is exactly the
        model it adapts until the first step.
    MyLoRA.delta(self, rows=slice(None)): the change (alpha / r) B A, of B's ``rows`` only
        -> (len(rows), in). self.A, self.B, self.scale (alpha / r) are set for you. (A
        model's head h reads the rows of W_Q it computes with: rows h s .. (h + 1) s.)
    MyLoRA.merged(self, W, rows=slice(None)): W (len(rows), in) with the change added: the
        weight a head computes with while it learns, and what merge_lora folds in once and
        for all (the adapted model then costs what the base model costs).
The model's own LoRA.reset_parameters, delta and merged are switched off for your code
while the checks run. MyTransformer is a TransformerGPT whose add_lora builds MyLoRA.

    dlstudio check lora lora.py
"""
import math

import torch
import torch.nn as nn

from DLStudio.Transformers import TransformerGPT


class MyLoRA(TransformerGPT.LoRA):
    def reset_parameters(self):
        raise NotImplementedError

    def delta(self, rows=slice(None)):
        raise NotImplementedError

    def merged(self, W, rows=slice(None)):
        raise NotImplementedError


class MyTransformer(TransformerGPT):
    LoRA = MyLoRA
