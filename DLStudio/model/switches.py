"""Every switch of the architecture's parts (architecture.TransformerParts' keywords beyond
the sizes): another design than the lecture's, what it changes, and where it is built.

    switch            values (default first)           what changes               where
    dropout           0.0 | p                          Vaswani 5.4                every part
    full_width_heads  False | True                     heads read all of M, then  SelfAttention
                                                       W^O (Vaswani 3.2.2)
    positions         "sinusoidal"                     the paper's code (3.5)     Embeddings-
                      "sinusoidal_halves"              sines in the first half,   Generator
                                                       cosines in the second
                                                       (Marian's layout)
                      "learned"                        a vector per position
                                                       (learned_positions=True)
                      "rope" | "relative" | "alibi"    in the attention           since_2017.py,
                      | "t5"                           (T5's: a learned bias a    relative_
                                                       head and bucket, one       positions.py
                                                       table a stack)
    tie_embeddings    False | True                     output = target words      EncoderDecoder
                                                       (Press and Wolf 2017)
    shared_vocab      False | True                     one matrix for both        EncoderDecoder
                                                       languages (Vaswani 3.4)
    feed_forward      "relu" | "gelu" | "gelu_tanh"    its activation (BERT's,    FeedForward
                      | "silu"                         GPT-2's, Marian's swish)
                      "swiglu" | "geglu"               a gated network            since_2017.py
                      "none"                           no feed-forward sublayer:  BasicEncoder
                                                       attention only (a GPT's
                                                       layers: Elhage et al. 2021)
    feed_forward_size None (2 M) | F                   its hidden width           FeedForward
    norm              "layernorm" | "rmsnorm"          every normalisation        norm_layer
                      | "rmsnorm_plus_one"             (Gemma's: 1 + g)
    norm_eps          1e-5                             inside the root            norm_layer
    scale_embeddings  True | False                     words x sqrt(M) (3.4)      Embeddings-
    norm_embeddings   False | True                     a norm of each word +      Generator
                                                       position (BART's
                                                       layernorm_embedding)
    kv_heads          None | G                         G key/value heads shared   since_2017.py
                                                       by groups of query heads
    qk_norm, window, nope_layers, norm_placement,      since 2023's               since_2023.py
    score_scale, window_layers, window_rope_base
    head_size         None (M / H) | s_qkv             full-width heads' width    SelfAttention
    output_bias       True | False                     the output layer's bias    MasterDecoder-
    output_scale      None | s                         the last states x s before WithMasking
                                                       the output (T5 v1.0's
                                                       M^-1/2)
    own_output        False | True                     with shared_vocab, an      EncoderDecoder
                                                       output matrix of its own
                                                       (Flan-T5's lm_head)
    rope_base, rope_scaling, gated_size                a real model's folder's    since_2017.py
                                                       (containers/hub)
"""

import torch
import torch.nn.functional as F

from . import since_2017

__all__ = ["ACTIVATIONS", "FEED_FORWARDS", "POSITIONS", "NORMS", "IN_ATTENTION", "SINUSOIDS",
           "check"]

FEED_FORWARDS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu", "geglu", "none")
#: The feed-forward network's activation for each value of ``feed_forward`` (its others:
#: SwiGLU's own, or no network).
ACTIVATIONS = {"relu": torch.relu, "gelu": F.gelu,
               "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),   # GPT-2's gelu_new
               "silu": F.silu}                                         # Marian's swish
POSITIONS = ("sinusoidal", "sinusoidal_halves", "learned", "rope", "relative", "alibi", "t5")
NORMS = ("layernorm", "rmsnorm", "rmsnorm_plus_one")
IN_ATTENTION = ("rope", "relative", "alibi", "t5")   # positions no code adds to the words
SINUSOIDS = ("sinusoidal", "sinusoidal_halves")   # a fixed code added to the words


def check(parts, *, positions, learned_positions, shared_vocab, feed_forward, norm,
          head_size, full_width_heads, kv_heads):
    """The switches' values checked (ValueError naming the one that is wrong); returns
    ``positions`` with ``learned_positions=True`` read as "learned", and ``kv_heads``."""
    if learned_positions and positions not in ("sinusoidal", "learned"):
        raise ValueError(f"learned_positions=True is positions='learned', not {positions!r}")
    positions = "learned" if learned_positions else positions
    if shared_vocab and len(set(parts.vocab_sizes.values())) > 1:
        raise ValueError(f"shared_vocab: one vocabulary for both, not {parts.vocab_sizes}")
    for name, value, allowed in (("feed_forward", feed_forward, FEED_FORWARDS),
                                 ("norm", norm, NORMS), ("positions", positions, POSITIONS)):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    if head_size is not None and not full_width_heads:
        raise ValueError("head_size needs full_width_heads=True (a sliced head is M / H wide)")
    return positions, since_2017.checked_kv_heads(kv_heads)
