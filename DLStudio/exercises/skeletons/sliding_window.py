"""Exercise `sliding_window`: the attention window of Mistral (and of Gemma's local layers).

With a sliding window of W, each token attends to the W tokens up to it, itself included:
query i sees key j when i - W < j <= i. Write MyAttention.windowed:

windowed(mask, x, offset, window):  the mask with every key further back than the window
    hidden too. x (B, T_q, M) holds the queries, at positions offset .. offset + T_q - 1
    (offset: the tokens already in the key/value cache while decoding; 0 otherwise); the
    keys are all offset + T_q tokens so far. mask is None or a bool tensor broadcastable to
    (B, H, T_q, T_k) (the causal mask, padding), True where a query may not look. Return
    it with the window's hidden keys added (mask | far): a bool tensor broadcastable to
    (B, H, T_q, T_k), T_k = offset + T_q, on x's device.

Self-attention calls it where its model has a window:
    mask = self.windowed(mask, x, self.kv_cache.length, self.window)
The model's own windowed is switched off while the checks run. MyTransformer is a
TransformerGPT that builds your attention; built with window=W (or read from a Mistral
folder) it slides.

    dlstudio check sliding_window sliding_window.py [--inside MISTRAL_FOLDER]
    python3 train_gpt.py --model-class sliding_window:MyTransformer --window 8
"""
import torch

from DLStudio.Transformers import TransformerGPT


class MyAttention(TransformerGPT.SelfAttention):
    @staticmethod
    def windowed(mask, x, offset, window):
        raise NotImplementedError


class MyTransformer(TransformerGPT):
    SelfAttention = MyAttention
